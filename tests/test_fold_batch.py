"""A projection's ``fold_batch`` folds a batch to the very state of its ``fold`` one event at a
time (notify, report, fanout, fleet, dod and swarms have one; real SQLite event logs: the seeded logs of
tests/support/seededlogs.py: every type both fold, prunes by time and by the cap, sweeps,
times shared by an append's events and jumping across UTC midnights, batch edges inside a run
of one time), and report's with a time outside iso's shape (the day computed from ``t``)."""
from __future__ import annotations

import pytest

from projections.dod import fold as dod
from projections.fleet import fanout
from projections.fleet import fold as fleet
from projections.notify import fold as notify
from projections.report import fold as report
from projections.swarms import fold as swarms
from projections.base import encode_state
from watcher.runtime.state import TimeCache

from tests.support import seededlogs as rb


def both(mod, recs: list, batch: int) -> tuple[dict, dict]:
    """``mod``'s state over ``recs`` folded one by one, and by ``fold_batch`` in lists of ``batch``
    (with the replay's time cache where the module reads times through one)."""
    one = mod.initial()
    for rec in recs:
        one = mod.fold(one, rec)
    many = mod.initial()
    times = (TimeCache(mod.TIME).__getitem__,) if mod.TIME is not None else ()   # None: reads no time
    for i in range(0, len(recs), batch):
        many = mod.fold_batch(many, recs[i:i + batch], *times)
    return one, many


@pytest.mark.parametrize("mod", [notify, report, fanout, fleet, dod, swarms],
                         ids=["notify", "report", "fanout", "fleet", "dod", "swarms"])
@pytest.mark.parametrize("mix,batch", [("churn", 1), ("churn", 37), ("bench_mix", 500)])
def test_fold_batch_is_fold_one_by_one(tmp_path, mod, mix, batch):
    elog = getattr(rb, mix)(str(tmp_path / "e.db"), **({"appends": 160} if mix == "churn" else {"n": 6000}))
    recs = list(elog.read(0))
    elog.close()
    one, many = both(mod, recs, batch)
    assert encode_state(many) == encode_state(one)
    if mod is notify:
        assert len(one["conds"]) > 10
    elif mod is fanout:
        assert one["n"] > 10
    elif mod in (fleet, dod):
        assert len(one["agents"]) > 10
    elif mod is swarms:
        assert one["groups"]
    else:
        assert one["first"] is not None and len(one["days"]) > (1 if mix == "churn" else 0)   # churn crosses midnights


def test_report_a_time_outside_iso_shape_gets_its_day_from_t(tmp_path):
    """``+00:00`` instead of ``Z`` (a foreign writer's time): the day from the parsed time, as fold does."""
    elog = rb.churn(str(tmp_path / "e.db"), appends=30)
    recs = list(elog.read(0))
    elog.close()
    odd = [type(r)(r.seq, r.id, r.time.replace("Z", "+00:00"), r.type, r.subject, r.version, r.event, r.data,
                   r.hash) for r in recs]
    one = report.initial()
    for rec in odd:
        one = report.fold(one, rec)
    many = report.fold_batch(report.initial(), odd)
    assert encode_state(many) == encode_state(one)


@pytest.mark.parametrize("batch", [1, 100, 3000])
def test_fanout_births_past_keep_are_cut_the_same(tmp_path, batch):
    """A first tick's worth of new agents (3,000 births, every one past KEEP cut by fold, once a
    batch by fold_batch), some closing and coming back: the same state, the last KEEP births."""
    from events.log import EventLog
    from events.types import AgentClassified

    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    elog.append([AgentClassified(agent=f"a{i:05d}", to="TRABAJANDO", source="fleet") for i in range(3000)],
                1_800_000_000.0)
    elog.append([AgentClassified(agent=f"a{i:05d}", to="CERRADO", source="fleet") for i in range(0, 3000, 7)],
                1_800_000_060.0)
    elog.append([AgentClassified(agent=f"a{i:05d}", to="RECLAMA", source="fleet") for i in range(0, 3000, 5)],
                1_800_000_120.0)
    recs = list(elog.read(0))
    elog.close()
    one, many = both(fanout, recs, batch)
    assert encode_state(many) == encode_state(one)
    assert one["n"] > 3000 and len(one["births"]) == fanout.KEEP

