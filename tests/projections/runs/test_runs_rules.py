"""The seven rules of docs/contract.md: one table per rule, with its negative cases.

Each row: (steps before, steps after) of run R1 (plus optional other runs), run through the real
log and fold; we check which occurrences of the rule were reported, and that a persisting
violation is not reported again on later ticks.
"""
from __future__ import annotations

import pytest

from projections.runs import fold as runs
from tests.support.runsworld import EVID, HEX, MIN, T0, S, at, doc, snap, violations

DONE_UP_TO_DEPLOY = {s: S("done", i) for i, s in enumerate(runs.ORDER[:6])}


EVIDENCE = [
    # (before, after, violations)
    (None, {"upload_intent": S("begin", 50, **EVID)}, 0),                       # sha256 + candidate
    (None, {"upload_intent": S("begin", 50, candidate="c-1")}, 1),              # no sha256
    (None, {"upload_intent": S("begin", 50, sha256="ab" * 31, candidate="c")}, 1),  # 62 hex
    (None, {"upload_intent": S("begin", 50, sha256="zz" * 32, candidate="c")}, 1),  # not hex
    (None, {"upload_intent": S("begin", 50, sha256=HEX)}, 1),                   # no candidate
    (None, {"upload_intent": S("done", 50, sha256=HEX, candidate=" ")}, 1),     # blank candidate
    ({"upload_intent": S("begin", 50)}, {"upload_intent": S("done", 51)}, 0),   # persists: once (before)
]


@pytest.mark.parametrize("before,after,n", EVIDENCE)
def test_upload_intent_evidence(h, before, after, n):
    assert len(violations(h, before, after, "upload-intent-evidence")) == n


OPEN = doc("R0", {"upload_intent": S("done", 10, **EVID)})
CONFIRMED = doc("R0", {"upload_intent": S("done", 10, **EVID), "upload_confirmed": S("done", 11)})
RECONCILED = doc("R0", {"upload_intent": S("done", 10, **EVID, reconciled=True)})
LATER = doc("R0", {"upload_intent": S("begin", 60, **EVID)})
SINGLE = [
    # (before, after, other runs, violations)
    (None, {"upload_intent": S("begin", 50, **EVID)}, [OPEN], 1),        # R0's intent still open
    (None, {"upload_intent": S("begin", 50, **EVID)}, [CONFIRMED], 0),   # confirmed: closed
    (None, {"upload_intent": S("begin", 50, **EVID)}, [RECONCILED], 0),  # a reconciled intent allows a new one
    (None, {"upload_intent": S("begin", 50, **EVID)}, [LATER], 0),       # same tick, R0 is the later one
    (None, {"upload_intent": S("begin", 50, **EVID)}, [], 0),            # alone
    ({"upload_intent": S("fail", 50, **EVID)},
     {"upload_intent": S("begin", 60, **EVID)}, [], 1),                  # own failed intent not reconciled
    ({"upload_intent": S("fail", 50, **EVID)},
     {"upload_intent": S("begin", 60, **EVID, reconciled=True)}, [], 0),  # ... reconciled on the retry
    ({"upload_intent": S("fail", 50, **EVID, reconciled=True)},
     {"upload_intent": S("begin", 60, **EVID)}, [], 0),                  # ... reconciled before the retry
]


@pytest.mark.parametrize("before,after,others,n", SINGLE)
def test_single_open_intent(h, before, after, others, n):
    assert len(violations(h, before, after, "single-open-intent", others)) == n


def test_single_open_intent_earlier_tick_wins(h):
    # R0 seen first (even with a later `at`): R1 beginning afterwards is the violation, not R0
    h.tick(snap(doc("R0", {"upload_intent": S("begin", 90, **EVID)})), T0 + 95 * MIN)
    got = violations(h, None, {"upload_intent": S("begin", 50, **EVID)}, "single-open-intent", [LATER])
    assert len(got) == 1 and "R0" in got[0].detail


LAUNCH = [
    # (before, after, violations)
    (None, {"launch_intent": S("begin", 50, request_id="req-1")}, 0),   # has request_id
    (None, {"launch_intent": S("begin", 50, request_id=42)}, 0),        # a number is an id
    (None, {"launch_intent": S("begin", 50)}, 1),                       # no data at all
    (None, {"launch_intent": S("begin", 50, request_id="")}, 1),        # empty
    ({"launch_intent": S("begin", 50)}, {"launch_intent": S("done", 51)}, 0),  # persisting: once
]


@pytest.mark.parametrize("before,after,n", LAUNCH)
def test_launch_request_id(h, before, after, n):
    assert len(violations(h, before, after, "launch-request-id")) == n


def _with(steps: dict, **more) -> dict:
    d = dict(steps)
    d.update(more)
    return d


LI = S("begin", 50, request_id="r")
GATE = [
    # (before, after, violations)
    (None, _with(DONE_UP_TO_DEPLOY, launch_intent=LI), 0),                               # validate+deploy done allow it
    (None, _with(DONE_UP_TO_DEPLOY, deploy=S("begin", 5), launch_intent=LI), 1),         # deploy in flight
    (None, _with({k: v for k, v in DONE_UP_TO_DEPLOY.items() if k != "validate"}, launch_intent=LI), 1),  # no validate
    (None, _with(DONE_UP_TO_DEPLOY, deploy=S("done", 60), launch_intent=LI), 1),         # deploy done after launch began
    (_with(DONE_UP_TO_DEPLOY, deploy=S("fail", 5)),
     _with(DONE_UP_TO_DEPLOY, deploy=S("fail", 5), launch_intent=LI), 1),                # deploy failed
    (_with(DONE_UP_TO_DEPLOY, launch_intent=LI), _with(DONE_UP_TO_DEPLOY, launch_intent=S("done", 55, request_id="r")), 0),
]


@pytest.mark.parametrize("before,after,n", GATE)
def test_deploy_gate(h, before, after, n):
    assert len(violations(h, before, after, "deploy-gate")) == n


AUDIT = [
    # (after steps, run fields, violations)
    ({"audit": S("done", 1, verdict="pass"), "apply": S("begin", 2)}, {}, 0),                       # clean
    ({"audit": S("done", 1, verdict="review"), "apply": S("begin", 2)}, {}, 1),                     # review
    ({"audit": S("done", 1, verdict="fail"), "apply": S("begin", 2), "ledger": S("begin", 3)}, {}, 2),  # two steps
    ({"audit": S("done", 1, verdict="pass", tainted=True), "upload_intent": S("begin", 2, **EVID)}, {}, 1),  # tainted
    ({"audit": S("done", 1, verdict="pass"), "launch_intent": S("begin", 2, request_id="r")},
     {"branch": "diagnose_only"}, 1),                                                              # diagnose_only
    ({"audit": S("done", 1, verdict="pass"), "analyze": S("begin", 2)}, {"branch": "diagnose_only"}, 0),  # analyze allowed
    ({"audit": S("done", 1, verdict="fail"), "notify": S("begin", 2)}, {}, 0),                      # notify allowed
]


@pytest.mark.parametrize("after,fields,n", AUDIT)
def test_audit_branch(h, after, fields, n):
    assert len(violations(h, None, after, "audit-branch", **fields)) == n


REDO = [
    # (before, after, violations)
    ({"apply": S("done", 10)}, {"apply": S("begin", 20)}, 1),   # done, begins again
    ({"apply": S("done", 10)}, {"apply": S("done", 20)}, 1),    # redone between polls (at changed)
    ({"apply": S("fail", 10)}, {"apply": S("begin", 20)}, 0),   # a failed step may be retried
    ({"apply": S("begin", 10)}, {"apply": S("done", 20)}, 0),   # normal progress
    ({"apply": S("done", 10)}, {"apply": S("done", 10)}, 0),    # nothing changed
    ({"apply": {"status": "done", "at": "2026-11-29T10:10:00Z"}},
     {"apply": {"status": "done", "at": "2026-11-29T10:10:00.000+00:00"}}, 0),  # same instant, other spelling
]


@pytest.mark.parametrize("before,after,n", REDO)
def test_no_redo(h, before, after, n):
    assert len(violations(h, before, after, "no-redo")) == n


BACKOFF = [
    # (failures, attempt starts this many minutes after failure n, violations)
    (1, 5, 1),      # < 10 min
    (1, 10, 0),     # exactly 10 min: allowed
    (1, 11, 0),
    (2, 19, 1),     # < 20 min
    (2, 20, 0),
    (3, 600, 1),    # any attempt after the 3rd failure
    (0, 1, 0),      # no failure, no backoff
]


@pytest.mark.parametrize("failures,delta,n", BACKOFF)
def test_retry_backoff(h, failures, delta, n):
    lf = at(40) if failures else None
    before = {"facts": S("done", 30), "audit": S("fail", 40)}
    after = {"facts": S("done", 30), "audit": S("begin", 40 + delta)}
    got = violations(h, before, after, "retry-backoff", failures=failures, last_failure_at=lf)
    assert len(got) == n


def test_retry_backoff_fail_status_is_not_evidence(h):
    # a step that failed a little after last_failure_at is the failure itself, not a new attempt
    got = violations(h, None, {"audit": S("fail", 41)}, "retry-backoff", failures=1, last_failure_at=at(40))
    assert got == []


def test_rule_names_are_the_contract():
    assert sorted(r.value for r in runs.Rule) == sorted([
        "upload-intent-evidence", "single-open-intent", "launch-request-id", "deploy-gate",
        "audit-branch", "no-redo", "retry-backoff",
        # issue 22 (docs/contract.md "More rules")
        "reconciled-no-reupload", "launch-request-stable", "upload-needs-audit", "board-daily-quota",
        "duplicate-upload", "session-concurrency", "session-daily-cap", "inactive-board"])


def test_the_step_rules_are_one_function_each_keyed_by_the_rule():
    """runs_rules.STEP_RULES: one function per step rule keyed by its contract name, tried in
    the table's order; a rule's function alone decides it (a change nothing else breaks: only
    launch-request-id answers for a launch_intent without a request id)."""
    from projections.runs.rules import STEP_RULES, Change, Look, Rule

    assert list(STEP_RULES) == [Rule.AUDIT_BRANCH, Rule.LAUNCH_REQUEST_STABLE, Rule.RECONCILED_NO_REUPLOAD,
                                Rule.UPLOAD_NEEDS_AUDIT, Rule.NO_REDO, Rule.SINGLE_OPEN_INTENT, Rule.DEPLOY_GATE,
                                Rule.UPLOAD_INTENT_EVIDENCE, Rule.LAUNCH_REQUEST_ID]
    ch = Change("launch_intent", "begin", "begin", None, None, {}, "", 1, False, None)
    lk = Look("R1", {}, {}, None, None, ch, False)  # type: ignore[arg-type]
    got = {rule.value: check(lk) for rule, check in STEP_RULES.items() if rule is not Rule.AUDIT_BRANCH}
    assert got.pop("launch-request-id") == "launch_intent has no data.request_id"
    assert set(got.values()) == {""}
