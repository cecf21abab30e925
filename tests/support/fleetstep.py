"""The fleet's detector as the watcher runs it (watcher/runtime/schedule.FleetTicker), called the
way the tests of the termination machine call it: ``step(state, snap, now, stall_after=...,
memo=previous)`` -> (events, the ticker to pass as ``memo`` next tick; its miss counts in
``.absent``)."""
from __future__ import annotations

from typing import Any

from projections import fleet
from watcher.runtime.schedule import FleetTicker


def step(prev: dict[str, Any], snap: Any, now: float, *, stall_after: float, memo: FleetTicker | None = None,
         busy_silence: float | None = None, busy_silence_tool: float | None = None) -> tuple[list[Any], FleetTicker]:
    ticker = memo if memo is not None else FleetTicker()
    return ticker.tick(prev, snap, now, fleet.Limits(stall_after, busy_silence, busy_silence_tool)), ticker
