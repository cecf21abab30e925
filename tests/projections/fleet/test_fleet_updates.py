"""Status tells the truth: state, phase, task, target and last activity changes within a class
are recorded as ``agent.updated`` events (edge-triggered), so the folded state holds the values
of the last tick, not of the last class change. Real log, virtual clock."""
from __future__ import annotations

from events.log import EventLog
from events.types import AgentUpdated
from projections.fleet import fold as fleet
from watcher.runtime.state import Projections, rebuild

from tests.support.fleetupdates import NOW, obs, snap, tick


def test_waiting_preguntando_then_busy_preguntando_is_recorded_within_the_class(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    evs, memo = tick(elog, p, snap(obs(state="waiting", phase="preguntando")), NOW)
    assert [e.to for e in evs] == ["RECLAMA"]
    evs, memo = tick(elog, p, snap(obs(state="busy", phase="preguntando")), NOW + 1, memo)
    # the reason's cause changed too ("waiting for the human" -> "phase preguntando"): recorded with it
    assert len(evs) == 1 and isinstance(evs[0], AgentUpdated) and evs[0].changed == ["state", "reason"]
    a = p.states["fleet"]["agents"]["a1"]
    assert (a["class"], a["state"], a["phase"], a["reason"]) == ("RECLAMA", "busy", "preguntando", "phase preguntando")


def test_no_event_while_nothing_changes(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    o = obs()
    _, memo = tick(elog, p, snap(o), NOW)
    head = elog.head()[0]
    for i in range(1, 20):                       # same object, then an equal new one each tick
        _, memo = tick(elog, p, snap(o if i % 2 else obs()), NOW + i, memo)
    assert elog.head()[0] == head


def test_task_target_and_phase_changes_each_give_one_event(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    _, memo = tick(elog, p, snap(obs(state="busy")), NOW)
    evs, memo = tick(elog, p, snap(obs(state="busy", task="t2")), NOW + 1, memo)
    assert [e.changed for e in evs] == [["task"]]
    evs, memo = tick(elog, p, snap(obs(state="busy", task="t2", target="fleet:3")), NOW + 2, memo)
    assert [e.changed for e in evs] == [["target"]]
    evs, memo = tick(elog, p, snap(obs(state="busy", task="t2", phase="testing")), NOW + 3, memo)
    assert [e.changed for e in evs] == [["phase"]]          # target not seen this tick: kept
    a = p.states["fleet"]["agents"]["a1"]
    assert (a["task"], a["target"], a["phase"]) == ("t2", "fleet:3", "testeando")


def test_last_activity_is_recorded_in_steps_not_per_hook(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    _, memo = tick(elog, p, snap(obs(state="busy")), NOW)
    n = 0
    for i in range(1, 601):                      # activity every second for 10 minutes
        evs, memo = tick(elog, p, snap(obs(state="busy", last_activity=NOW + i)), NOW + i, memo)
        n += len(evs)
    assert n == 600 // int(fleet.ACTIVITY_STEP)


def test_rebuild_agrees_with_the_live_fold_after_updates(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    memo = None
    for i, (st, ph) in enumerate([("waiting", "haciendo"), ("busy", "preguntando"), ("idle", "bloqueado"),
                                  ("busy", "haciendo"), ("busy", "testeando")]):
        _, memo = tick(elog, p, snap(obs(state=st, phase=ph, task=f"t{i}")), NOW + i, memo)
    _, diff = rebuild(elog, check=False, store=False)
    q = Projections.load(elog)
    assert q.states["fleet"] == p.states["fleet"]
    assert p.states["fleet"]["agents"]["a1"]["task"] == "t4"
