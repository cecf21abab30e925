"""The report's bounded copy (the watcher's projection), reached (issue 23): KEEP_DAYS days of
figures and MAX_SAMPLES durations per kind, at and past each bound, against the exact copy that
``fleetwatch report`` folds (``initial(bounded=False)``)."""
from __future__ import annotations

from types import SimpleNamespace as NS

from events.timefmt import iso
from events.types import AgentClassified
from projections.report import fold as report
from projections.report.fold import KEEP_DAYS, MAX_SAMPLES

T0 = 1_795_132_800.0          # 2026-11-20T00:00:00Z
DAY = 86400.0


def both():
    return report.initial(bounded=True), report.initial(bounded=False)


def fold(states, seq: int, t: float, agent: str, to: str) -> None:
    rec = NS(seq=seq, type="agent.classified", time=iso(t), event=AgentClassified(agent=agent, to=to, source="fleet"))
    for st in states:
        report.fold(st, rec)


def reclama_per_day(states, days: int) -> None:
    """One RECLAMA of 60 s on each of ``days`` UTC days."""
    seq = 0
    for d in range(days):
        for to, dt in (("RECLAMA", 3600.0), ("TRABAJANDO", 3660.0)):
            seq += 1
            fold(states, seq, T0 + d * DAY + dt, "a1", to)


def test_keep_days_exactly_then_the_oldest_day_goes():
    b, u = both()
    reclama_per_day((b, u), KEEP_DAYS)
    assert len(b["days"]) == KEEP_DAYS and b["days"] == u["days"]      # at the bound: all kept
    reclama_per_day((b, u), KEEP_DAYS + 1)                              # (the same days again, then one more)
    assert len(b["days"]) == KEEP_DAYS and len(u["days"]) == KEEP_DAYS + 1
    first = report.day_key(T0)
    assert first not in b["days"] and first in u["days"]               # the oldest went
    assert b["days"] == {k: v for k, v in u["days"].items() if k != first}   # the rest as the exact copy


def test_samples_are_cut_to_the_newest_max_samples_past_twice_the_bound():
    b, u = both()
    seq, t = 0, T0
    for i in range(2 * MAX_SAMPLES + 1):
        seq += 1
        fold((b, u), seq, t, "a1", "RECLAMA")
        t += i % 7 + 1                                                  # durations 1..7 s
        seq += 1
        fold((b, u), seq, t, "a1", "TRABAJANDO")
        if i == 2 * MAX_SAMPLES - 1:
            assert len(b["samples"]["reclama"]) == 2 * MAX_SAMPLES      # at the bound: nothing cut
    assert len(u["samples"]["reclama"]) == 2 * MAX_SAMPLES + 1
    assert b["samples"]["reclama"] == u["samples"]["reclama"][-MAX_SAMPLES:]   # the newest, in order
    assert b["days"] == u["days"]                                       # day figures are not samples


def test_the_bounded_copy_forgets_a_closed_agent_and_not_an_open_one():
    b, u = both()
    fold((b, u), 1, T0, "gone", "RECLAMA")
    fold((b, u), 2, T0 + 60, "keep", "RECLAMA")
    fold((b, u), 3, T0 + 120, "gone", "CERRADO")
    fold((b, u), 4, T0 + 90 * DAY, "other", "TRABAJANDO")               # months later
    assert "gone" not in b["per_agent"] and "gone" in u["per_agent"]
    assert "keep" in b["agents"] and b["agents"]["keep"]["cls"] == "RECLAMA"
