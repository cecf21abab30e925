"""The fleet's and dod's detectors as the watcher runs them (watcher/runtime/schedule.py's
FleetTicker and DodTicker), called the way their tests call them: ``step(state, snap, now,
stall_after=..., memo=previous)`` -> (events, the ticker to pass as ``memo`` next tick; its miss
counts in ``.absent``), and ``dod_step`` likewise; ``obs`` is the termination machine's tests'
observation (busy, haciendo, a contract, active at NOW); ``Fold`` folds fleet and dod from
classifications on a virtual clock."""
from __future__ import annotations

from typing import Any

from events.log import Recorded, iso
from events.types import AgentClassified, tag_of
from projections.dod import fold as dod
from projections.fleet import fold as fleet
from projections.observations import AgentObs
from watcher.runtime.schedule import DodTicker, FleetTicker
from watcher.runtime.state import Projections

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


class Fold:
    """fleet + dod folded from events on a virtual clock (no DB: the folds are pure)."""

    def __init__(self) -> None:
        self.p = Projections({"fleet": fleet, "dod": dod})
        self.seq = 0

    def cls(self, agent: str, to: str, t: float) -> int:
        self.seq += 1
        ev = AgentClassified(agent=agent, to=to, state="busy")
        self.p.fold(Recorded(self.seq, f"id{self.seq}", iso(t), tag_of(ev), ev.subject, 1, ev, b"", b""))
        return self.seq

    def until(self, seq: int, t: float) -> None:
        """Filler classifications of one busy agent up to ``seq`` (inclusive)."""
        while self.seq < seq:
            self.cls("busy", "TRABAJANDO", t)

    def has(self, agent: str) -> tuple[bool, bool]:
        return agent in self.p["fleet"]["agents"], agent in self.p["dod"]["agents"]
