"""The fleet's and dod's detectors as the watcher runs them (watcher/runtime/schedule.py's
FleetTicker and DodTicker), called the way their tests call them: ``step(state, snap, now,
stall_after=..., memo=previous)`` -> (events, the ticker to pass as ``memo`` next tick; its miss
counts in ``.absent``), and ``dod_step`` likewise; ``obs`` is the termination machine's tests'
observation (busy, haciendo, a contract, active at NOW)."""
from __future__ import annotations

from typing import Any

from projections.fleet import fold as fleet
from projections.observations import AgentObs
from watcher.runtime.schedule import DodTicker, FleetTicker

NOW = 1_800_000_000.0
STALL = 900.0


def obs(**kw) -> AgentObs:
    base = dict(agent="a1", source="fleet", state="busy", phase="haciendo", contract_sha256="c" * 64,
                contract_len=10, last_activity=NOW)
    base.update(kw)
    return AgentObs(**base)


def step(prev: dict[str, Any], snap: Any, now: float, *, stall_after: float, memo: FleetTicker | None = None,
         busy_silence: float | None = None, busy_silence_tool: float | None = None) -> tuple[list[Any], FleetTicker]:
    ticker = memo if memo is not None else FleetTicker()
    return ticker.tick(prev, snap, now, fleet.Limits(stall_after, busy_silence, busy_silence_tool)), ticker


def dod_step(state: dict[str, Any], snap: Any, now: float, memo: DodTicker | None = None,
             claim_unverified_after: float = 1800.0, seq: int | None = None) -> tuple[list[Any], DodTicker]:
    """dod's detector as the watcher runs it (``DodTicker``), called as its memo was: -> (events,
    the ticker to pass as ``memo`` next tick). ``seq`` is not needed (the ticker compares records)."""
    ticker = memo if memo is not None else DodTicker()
    return ticker.tick(state, snap, now, claim_unverified_after), ticker
