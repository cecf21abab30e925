"""Run rules that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (CONTRACT.md, steps.json)."""
from __future__ import annotations

import time

import pytest

from tests.test_runs import MIN, T0, doc, h, snap  # noqa: F401  (h is a fixture)
from tests.test_runs_rules import S, violations


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
