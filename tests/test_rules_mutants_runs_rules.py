"""Run rules that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (CONTRACT.md, steps.json)."""
from __future__ import annotations

import time

import pytest

from tests.test_runs import MIN, T0, at, doc, h, snap  # noqa: F401  (h is a fixture)
from tests.test_runs_rules import EVID, HEX, S, violations


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
def test_retry_backoff_reads_naive_times_as_utc_and_offsets_as_written(h, madrid, last_failure_at, delta, n):  # noqa: F811
    """retry-backoff: attempt 2 starts 10 min after failure 1 at the earliest. The failure time is
    10:40 UTC in each spelling (naive = UTC, whatever the local zone); the attempt at 10:45 UTC
    breaks the rule, the one at 10:51 UTC does not."""
    before = {"facts": S("done", 30), "audit": S("fail", 40)}
    after = {"facts": S("done", 30), "audit": S("begin", 40 + delta)}
    got = violations(h, before, after, "retry-backoff", failures=1, last_failure_at=last_failure_at)
    assert len(got) == n


def _rule_details(hh, rule: str, *ticks) -> list[list[str]]:
    """Per tick (R1's steps), the details of ``rule`` violations of R1 reported."""
    got = []
    for i, steps in enumerate(ticks):
        evs = hh.tick(snap(doc("R1", steps)), T0 + (100 + i) * MIN)
        got.append([e.detail for e in evs if type(e).__name__ == "RuleViolated" and e.rule == rule and e.run == "R1"])
    return got


@pytest.mark.parametrize("rule", ["launch-request-stable", "audit-branch"])
def test_a_step_that_leaves_steps_json_breaks_no_rule(h, rule):  # noqa: F811
    """launch-request-stable and audit-branch are about a step that begins or a request id that
    changes: a launch_intent that is no longer in steps.json (status gone) does neither."""
    launch = {"audit": S("done", 1, verdict="pass"), "launch_intent": S("begin", 5, request_id="r", continue_from="R0")}
    gone = {"audit": S("done", 1, verdict="fail")}
    assert _rule_details(h, rule, launch, gone, gone) == [[], [], []]


def test_audit_branch_is_a_gated_step_that_begins_not_one_whose_data_changes(h):  # noqa: F811
    """audit-branch: apply *begins* while the audit says fail. Apply began under a passing audit;
    a later tick where the audit failed and apply's data changed (same status) is no violation."""
    first = {"audit": S("done", 1, verdict="pass"), "apply": S("begin", 2)}
    later = {"audit": S("done", 1, verdict="fail"), "apply": S("begin", 2, continue_from="R0")}
    assert _rule_details(h, "audit-branch", first, later, later) == [[], [], []]


def test_launch_request_stable_tells_apart_long_request_ids_sharing_64_characters(h):  # noqa: F811
    prefix = "projects/fleet/locations/europe-west1/operations/launch-" + "0" * 8
    assert len(prefix) == 64
    ticks = [{"audit": S("done", 1, verdict="pass"), "launch_intent": S("begin", 5, request_id=prefix + x)}
             for x in "ABC"]
    assert [len(d) for d in _rule_details(h, "launch-request-stable", *ticks)] == [0, 1, 1]


def test_a_long_request_id_kept_the_same_is_no_retry(h):  # noqa: F811
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
def test_a_violations_detail_says_what_broke_the_rule(h, after, rule, kw, detail):  # noqa: F811
    """`rule.violated` carries `detail`: what is missing, which audit state, which attempt and how
    long after which failure — the words a user reads in the push."""
    before = FAILED_AT_40 if rule == "retry-backoff" else None
    assert [e.detail for e in violations(h, before, after, rule, **kw)] == [detail]


def test_retry_backoff_needs_a_failure_even_with_a_failure_time(h):  # noqa: F811
    """retry-backoff counts from failure n >= 1: failures 0 with a last_failure_at is no backoff."""
    after = {"facts": S("done", 30), "audit": S("begin", 41)}
    assert violations(h, FAILED_AT_40, after, "retry-backoff", failures=0, last_failure_at=at(40)) == []


def test_retry_backoff_a_step_at_the_failure_time_is_no_attempt(h):  # noqa: F811
    """The attempt after failure n is a step that starts after it: one recorded at the failure's
    very time is not (here facts, done at 10:40 with the failure)."""
    after = {"facts": S("done", 40), "audit": S("fail", 40)}
    assert violations(h, FAILED_AT_40, after, "retry-backoff", failures=1, last_failure_at=at(40)) == []


@pytest.mark.parametrize("deploy_at,n", [(19, 0), (20, 0), (21, 1)])
def test_deploy_gate_launch_begins_at_or_after_deploy_done(h, deploy_at, n):  # noqa: F811
    """deploy-gate by the steps' `at`: launch_intent beginning at 10:20 needs deploy done by 10:20
    (at the same instant is allowed; a minute later is a violation)."""
    after = {"validate": S("done", 10), "deploy": S("done", deploy_at), "launch_intent": S("begin", 20, request_id="r")}
    assert len(violations(h, None, after, "deploy-gate")) == n


def test_retry_backoff_without_a_failure_time_checks_no_wait_and_the_tick_goes_on(h):  # noqa: F811
    """failures 1 with no last_failure_at: no wait can be measured, so no retry-backoff — and the
    attempt (a begin without `at`) is still recorded as a step change."""
    h.tick(snap(doc("R1", FAILED_AT_40, failures=1)), T0 + 100 * MIN)
    evs = h.tick(snap(doc("R1", {"facts": S("done", 30), "audit": S("begin", None)}, failures=1)), T0 + 101 * MIN)
    assert [(e.step, e.to) for e in evs if type(e).__name__ == "StepChanged"] == [("audit", "begin")]
    assert [e for e in evs if type(e).__name__ == "RuleViolated"] == []
