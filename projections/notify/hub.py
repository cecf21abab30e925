"""The hub's conditions (watcher/hub/): a hole in a host's chain, a host whose messages speak for
another, a hub whose consumer is another hub's. One push each (oneshot), never cleared by an event:
each says something that happened, not a level. Pure."""
from __future__ import annotations

from typing import Any


def hub_handlers(new: Any) -> dict[str, Any]:
    """{event type: fold handler}; ``new`` is the notify projection's condition maker."""

    def gap(st: dict, ev: Any, seq: int, t: float) -> None:
        new(st, f"host:{ev.host}", "HOST_GAP", "warning", seq, t, ev.host,
            f"seqs {ev.first}..{ev.last} never reached the hub", oneshot=True)

    def refused(st: dict, ev: Any, seq: int, t: float) -> None:
        new(st, f"host:{ev.host}", "HOST_REFUSED", "urgent", seq, t, ev.host,
            f"refused: its messages speak for {ev.names or 'another host'} ({ev.why})", oneshot=True)

    def taken(st: dict, ev: Any, seq: int, t: float) -> None:
        new(st, "hub", "HUB_CONSUMER_TAKEN", "urgent", seq, t, "hub",
            f"not consuming: consumer {ev.consumer} belongs to another hub", oneshot=True)

    return {"host.gap": gap, "host.refused": refused, "hub.consumer_taken": taken}
