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
