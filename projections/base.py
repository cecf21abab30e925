"""The projection framework.

A projection is a module with ``NAME``, ``initial() -> state`` and ``fold(state, rec) -> state``
where ``rec`` is an ``events.log.Recorded``. A module may declare ``TYPES`` (a frozenset of event
types): its fold is then only called for those (it must be a no-op for every other type). Folds are pure (no I/O, no clock: time comes from
``rec.time``) and may mutate and return the state they were given (the caller owns it).
State is JSON-encodable with msgspec (dicts, lists, scalars, Structs) so it can be snapshotted;
``STATE_TYPE`` (optional) is the type to decode a snapshot into (default: plain JSON).
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

import msgspec

_enc = msgspec.json.Encoder(order="sorted")


def encode_state(state: Any) -> bytes:
    return _enc.encode(state)


def decode_state(mod: ModuleType, data: bytes) -> Any:
    t = getattr(mod, "STATE_TYPE", None)
    return msgspec.json.decode(data, type=t) if t is not None else msgspec.json.decode(data)


def registry() -> dict[str, ModuleType]:
    """Every projection, by NAME, in fold order."""
    from projections import dod, fanout, fleet, missions, notify, report, runs, swarms

    return {m.NAME: m for m in (fleet, dod, runs, missions, swarms, fanout, notify, report)}


