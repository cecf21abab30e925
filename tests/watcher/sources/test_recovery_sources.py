"""A source whose poll raises and a detector that raises (issue 23), through Watcher.tick on real
files and a real log: the tick goes on, the other sources and detectors still report, the failure
is logged with its traceback and recorded once as source.failed ("internal error: …"), the broken
source's agents keep their class, and its recovery is one source.recovered."""
from __future__ import annotations

import logging

import msgspec

from events.log import EventLog
from projections.observations import AgentObs, Snapshot
from watcher.runtime.loop import Watcher
from watcher.sources.files import GoalsSource

from tests.support.runsworld import S, doc, snap as runs_snap
from tests.support.goalfleet import T0, goal, make


class Flaky(GoalsSource):
    """A real goals source whose poll raises while ``boom`` is set (a source bug)."""

    boom = False

    def poll(self, now, full=True, changed=None):
        if self.boom:
            raise RuntimeError("a source bug")
        return super().poll(now, full, changed)


def two_sources(tmp_path):
    fleet, cfg = make(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    spec = cfg.sources[0]
    flaky = Flaky(msgspec.structs.replace(spec, name="other", glob=f"{other}/*/goal.json"))
    return fleet, other, cfg, flaky


def events(elog, since=0):
    return [(r.type, r.subject, getattr(r.event, "to", None) or getattr(r.event, "error", None))
            for r in elog.read(since)]


def test_a_raising_source_is_one_failure_the_tick_and_the_other_source_go_on(tmp_path, caplog):
    fleet, other, cfg, flaky = two_sources(tmp_path)
    goal(fleet, "a1")
    goal(other, "b1", state="waiting", phase="preguntando")
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.sources.append(flaky)
    w.tick(T0)
    assert {(s, c) for _, s, c in events(elog)} == {("agent:a1", "TRABAJANDO"), ("agent:b1", "RECLAMA")}
    head = elog.head()[0]
    flaky.boom = True
    goal(fleet, "a1", state="waiting", phase="preguntando")    # the good source still reports
    with caplog.at_level(logging.ERROR, logger="fleetwatch"):
        for k in range(1, 6):
            w.tick(T0 + k)
    got = events(elog, head)
    assert sorted(got) == [("agent.classified", "agent:a1", "RECLAMA"),
                           ("source.failed", "source:other", "internal error: RuntimeError")]   # once, not per tick
    crashes = [r for r in caplog.records if "source other crashed" in r.getMessage()]
    assert len(crashes) == 5 and all(r.exc_info for r in crashes)  # logged with its traceback, every poll
    assert w.proj["fleet"]["agents"]["b1"]["class"] == "RECLAMA"   # its agents keep their class
    head = elog.head()[0]
    flaky.boom = False
    w.tick(T0 + 10)
    w.tick(T0 + 11)
    assert events(elog, head) == [("source.recovered", "source:other", "internal error: RuntimeError")]
    assert w.proj["fleet"]["agents"]["b1"]["class"] == "RECLAMA"   # nothing re-classified or pushed again
    w.close()
    elog.close()


def test_a_raising_runs_detector_is_logged_and_fleet_still_classifies(tmp_path, caplog):
    fleet, cfg = make(tmp_path)
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    good = AgentObs(agent="a1", source="fleet", state="waiting", phase="preguntando", contract_sha256="c" * 64,
                    contract_len=1, last_activity=T0)
    hostile = Snapshot(agents={"a1": good}, runs={"R1": "not a run observation"})  # type: ignore[dict-item]
    with caplog.at_level(logging.ERROR, logger="fleetwatch"):
        evs = w.detect(hostile, T0)
    assert [(type(e).__name__, e.agent, e.to) for e in evs] == [("AgentClassified", "a1", "RECLAMA")]
    failed = [r for r in caplog.records if "detector runs failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info
    w.commit(evs, T0)
    ok = Snapshot(agents={"a1": good}, runs=runs_snap(doc("R1", {"facts": S("begin", 1)})).runs)
    assert "StepChanged" in [type(e).__name__ for e in w.detect(ok, T0 + 1)]   # the next good tick reports
    w.close()
    elog.close()
