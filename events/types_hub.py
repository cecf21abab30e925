"""Event types of the multi-host hub (watcher/hub/): a host's liveness and its host-local events,
as the hub records them. Part of the one union in ``events.types`` (same tag field and rules:
stable tags, every later field with a default); kept apart so events/types.py stays small."""
from __future__ import annotations

from msgspec import Struct


class _Hub(Struct, frozen=True, tag_field="type", forbid_unknown_fields=False, omit_defaults=False):
    host: str

    @property
    def subject(self) -> str:
        return f"host:{self.host}"


class HostSilent(_Hub, frozen=True, tag="host.silent"):
    """The hub heard no event and no heartbeat from ``host`` for ``after`` seconds."""

    after: float = 0.0
    last_seen: str | None = None  # ISO time of the last message; None if never since the hub started


class HostResumed(_Hub, frozen=True, tag="host.resumed"):
    silent_for: float = 0.0


class HostEvent(_Hub, frozen=True, tag="host.event"):
    """A host's event the hub keeps but does not fold as its own (the host's notices, silences,
    watcher starts, types this version does not know). The original row is in ``hub_origin``."""

    kind: str = ""            # the host's event type
    ref: str = ""             # the host's subject
    seq: int = 0              # the host's seq


class HostGap(_Hub, frozen=True, tag="host.gap"):
    """Seqs ``first``..``last`` of ``host``'s chain never reached the hub: rows arrived past them,
    or the host's heartbeat names a position beyond the hub's last row once the stream is drained
    (rows the stream acknowledged and never delivered: dropped as another message's duplicates)."""

    chain: str = ""
    first: int = 0
    last: int = 0


class HostRefused(_Hub, frozen=True, tag="host.refused"):
    """Messages on ``host``'s subject were refused because they speak for another host or chain
    (``why``: a watcher.hub.wire.Reject value; ``names``: the host they named): the host's
    credentials are used to silence another (recorded once per host and reason per hub run)."""

    why: str = ""
    names: str = ""


class HubConsumerTaken(Struct, frozen=True, tag_field="type", tag="hub.consumer_taken",
                       forbid_unknown_fields=False, omit_defaults=False):
    """This hub refuses to consume: its durable consumer is another hub's (two hubs on one
    consumer each get part of the stream). ``owner``: the other hub as its consumer names it."""

    consumer: str
    owner: str = ""

    @property
    def subject(self) -> str:
        return "hub"
