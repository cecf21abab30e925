"""Run rules that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (CONTRACT.md, steps.json)."""
from __future__ import annotations

import time

import pytest

from tests.test_runs import h  # noqa: F401  (a fixture)
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
