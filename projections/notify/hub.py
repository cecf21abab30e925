"""The hub's conditions (watcher/hub/): a hole in a host's chain, a host whose messages speak for
another, a hub whose consumer is another hub's. One push each (oneshot), never cleared by an event:
each says something that happened, not a level. Pure."""
from __future__ import annotations

from typing import Any, Callable

# as projections.notify.fold.ONESHOT: type -> (subject, class, severity, name, text)
ONESHOT: dict[str, Callable[[Any], tuple[str, str, str, str, str] | None]] = {
    "host.gap": lambda ev: (f"host:{ev.host}", "HOST_GAP", "warning", ev.host,
                            f"seqs {ev.first}..{ev.last} never reached the hub"),
    "host.refused": lambda ev: (f"host:{ev.host}", "HOST_REFUSED", "urgent", ev.host,
                                f"refused: its messages speak for {ev.names or 'another host'} ({ev.why})"),
    "hub.consumer_taken": lambda ev: ("hub", "HUB_CONSUMER_TAKEN", "urgent", "hub",
                                      f"not consuming: consumer {ev.consumer} belongs to another hub"),
}
