"""Runs projection: fixtures, transitions, idempotence, overdue, backoff clock, taint, bad input.

Real EventLog in tmp_path: detected events are appended, read back and folded (as the loop does).
Virtual clock: every ``now`` is passed in.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.log import iso, parse_iso
from projections.runs import fold as runs
from projections.base import encode_state
from projections.observations import Snapshot

from tests.support.runsworld import MIN, T0, Harness, S, at, doc, fixture_docs, rules, snap, types


# ---- fixtures -------------------------------------------------------------------------------
def test_fixtures_first_tick(h):
    t1, t2 = fixture_docs()
    now = parse_iso("2026-11-29T11:20:00Z")
    evs = h.tick(snap(t1, t2), now)
    by = {r: [e for e in evs if e.run == r] for r in ("T1-val-0042", "T2-heart-0007")}
    assert rules(by["T1-val-0042"]) == []                        # T1 is clean
    assert {"audit-branch", "launch-request-id", "deploy-gate"} <= set(rules(by["T2-heart-0007"]))
    steps1 = [e for e in by["T1-val-0042"] if type(e).__name__ == "StepChanged"]
    assert [e.step for e in steps1] == list(runs.ORDER[:10])     # first transitions, fixed order
    assert all(e.from_ is None for e in steps1)
    assert types(by["T1-val-0042"])[0] == "run.changed"
    # the second tick on the same files says nothing (idempotence), a re-parsed copy neither
    assert h.tick(snap(t1, t2), now + 1) == []
    assert h.tick(snap(*fixture_docs()), now + 2) == []
    st_ = {r["run"]: r for r in runs.status(h.state, now)["runs"]}
    t2s = st_["T2-heart-0007"]
    assert t2s["progress"] == "3/12" and t2s["current"] == "launch_intent"
    assert t2s["in_flight"] == ["apply", "launch_intent"]
    assert {"audit-branch", "deploy-gate", "launch-request-id"} <= set(t2s["violations"])
    assert t2s["next_retry"] == "2026-11-29T11:15:00.000Z" and t2s["failures"] == 1
    assert st_["T1-val-0042"]["progress"] == "9/12" and st_["T1-val-0042"]["violations"] == []
    assert [s["step"] for s in t2s["steps"]] == list(runs.ORDER)
    lines = runs.summary(h.state, now)
    assert len(lines) == 1 and "T2-heart-0007" in lines[0] and "audit-branch" in lines[0]


def test_rebuilt_state_detects_nothing(h):
    t1, t2 = fixture_docs()
    now = parse_iso("2026-11-29T11:20:00Z")
    h.tick(snap(t1, t2), now)
    fresh = runs.initial()
    for rec in h.log.read(0):
        fresh = runs.fold(fresh, rec)
    assert encode_state(fresh) == encode_state(h.state)
    assert runs.detect(copy.deepcopy(fresh), snap(*fixture_docs()), now + 5) == []


def test_deterministic_order():
    a, b = doc("A", {"facts": S("done")}), doc("B", {"facts": S("begin")})
    s1 = Snapshot(runs={"B": snap(b).runs["B"], "A": snap(a).runs["A"]})
    s2 = snap(a, b)
    assert runs.detect(runs.initial(), s1, T0) == runs.detect(runs.initial(), s2, T0)


# ---- transitions ----------------------------------------------------------------------------
def test_each_status_change_is_one_event(h):
    h.tick(snap(doc(steps={"facts": S("begin", 0)})), T0)
    evs = h.tick(snap(doc(steps={"facts": S("done", 1), "audit": S("begin", 2)})), T0 + 3 * MIN)
    sc = [(e.step, e.from_, e.to) for e in evs]
    assert sc == [("facts", "begin", "done"), ("audit", None, "begin")]
    assert h.tick(snap(doc(steps={"facts": S("done", 1), "audit": S("begin", 2)})), T0 + 4 * MIN) == []
    # data change without status change (reconciled) is recorded, not a new attempt
    evs = h.tick(snap(doc(steps={"facts": S("done", 1), "audit": S("begin", 2, verdict="pass")})), T0 + 5 * MIN)
    assert [(e.from_, e.to, e.attempt) for e in evs] == [("begin", "begin", 1)] and "data changed" in evs[0].reason
    # a step removed from the file
    evs = h.tick(snap(doc(steps={"audit": S("begin", 2, verdict="pass")})), T0 + 6 * MIN)
    assert [(e.step, e.from_, e.to) for e in evs] == [("facts", "done", "")]


def test_run_level_fields_and_gone(h):
    h.tick(snap(doc()), T0)
    assert h.tick(snap(doc(work_complete=True)), T0 + 1)[0].work_complete is True
    # the source failed this tick: its runs keep their state, nothing is said
    assert h.tick(Snapshot(runs={}, failed={"steps": "EIO"}), T0 + 2) == []
    evs = h.tick(Snapshot(runs={}), T0 + 3)                       # gone, said once
    assert [(type(e).__name__, e.gone) for e in evs] == [("RunChanged", True)]
    assert h.tick(Snapshot(runs={}), T0 + 4) == []
    evs = h.tick(snap(doc(work_complete=True)), T0 + 5)           # back
    assert [(type(e).__name__, e.gone) for e in evs] == [("RunChanged", False)]


# ---- overdue (virtual clock) ------------------------------------------------------------------
def test_overdue_once_per_begin(h):
    d = doc(steps={"facts": S("done", 0), "audit": S("begin", 1)})
    assert types(h.tick(snap(d), T0 + 45 * MIN)) == ["run.changed", "step.changed", "step.changed"]
    assert h.tick(snap(d), T0 + 46 * MIN) == []                   # exactly 45 min: not yet
    evs = h.tick(snap(d), T0 + 46 * MIN + 1)
    assert [(e.step, e.deadline_s, e.attempt) for e in evs] == [("audit", 2700.0, 1)]
    assert h.tick(snap(d), T0 + 90 * MIN) == []                   # once per begin
    assert runs.status(h.state, T0)["runs"][0]["overdue"] == ["audit"]
    d2 = doc(steps={"facts": S("done", 0), "audit": S("begin", 100)})  # begun again
    assert types(h.tick(snap(d2), T0 + 101 * MIN)) == ["step.changed"]
    assert types(h.tick(snap(d2), T0 + 146 * MIN)) == ["step.overdue"]
    d3 = doc(steps={"facts": S("done", 0), "audit": S("done", 147)})
    h.tick(snap(d3), T0 + 147 * MIN)
    assert runs.status(h.state, T0)["runs"][0]["overdue"] == []


def test_overdue_per_step_deadline_and_missing_at(h):
    d = doc(steps={"facts": S("begin", 0), "audit": S("begin", None)})
    pol = dict(default_deadline=3600.0, deadlines={"facts": 60.0})
    evs = h.tick(snap(d), T0 + 2 * MIN, **pol)                   # facts over its 60 s at once
    assert [e.step for e in evs if type(e).__name__ == "StepOverdue"] == ["facts"]
    audit = [e for e in evs if getattr(e, "step", "") == "audit"][0]
    assert "missing at" in audit.reason
    assert h.tick(snap(d), T0 + 61 * MIN, **pol) == []           # audit counts from when it was seen
    assert [e.step for e in h.tick(snap(d), T0 + 62 * MIN + 1, **pol)] == ["audit"]


# ---- retry backoff (virtual clock) and abandon -------------------------------------------------
def test_backoff_with_missing_at_uses_now(h):
    lf = at(0)
    h.tick(snap(doc(steps={"facts": S("fail", 0)}, failures=1, last_failure_at=lf)), T0 + 1 * MIN)
    evs = h.tick(snap(doc(steps={"facts": S("begin", None)}, failures=1, last_failure_at=lf)), T0 + 9 * MIN)
    assert rules(evs) == ["retry-backoff"]
    h2 = doc("R2", steps={"facts": S("fail", 0)}, failures=1, last_failure_at=lf)
    h.tick(snap(h2), T0 + 1 * MIN)
    evs = h.tick(snap(doc("R2", steps={"facts": S("begin", None)}, failures=1, last_failure_at=lf)), T0 + 10 * MIN)
    assert rules(evs) == []                                       # 10 min after failure 1: allowed


def test_abandoned_once_and_next_retry(h):
    d = doc(steps={"facts": S("fail", 0)}, failures=2, last_failure_at=at(0))
    h.tick(snap(d), T0 + MIN)
    r = runs.status(h.state, T0 + MIN)["runs"][0]
    assert r["next_retry"] == iso(T0 + 20 * MIN) and r["retry_wait_s"] == 19 * MIN
    d3 = doc(steps={"facts": S("fail", 30)}, failures=3, last_failure_at=at(30))
    evs = h.tick(snap(d3), T0 + 31 * MIN)
    assert [e.failures for e in evs if type(e).__name__ == "RunAbandoned"] == [3]
    assert h.tick(snap(d3), T0 + 200 * MIN) == []
    r = runs.status(h.state, T0)["runs"][0]
    assert r["abandoned"] and r["next_retry"] is None
    assert "abandoned after 3 failures" in runs.summary(h.state, T0)[0]
    # any attempt after the third failure, however late
    evs = h.tick(snap(doc(steps={"facts": S("begin", 500)}, failures=3, last_failure_at=at(30))), T0 + 501 * MIN)
    assert rules(evs) == ["retry-backoff"]


# ---- taint through continue_from ---------------------------------------------------------------
TAINT = [
    # (audit data of the run continued from, chain, expect audit-branch on B's apply)
    ({"verdict": "fail"}, False, True),           # verdict fail travels
    ({"verdict": "review"}, False, True),         # review too
    ({"verdict": "pass", "tainted": True}, False, True),  # tainted flag
    ({"verdict": "pass"}, False, False),          # a clean parent: no taint
    ({"verdict": "fail"}, True, True),            # transitive: A(fail) <- M(pass) <- B
]


@pytest.mark.parametrize("audit,chain,want", TAINT)
def test_taint_through_continue_from(h, audit, chain, want):
    a = doc("A", {"facts": S("done", 0), "audit": S("done", 1, **audit)})
    docs = [a]
    parent = "A"
    if chain:
        docs.append(doc("M", {"audit": S("done", 2, verdict="pass")}, continue_from="A"))
        parent = "M"
    h.tick(snap(*docs), T0 + 3 * MIN)
    b = doc("B", {"audit": S("done", 4, verdict="pass"), "apply": S("begin", 5)}, continue_from=parent)
    evs = h.tick(snap(*docs, b), T0 + 6 * MIN)
    assert (rules(evs) == ["audit-branch"]) is want
    if want:
        assert "continues from tainted run" in [e for e in evs if type(e).__name__ == "RuleViolated"][0].detail


def test_continue_from_cycle_does_not_crash(h):
    a = doc("A", {"apply": S("begin", 1)}, continue_from="B")
    b = doc("B", {"apply": S("begin", 1)}, continue_from="A")
    assert rules(h.tick(snap(a, b), T0 + 2 * MIN)) == ["session-concurrency"]  # no taint; both in flight


# ---- bad input -----------------------------------------------------------------------------
def test_bad_input_recorded_never_crashes(h):
    evs = h.tick(snap(errors={"X": "not JSON (two reads)"}), T0)
    assert [(type(e).__name__, e.error) for e in evs] == [("RunChanged", "not JSON (two reads)")]
    assert h.tick(snap(errors={"X": "not JSON (two reads)"}), T0 + 1) == []
    weird = doc("X", {"facts": S("done", 0), "wobble": S("begin", 1), "audit": S("running", 2),
                      "analyze": {"status": "done"}, "apply": "begin", "validate": 7,
                      "deploy": S("done", 3) | {"at": "yesterday"}, "notify": S("begin", 4)},
                failures="two", branch=5, work_complete="yes")
    evs = h.tick(snap(weird), T0 + 2)
    rc = evs[0]
    assert type(rc).__name__ == "RunChanged" and rc.error and rc.failures == 0 and rc.branch is None
    sc = {e.step: e for e in evs if type(e).__name__ == "StepChanged"}
    assert "unknown step" in sc["wobble"].reason and sc["wobble"].to == "begin"   # kept, not dropped
    assert sc["audit"].to == "running" and "unknown status" in sc["audit"].reason
    assert "missing at" in sc["analyze"].reason
    assert "not an object" in sc["apply"].reason and sc["apply"].to == "begin"
    assert sc["validate"].to == "" and "not an object" in sc["validate"].reason
    assert "unparseable at" in sc["deploy"].reason
    assert "out of order" in sc["notify"].reason
    assert h.tick(snap(weird), T0 + 3) == []
    st_ = runs.status(h.state, T0)["runs"][0]
    assert st_["steps"][-1]["step"] == "wobble"                    # unknown names listed after the 12
    evs = h.tick(snap(doc("X", steps=[1, 2])), T0 + 4)              # steps not an object: steps kept
    assert types(evs) == ["run.changed"] and "steps is not an object" in evs[0].error


JSONV = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=8)
STEP = st.fixed_dictionaries({}, optional={
    "status": st.sampled_from(["begin", "done", "fail", "odd", 3, None]),
    "at": st.sampled_from([at(1), at(50), 1_800_000_000, "nope", None, True]),
    "data": st.one_of(JSONV, st.fixed_dictionaries({}, optional={
        "sha256": st.sampled_from(["a" * 64, "x"]), "candidate": st.sampled_from(["c", ""]),
        "reconciled": st.booleans(), "request_id": st.sampled_from(["r", None]),
        "verdict": st.sampled_from(["pass", "fail", "review"]), "tainted": st.booleans()}))})
DOC = st.fixed_dictionaries({"run": st.just("F")}, optional={
    "steps": st.one_of(JSONV, st.dictionaries(st.sampled_from(list(runs.ORDER) + ["zz"]), st.one_of(STEP, JSONV), max_size=6)),
    "failures": st.one_of(st.integers(-1, 5), JSONV), "last_failure_at": st.sampled_from([at(0), "bad", 5, None]),
    "branch": st.sampled_from(["full", "diagnose_only", None, 3]), "work_complete": JSONV,
    "continue_from": st.sampled_from(["F", "G", None, 1])})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(DOC, min_size=1, max_size=3))
def test_fuzz_any_doc_sequence_is_idempotent(tmp_path_factory, docs):
    h = Harness(tmp_path_factory.mktemp("fz"))
    try:
        for i, d in enumerate(docs):
            now = T0 + i * 30 * MIN
            h.tick(snap(d), now)
            assert h.tick(snap(copy.deepcopy(d)), now) == []       # detect -> fold -> detect: nothing
    finally:
        h.close()
