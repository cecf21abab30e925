"""projections/plans/fold.py, pure: what a plan launches next (deps verified met, max_parallel), when it
stops, which verdicts are acted on and how, the CERRADO a close caused, and a real log's rebuild."""
from __future__ import annotations

import json

from events.log import EventLog
from events.types import AgentClassified, AgentLaunched, AgentUpdated, DodActed, DodVerdict, PlanRecorded, PlanStopped
from projections.plans import fold as plans

T0 = 1_796_000_000.0


def _state(tmp_path, events):
    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    try:
        for i, e in enumerate(events):
            log.append([e], T0 + i)
        st = plans.initial()
        for rec in log.read():
            st = plans.fold(st, rec)
        return st
    finally:
        log.close()


def _plan(mp=1):
    return PlanRecorded(plan="p", max_parallel=mp, sha256="0" * 64, tasks=[
        {"id": "t1", "title": "a", "deps": [], "contract_sha256": "x"},
        {"id": "t2", "title": "b", "deps": ["t1"], "contract_sha256": "x"},
        {"id": "t3", "title": "c", "deps": ["t1"], "contract_sha256": "x"},
        {"id": "t4", "title": "d", "deps": ["t2", "t3"], "contract_sha256": "x"}])


def _launched(t):
    return AgentLaunched(agent=t, task=t, contract_sha256="x", cwd="/", plan="p", task_id=t, by="watcher")


def _met(t, v="met"):
    return DodVerdict(agent=t, verdict=v, verifier="fleetwatch-checks", evidence="e", source="checks",
                      checks=[{"id": "c1", "status": "fail" if v == "failed" else "pass"}])


def test_a_plan_launches_what_its_deps_allow_never_past_max_parallel(tmp_path):
    st = _state(tmp_path, [_plan(mp=1)])
    assert plans.judge(st) == ([("p", "t1")], [])
    (tmp_path / "b").mkdir()
    st = _state(tmp_path / "b", [_plan(mp=1), _launched("t1")])
    assert plans.judge(st) == ([], [])                        # t1 live: nothing else
    (tmp_path / "c").mkdir()
    st = _state(tmp_path / "c", [_plan(mp=1), _launched("t1"), _met("t1")])
    assert plans.judge(st) == ([("p", "t2")], [])             # one at a time, in plan order
    assert plans.judge(st, frozenset({("p", "t2")})) == ([], [])   # decided, not folded yet: still counted
    (tmp_path / "d").mkdir()
    st = _state(tmp_path / "d", [_plan(mp=2), _launched("t1"), _met("t1")])
    assert plans.judge(st) == ([("p", "t2"), ("p", "t3")], [])
    tasks = plans.task_states(st, "p")
    assert tasks["t4"] == {"state": "waiting", "agent": None, "waits_on": ["t2", "t3"], "title": "d"}


def test_a_failed_or_unevaluable_task_stops_its_plan_once(tmp_path):
    st = _state(tmp_path, [_plan(mp=2), _launched("t1"), _met("t1"), _launched("t2"), _met("t2", "failed")])
    assert plans.judge(st) == ([], [("p", "t2", "t2", "failed")])
    (tmp_path / "b").mkdir()
    st = _state(tmp_path / "b", [_plan(mp=2), _launched("t1"), _met("t1", "unevaluable"),
                                 PlanStopped(plan="p", task="t1", agent="t1", verdict="unevaluable")])
    assert plans.judge(st) == ([], [])
    assert plans.status(st, T0)["plans"]["p"]["stopped"]["task"] == "t1"


def test_verdicts_are_acted_on_by_policy_and_once(tmp_path):
    st = _state(tmp_path, [_met("a"), _met("b", "failed"), _met("c", "unevaluable"),
                           DodVerdict(agent="d", verdict="met", verifier="d", evidence="me"),   # self-approval
                           DodVerdict(agent="e", verdict="met", verifier="x", source="goal.json")])  # its own file
    classes = {"b": "RECLAMA"}.get
    assert [(a, act) for a, act, _ in plans.due_actions(st, classes, "close", "nudge")] == [("a", "close"),
                                                                                            ("c", "escalate")]
    assert [(a, act) for a, act, _ in plans.due_actions(st, {}.get, "keep", "nudge")] == [("b", "nudge"),
                                                                                          ("c", "escalate")]
    (tmp_path / "b").mkdir()
    st = _state(tmp_path / "b", [_met("a"), DodActed(agent="a", action="close", verdict_seq=1)])
    assert plans.due_actions(st, {}.get, "close", "nudge") == []
    assert st["closing"] == {"a": [1, False]}


def test_the_cerrado_a_close_caused_is_verified_met(tmp_path):
    st = _state(tmp_path, [_met("a"), DodActed(agent="a", action="close", verdict_seq=1)])
    gone = AgentClassified(agent="a", from_="DICE_TERMINADO", to="CERRADO", reason="session ended")
    other = AgentClassified(agent="b", from_="DICE_TERMINADO", to="CERRADO", reason="session ended")
    renamed = AgentUpdated(agent="a", changed=["reason"], reason="session ended")
    out = plans.amend(st, [gone, other, renamed])
    assert [(e.agent, e.reason) for e in out] == [("a", "verified met"), ("b", "session ended")]


def test_rebuild_check_covers_the_plans_projection(tmp_path):
    import subprocess
    import sys

    db = tmp_path / "e.db"
    log = EventLog(str(db), durability="normal")
    for i, e in enumerate([_plan(), _launched("t1"), _met("t1"), DodActed(agent="t1", action="close", verdict_seq=3)]):
        log.append([e], T0 + i)
    log.close()
    fw = [sys.executable, "-c", "import sys; from watcher.entry import main; sys.argv[0]='fleetwatch'; main()"]
    r = subprocess.run([*fw, "rebuild", "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([*fw, "rebuild", "--check", "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    st = json.loads(subprocess.run([*fw, "status", "--json", "--db", str(db)], capture_output=True, text=True,
                                   timeout=120).stdout)
    assert st["plans"]["p"]["by_state"]["met"] == ["t1"] and st["loop"]["acted"] == {"close": 1}


def test_a_task_that_ended_without_a_met_verdict_stops_its_plan(tmp_path):
    st = _state(tmp_path, [_plan(mp=2), _launched("t1"),
                           AgentClassified(agent="t1", from_="TRABAJANDO", to="CERRADO", reason="tmux window gone")])
    assert plans.judge(st) == ([], [("p", "t1", "t1", "closed")])
