"""Per-agent records as ``msgspec.Struct``s that read (and write) like the dicts they replaced:
fleet's ``Agent`` and notify's ``NotifyAgent``.

Why Structs: a first tick folds one record per agent into each projection, and an eleven-key dict
takes several times a Struct's memory (and its page faults) in fresh memory (docs/bench.md).
``gc=False``: they hold strings, numbers and None only, so they can be in no reference cycle.

Invariants:
- Encoded exactly as the dicts were: the same keys (``class`` for fleet's ``cls`` field) and,
  through ``projections.base``'s sorted encoder, the same bytes; a snapshot of either decodes into
  these (the projections' ``STATE_TYPE``; a key an older snapshot lacks is None).
- Read as a mapping by everything outside the folds (``rec["class"]``, ``rec.get("target")``,
  ``"task" in rec``, ``dict(rec.items())``; ``rec["nudges"] = 2``): a reader need not know which it
  holds, and a state built by hand as dicts (tests, a reader's own decode) folds and reads the
  same; a record equals the dict of its keys. A record has a fixed set of keys: an unknown one is
  a KeyError, read or written.
"""
# No `from __future__ import annotations`: msgspec reads these annotations as objects, not text to
# compile (`status` imports this module; tests/test_cli_start.py: the fast paths compile nothing).

from typing import Any

import msgspec


class Record(msgspec.Struct, gc=False):
    """The mapping side of a record (the keys are its encoded field names)."""

    def __getitem__(self, key: str) -> Any:
        return getattr(self, _attr(type(self), key))

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, _attr(type(self), key), value)

    def get(self, key: str, default: Any = None) -> Any:
        a = _names(type(self)).get(key)
        return default if a is None else getattr(self, a)

    def __contains__(self, key: object) -> bool:
        return key in _names(type(self))

    def __iter__(self) -> Any:
        return iter(_names(type(self)))

    def __len__(self) -> int:
        return len(self.__struct_fields__)

    def keys(self) -> Any:
        return _names(type(self)).keys()

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, a)) for k, a in _names(type(self)).items()]

    def values(self) -> list[Any]:
        return [getattr(self, a) for a in self.__struct_fields__]

    def __eq__(self, other: object) -> Any:   # equal to the same record, or to the dict it stands for
        if type(other) is type(self):
            return all(getattr(self, a) == getattr(other, a) for a in self.__struct_fields__)
        if isinstance(other, dict):
            return dict(self.items()) == other
        return NotImplemented

    def __ne__(self, other: object) -> Any:   # (a Struct's own != would not ask __eq__)
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq


_NAMES: dict[type, dict[str, str]] = {}   # record type -> {encoded key: attribute}


def _names(cls: type) -> dict[str, str]:
    m = _NAMES.get(cls)
    if m is None:
        m = _NAMES[cls] = dict(zip(cls.__struct_encode_fields__, cls.__struct_fields__))  # type: ignore[attr-defined]
    return m


def _attr(cls: type, key: str) -> str:
    a = _names(cls).get(key)
    if a is None:
        raise KeyError(key)
    return a


class Agent(Record):
    """fleet's record of an agent (projections/fleet/fold.py)."""

    cls: Any = msgspec.field(default=None, name="class")
    since: Any = None
    state: Any = None
    phase: Any = None
    reason: Any = None
    source: Any = None
    contract_sha256: Any = None
    contract_len: Any = None
    target: Any = None
    task: Any = None
    last_activity: Any = None
    waiting_for: Any = None   # {"kind", "tool"} while the agent waits (projections.fleet.waiting)


class NotifyAgent(Record):
    """notify's record of an agent (projections/notify/fold.py): its class and since when, the seq of
    that classification, its state, its open condition, and the nudges of this stall."""

    cls: Any = None
    since: Any = None
    seq: Any = None
    state: Any = None
    cond: Any = None
    nudges: Any = 0
    nudged_at: Any = None


class CondView(Record):
    """What a reader (`status`, `summary`) decodes of each notify condition: enough to say how it
    was handled (``projections.present.views.handling``); the condition's other fields are skipped."""

    subject: Any = ""
    cls: Any = ""
    cleared: Any = None
    acked: Any = None
    acked_at: Any = None
    acked_by: Any = None
