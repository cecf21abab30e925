"""A step whose ``at`` is in the future (2099: a writer whose clock is ahead, a typo) hid what the
runs rules are for. Found attacking the steps source from the CLI (``status`` still showed the
step in begin, never overdue):

- ``step.overdue``: a step in begin counted from its ``at``, so a step stuck since the watcher
  first saw it was never overdue (``now - start`` stayed negative until 2099);
- ``retry-backoff``: the attempt's evidence was the ``at``, so a retry begun 2 minutes after a
  failure, stamped 2099, was "started by 2099", never too early.

A step began at most when the watcher saw it (as a goal.json counts as written at most at the
poll that read it, 9fa2031): an ``at`` ahead of that is that time. A real event log, the
virtual clock of tests/projections/runs/test_runs.py (its Harness: detect, append, read back, fold)."""
from __future__ import annotations

from projections.runs.fold import DEFAULT_DEADLINE
from tests.support.runsworld import MIN, T0, Harness, S, at, doc, snap, types

FUTURE = "2099-01-01T00:00:00Z"


def test_a_step_begun_in_the_future_is_overdue_a_deadline_after_it_was_seen(tmp_path):
    h = Harness(tmp_path)
    try:
        audit = {"status": "begin", "at": FUTURE}
        h.tick(snap(doc(steps={"facts": S("done", 0), "audit": audit})), T0 + MIN)
        assert "step.overdue" not in types(h.tick(snap(doc(steps={"facts": S("done", 0), "audit": audit})),
                                                  T0 + MIN + DEFAULT_DEADLINE - 1))
        evs = h.tick(snap(doc(steps={"facts": S("done", 0), "audit": audit})), T0 + MIN + DEFAULT_DEADLINE + 1)
        assert [(e.step, e.since) for e in evs if types([e]) == ["step.overdue"]] == [("audit", FUTURE)]
    finally:
        h.close()


def test_a_retry_stamped_in_the_future_is_judged_when_it_was_seen(tmp_path):
    h = Harness(tmp_path)
    try:
        failed = doc(failures=1, last_failure_at=at(0), steps={"facts": S("fail", 0)})
        h.tick(snap(failed), T0)
        retry = doc(failures=1, last_failure_at=at(0), steps={"facts": {"status": "begin", "at": FUTURE}})
        evs = h.tick(snap(retry), T0 + 2 * MIN)   # 2 min after failure 1: 10 min required
        got = [e for e in evs if types([e]) == ["rule.violated"]]
        assert [e.rule for e in got] == ["retry-backoff"]
        assert "2.0 min after failure 1" in got[0].detail
    finally:
        h.close()


def test_a_writer_clock_a_few_minutes_ahead_is_no_early_retry(tmp_path):
    """The retry's evidence is only cut to the watcher's clock for an `at` more than a day ahead:
    a writer whose clock is 3 minutes ahead stamps its failure and its retry alike, and a retry
    11 minutes after its failure (by those stamps, 10 required) is no violation, though the
    watcher's own clock says it was seen 8 minutes after the failure's stamp (eb86d3e said
    retry-backoff for it: it cut every `at` ahead of the clock)."""
    h = Harness(tmp_path)
    try:
        h.tick(snap(doc(failures=1, last_failure_at=at(3), steps={"facts": S("fail", 3)})), T0)
        retry = doc(failures=1, last_failure_at=at(3), steps={"facts": S("begin", 14)})
        assert "rule.violated" not in types(h.tick(snap(retry), T0 + 11 * MIN))
    finally:
        h.close()
