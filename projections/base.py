"""The projection framework.

A projection is a module with ``NAME``, ``initial() -> state`` and ``fold(state, rec) -> state``
where ``rec`` is an ``events.log.Recorded`` (``TYPES``, ``TIME``, ``READS_ID``, ``STATE_TYPE``:
:class:`Projection`). Folds are pure (no I/O, no clock: time comes from ``rec.time``) and may
mutate and return the state they were given (the caller owns it). One fold per projection, of one
record: a caller folding many calls it per record. State is JSON-encodable with msgspec (dicts,
lists, scalars) so it can be snapshotted.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol, cast

import msgspec

_enc = msgspec.json.Encoder(order="sorted")


def encode_state(state: Any) -> bytes:
    return _enc.encode(state)


class Projection(Protocol):
    """What the runtime reads of a projection module (every module of :data:`ORDER` declares all
    of it; a module is checked against it by mypy below). ``TYPES``: the event types its fold is
    called for (a no-op for every other type; None = every type). ``TIME``: the function its fold
    reads ``rec.time`` with; its fold then also takes ``times`` (default ``TIME``), and a caller
    folding many events passes its own cache of it (``watcher.runtime.state.TimeCache``); the
    module keeps no cache (None = the fold reads ``rec.time`` itself). ``READS_ID``: whether the
    fold reads ``rec.id``. ``STATE_TYPE``: the type a snapshot decodes into (None = plain JSON); a
    snapshot of another layout (a key missing, another ``layout`` literal) fails to decode, so
    ``Projections.load`` replays the log instead of folding into a stale shape."""

    @property
    def NAME(self) -> str: ...

    @property
    def TYPES(self) -> Collection[str] | None: ...

    @property
    def TIME(self) -> Callable[[str], float] | None: ...

    @property
    def READS_ID(self) -> bool: ...

    @property
    def STATE_TYPE(self) -> Any: ...

    def initial(self) -> Any: ...

    @property
    def fold(self) -> Callable[..., Any]: ...   # (state, rec[, times]) -> state: ``times`` when TIME is set


class Detector(Projection, Protocol):
    """A projection with a detector: ``detect(state, snap, now, **policy) -> events`` (pure), run
    by the watcher's tick for the projections its policy table names (watcher/runtime/loop.py)."""

    @property
    def detect(self) -> Callable[..., list[Any]]: ...


def decode_state(mod: Projection, data: bytes) -> Any:
    t = mod.STATE_TYPE
    return msgspec.json.decode(data, type=t) if t is not None else msgspec.json.decode(data)


ORDER = ("fleet", "dod", "runs", "missions", "swarms", "fanout", "notify", "report", "plans")  # fold order

# each projection's module, by NAME: a room's fold (projections/<room>/fold.py), or fleet's fan-out
MODULES = {n: f"projections.{n}.fold" for n in ORDER} | {"fanout": "projections.fleet.fanout"}


def registry(names: Collection[str] | None = None) -> dict[str, Projection]:
    """Every projection, by NAME, in fold order; ``names``: only those (a reader that shows a few
    imports no other fold: `status`, watcher/cli/status.py)."""
    return {n: cast(Projection, importlib.import_module(MODULES[n])) for n in ORDER if names is None or n in names}


if TYPE_CHECKING:   # mypy checks every module of ORDER against Projection (nothing imported at run time)
    from projections.dod import fold as dod
    from projections.fleet import fanout
    from projections.fleet import fold as fleet
    from projections.missions import fold as missions
    from projections.notify import fold as notify
    from projections.plans import fold as plans
    from projections.report import fold as report
    from projections.runs import fold as runs
    from projections.swarms import fold as swarms

    _ALL: list[Projection] = [fleet, dod, runs, missions, swarms, fanout, notify, report, plans]


