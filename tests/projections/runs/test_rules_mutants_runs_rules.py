"""Run rules that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (docs/contract.md, steps.json)."""
from __future__ import annotations

import time

import pytest

from tests.support.runsworld import EVID, HEX, MIN, T0, S, at, doc, snap, violations


@pytest.fixture
def madrid(monkeypatch):
    """The process's local zone is not UTC (CET in November), as on a user's machine."""
    monkeypatch.setenv("TZ", "Europe/Madrid")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("last_failure_at", ["2026-11-29T10:40:00", "2026-11-29T10:40:00Z",
                                             "2026-11-29T11:40:00+01:00", "2026-11-29T05:40:00-05:00"])
@pytest.mark.parametrize("delta,n", [(5, 1), (11, 0)])
def test_retry_backoff_reads_naive_times_as_utc_and_offsets_as_written(h, madrid, last_failure_at, delta, n):
    """retry-backoff: attempt 2 starts 10 min after failure 1 at the earliest. The failure time is
    10:40 UTC in each spelling (naive = UTC, whatever the local zone); the attempt at 10:45 UTC
    breaks the rule, the one at 10:51 UTC does not."""
    before = {"facts": S("done", 30), "audit": S("fail", 40)}
    after = {"facts": S("done", 30), "audit": S("begin", 40 + delta)}
    got = violations(h, before, after, "retry-backoff", failures=1, last_failure_at=last_failure_at)
    assert len(got) == n


def _all_details(hh, *ticks, **fields) -> list[list[tuple[str, str]]]:
    """Per tick (R1's steps), every rule violated by R1 and every run that could not be evaluated."""
    got = []
    for i, steps in enumerate(ticks):
        evs = hh.tick(snap(doc("R1", steps, **fields)), T0 + (100 + i) * MIN)
        got.append([(e.rule, e.detail) for e in evs if type(e).__name__ == "RuleViolated" and e.run == "R1"]
                   + [("error", e.error) for e in evs if getattr(e, "error", None)])
    return got


def _rule_details(hh, rule: str, *ticks) -> list[list[str]]:
    """Per tick (R1's steps), the details of ``rule`` violations of R1 reported."""
    return [[d for r, d in tick if r == rule] for tick in _all_details(hh, *ticks)]


@pytest.mark.parametrize("rule", ["launch-request-stable", "audit-branch"])
def test_a_step_that_leaves_steps_json_breaks_no_rule(h, rule):
    """launch-request-stable and audit-branch are about a step that begins or a request id that
    changes: a launch_intent that is no longer in steps.json (status gone) does neither."""
    launch = {"audit": S("done", 1, verdict="pass"), "launch_intent": S("begin", 5, request_id="r", continue_from="R0")}
    gone = {"audit": S("done", 1, verdict="fail")}
    assert _rule_details(h, rule, launch, gone, gone) == [[], [], []]


def test_audit_branch_is_a_gated_step_that_begins_not_one_whose_data_changes(h):
    """audit-branch: apply *begins* while the audit says fail. Apply began under a passing audit;
    a later tick where the audit failed and apply's data changed (same status) is no violation."""
    first = {"audit": S("done", 1, verdict="pass"), "apply": S("begin", 2)}
    later = {"audit": S("done", 1, verdict="fail"), "apply": S("begin", 2, continue_from="R0")}
    assert _rule_details(h, "audit-branch", first, later, later) == [[], [], []]


def test_launch_request_stable_tells_apart_long_request_ids_sharing_64_characters(h):
    prefix = "projects/fleet/locations/europe-west1/operations/launch-" + "0" * 8
    assert len(prefix) == 64
    ticks = [{"audit": S("done", 1, verdict="pass"), "launch_intent": S("begin", 5, request_id=prefix + x)}
             for x in "ABC"]
    assert [len(d) for d in _rule_details(h, "launch-request-stable", *ticks)] == [0, 1, 1]


def test_a_long_request_id_kept_the_same_is_no_retry(h):
    """Regression: the run's first request id was kept cut to 64 characters and compared with the
    whole new one, so any stable id longer than 64 was a 'retried with another request_id'."""
    rid = "projects/fleet/locations/europe-west1/operations/launch-" + "0" * 30
    ticks = [{"audit": S("done", 1, verdict="pass"), "launch_intent": S(st, 5 + i, request_id=rid)}
             for i, st in enumerate(("begin", "done", "done"))]
    assert [len(d) for d in _rule_details(h, "launch-request-stable", *ticks)] == [0, 0, 0]


FAILED_AT_40 = {"facts": S("done", 30), "audit": S("fail", 40)}


@pytest.mark.parametrize("after,rule,kw,detail", [
    ({"upload_intent": S("begin", 50, candidate="c-1")}, "upload-intent-evidence", {},
     "upload_intent lacks a 64-hex data.sha256"),
    ({"upload_intent": S("begin", 50, sha256=HEX)}, "upload-intent-evidence", {}, "upload_intent lacks data.candidate"),
    ({"upload_intent": S("begin", 50)}, "upload-intent-evidence", {},
     "upload_intent lacks a 64-hex data.sha256 and data.candidate"),
    ({"audit": S("begin", 1), "upload_intent": S("begin", 50, **EVID)}, "upload-needs-audit", {},
     "upload_intent began while audit is begin (done with verdict pass required)"),
    ({"audit": S("done", 1, verdict="x" * 40), "upload_intent": S("begin", 50, **EVID)}, "upload-needs-audit", {},
     f"upload_intent began after audit verdict {'x' * 32} (pass required)"),          # the verdict cut at 32
    ({"audit": S("done", 1), "upload_intent": S("begin", 50, **EVID)}, "upload-needs-audit", {},
     "upload_intent began after audit verdict missing (pass required)"),
    ({"facts": S("done", 30), "audit": S("begin", 45)}, "retry-backoff", dict(failures=1, last_failure_at=at(40)),
     "attempt 2 started by 2026-11-29T10:45:00.000Z (audit), 5.0 min after failure 1; 10 min required"),
])
def test_a_violations_detail_says_what_broke_the_rule(h, after, rule, kw, detail):
    """`rule.violated` carries `detail`: what is missing, which audit state, which attempt and how
    long after which failure — the words a user reads in the push."""
    before = FAILED_AT_40 if rule == "retry-backoff" else None
    assert [e.detail for e in violations(h, before, after, rule, **kw)] == [detail]


def test_retry_backoff_needs_a_failure_even_with_a_failure_time(h):
    """retry-backoff counts from failure n >= 1: failures 0 with a last_failure_at is no backoff."""
    after = {"facts": S("done", 30), "audit": S("begin", 41)}
    assert violations(h, FAILED_AT_40, after, "retry-backoff", failures=0, last_failure_at=at(40)) == []


def test_retry_backoff_a_step_at_the_failure_time_is_no_attempt(h):
    """The attempt after failure n is a step that starts after it: one recorded at the failure's
    very time is not (here facts, done at 10:40 with the failure)."""
    after = {"facts": S("done", 40), "audit": S("fail", 40)}
    assert violations(h, FAILED_AT_40, after, "retry-backoff", failures=1, last_failure_at=at(40)) == []


@pytest.mark.parametrize("deploy_at,n", [(19, 0), (20, 0), (21, 1)])
def test_deploy_gate_launch_begins_at_or_after_deploy_done(h, deploy_at, n):
    """deploy-gate by the steps' `at`: launch_intent beginning at 10:20 needs deploy done by 10:20
    (at the same instant is allowed; a minute later is a violation)."""
    after = {"validate": S("done", 10), "deploy": S("done", deploy_at), "launch_intent": S("begin", 20, request_id="r")}
    assert len(violations(h, None, after, "deploy-gate")) == n


def test_retry_backoff_without_a_failure_time_checks_no_wait_and_the_tick_goes_on(h):
    """failures 1 with no last_failure_at: no wait can be measured, so no retry-backoff — and the
    attempt (a begin without `at`) is still recorded as a step change."""
    h.tick(snap(doc("R1", FAILED_AT_40, failures=1)), T0 + 100 * MIN)
    evs = h.tick(snap(doc("R1", {"facts": S("done", 30), "audit": S("begin", None)}, failures=1)), T0 + 101 * MIN)
    assert [(e.step, e.to) for e in evs if type(e).__name__ == "StepChanged"] == [("audit", "begin")]
    assert [e for e in evs if type(e).__name__ == "RuleViolated"] == []


# ---- found by the thirteenth session's full mutation run of projections.runs.rules ----------
GATES = {"validate": S("done", 5), "deploy": S("done", 6)}   # deploy-gate holds
LAUNCH_FAILED = {**GATES, "launch_intent": S("fail", 10, request_id="req-1")}


def test_launch_request_stable_a_retry_without_an_id_is_only_launch_request_id(h):
    """A retry that carries no request_id breaks launch-request-id (it has none), not
    launch-request-stable (no other id to compare), and the run is evaluated as usual."""
    assert _all_details(h, LAUNCH_FAILED, {**GATES, "launch_intent": S("begin", 30)}) == \
        [[], [("launch-request-id", "launch_intent has no data.request_id")]]


@pytest.mark.parametrize("older", ["absent", "none"])
def test_launch_request_stable_a_run_folded_without_its_first_id_reads_it_from_the_step(h, older):
    """A runs state from before launch_rid (an older snapshot: the key absent or None) still
    knows the first request id from the launch_intent step it holds."""
    h.tick(snap(doc("R1", LAUNCH_FAILED)), T0 + 100 * MIN)
    r = h.state["runs"]["R1"]
    if older == "absent":
        del r["launch_rid"]
    else:
        r["launch_rid"] = None
    evs = h.tick(snap(doc("R1", {**GATES, "launch_intent": S("begin", 30, request_id="req-2")})), T0 + 101 * MIN)
    assert [e.detail for e in evs if type(e).__name__ == "RuleViolated" and e.rule == "launch-request-stable"] == \
        ["launch_intent retried with request_id 'req-2', first 'req-1' (a retry keeps its id)"]


@pytest.mark.parametrize("audit", [S("", 2), {"at": at(2)}])
def test_upload_needs_audit_an_audit_with_no_status_is_no_audit(h, audit):
    """An audit step whose status is empty or missing has not run: 'began with no audit', not
    'while audit is '."""
    after = {"facts": S("done", 1), "audit": audit, "upload_intent": S("begin", 10, **EVID)}
    assert [e.detail for e in violations(h, None, after, "upload-needs-audit")] == ["upload_intent began with no audit"]


def test_deploy_gate_by_at_is_for_a_launch_that_begins(h):
    """The by-`at` check compares when launch_intent *began*: a launch first seen done carries its
    end time, so a deploy done before that end is no violation (validate and deploy are done)."""
    after = {"validate": S("done", 10), "deploy": S("done", 60), "launch_intent": S("done", 50, request_id="r")}
    assert violations(h, None, after, "deploy-gate") == []


@pytest.mark.parametrize("data", [{}, {"note": "n"}])
def test_deploy_gate_a_gate_step_done_without_at_is_done(h, data):
    """validate and deploy done with no `at` (with or without data): done, no time to call late,
    and the run is evaluated (no rule violated, nothing it could not evaluate)."""
    after = {"validate": S("done", None, **data), "deploy": S("done", None, **data),
             "launch_intent": S("begin", 50, request_id="r")}
    assert _all_details(h, after, after) == [[], []]


@pytest.mark.parametrize("ahead_min,n", [(1.5 * 1440, 1), (1440, 0)])
def test_retry_backoff_an_at_over_a_day_ahead_counts_as_now(h, ahead_min, n):
    """An attempt's `at` more than a day (AHEAD_S) ahead of the watcher's clock is not believed: it
    started by now (10:41, 6 min after failure 1 at 10:35: a violation). Exactly a day ahead is
    a writer's clock, believed: no attempt yet."""
    after = {"facts": S("done", 30), "audit": S("begin", 101 + ahead_min)}
    got = violations(h, None, after, "retry-backoff", failures=1, last_failure_at=at(95))
    assert len(got) == n
    if n:
        assert "started by 2026-11-29T11:41:00.000Z (audit), 6.0 min after failure 1" in got[0].detail


@pytest.mark.parametrize("first", ["audit", "apply"])
def test_retry_backoff_names_the_first_step_of_the_earliest_attempt(h, first):
    """Two steps began at the same time after the failure: the detail names the first of them in
    steps.json's order."""
    other = "apply" if first == "audit" else "audit"
    after = {"facts": S("done", 30), first: S("begin", 99), other: S("begin", 99)}
    got = violations(h, None, after, "retry-backoff", failures=1, last_failure_at=at(95))
    assert len(got) == 1 and f"({first})" in got[0].detail


def test_rid_key_keeps_ids_up_to_64_characters():
    """A request id is kept as itself up to 64 characters; a longer one as its first 48, "~" and
    15 hex of its digest (64 characters: bounded, and two long ids that share a start stay apart)."""
    from projections.runs.rules import rid_key

    assert rid_key("x" * 64) == "x" * 64
    k = rid_key("x" * 65)
    assert len(k) == 64 and k.startswith("x" * 48 + "~") and k != rid_key("x" * 64 + "y")


@pytest.mark.parametrize("text,want", [
    ("0001-01-01T00:00:00Z", -62135596800.0),        # the first instant of year 1: a time
    ("0001-01-01T00:00:00+14:00", None),             # in UTC still year 0: no time
    ("9999-12-31T09:59:59-14:00", 253402300799.0),   # the last second of year 9999 in UTC
    ("9999-12-31T10:00:00-14:00", None),             # 10000-01-01T00:00:00Z: no time
    ("9999-12-31T23:59:59-14:00", None),
])
def test_ts_is_a_time_only_in_years_1_to_9999_utc(text, want):
    """ts() reads an ISO time as a time only when its UTC day is in years 1..9999 (a day outside
    stopped the runs detector for every run: tests/projections/runs/test_runs_hostile_values.py)."""
    from projections.runs.rules import ts

    assert ts(text) == want


def test_retry_backoff_a_begin_without_at_does_not_displace_an_attempt_at_now(h):
    """After the failure was recorded, a step that begins with no `at` started by now; a step
    whose `at` is now itself is as early, and being first it is the one named."""
    h.tick(snap(doc("R1", {"facts": S("done", 30), "audit": S("fail", 95)}, failures=1, last_failure_at=at(95))),
           T0 + 100 * MIN)
    after = {"facts": S("done", 30), "audit": S("begin", 101), "apply": S("begin", None)}
    evs = h.tick(snap(doc("R1", after, failures=1, last_failure_at=at(95))), T0 + 101 * MIN)
    got = [e.detail for e in evs if type(e).__name__ == "RuleViolated" and e.rule == "retry-backoff"]
    assert len(got) == 1 and "(audit)" in got[0], got
