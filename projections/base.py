"""The projection framework.

A projection is a module with ``NAME``, ``initial() -> state`` and ``fold(state, rec) -> state``
where ``rec`` is an ``events.log.Recorded``. A module may declare ``TYPES`` (a frozenset of event
types): its fold is then only called for those (it must be a no-op for every other type). Folds are pure (no I/O, no clock: time comes from
``rec.time``) and may mutate and return the state they were given (the caller owns it).
A module may declare ``TIME``, the function its fold reads ``rec.time`` with: its fold then also
takes ``times`` (default ``TIME``), and a caller folding many events passes its own cache of it
(``watcher.runtime.state.TimeCache``); the module keeps no cache.
State is JSON-encodable with msgspec (dicts, lists, scalars, Structs) so it can be snapshotted;
``STATE_TYPE`` (optional) is the type to decode a snapshot into (default: plain JSON).
"""
from __future__ import annotations

from collections.abc import Collection
from types import ModuleType
from typing import Any

import msgspec

_enc = msgspec.json.Encoder(order="sorted")


def encode_state(state: Any) -> bytes:
    return _enc.encode(state)


def decode_state(mod: ModuleType, data: bytes) -> Any:
    t = getattr(mod, "STATE_TYPE", None)
    return msgspec.json.decode(data, type=t) if t is not None else msgspec.json.decode(data)


ORDER = ("fleet", "dod", "runs", "missions", "swarms", "fanout", "notify", "report", "plans")  # fold order; module = NAME


def registry(names: Collection[str] | None = None) -> dict[str, ModuleType]:
    """Every projection, by NAME, in fold order; ``names``: only those (a reader that shows a few
    imports no other fold: `status`, watcher/cli/status.py)."""
    import importlib

    return {n: importlib.import_module(f"projections.{n}") for n in ORDER if names is None or n in names}


