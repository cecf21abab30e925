"""One run whose evaluation raises stopped the runs detector for every run: the watcher logged
"detector runs failed on this tick's snapshot; skipped" at every tick and checked no run at all
(each example found so far was fixed where it raised: an unhashable status, a deep ``at``, a NaN;
tests/projections/runs/test_runs_hostile_values.py). The class: whatever one run's evaluation raises is that run's
``run.changed`` error "could not be evaluated (<exception type>)", once; every other run is still
checked, and the failing run is looked at again when its steps.json changes. Pure: the detector
and the fold, with a value no JSON decoder makes but a future parser path might let through."""
from __future__ import annotations

from events.records import Recorded
from events.types import tag_of
from projections.runs import fold as runs
from projections.observations import RunObs, Snapshot
from watcher.runtime.schedule import RunsTicker

NOW = 1_764_600_000.0
GOOD = {"run": "good", "branch": "full", "board": "B1", "steps": {
    "facts": {"status": "done", "at": "2026-12-01T10:00:00Z"},
    "launch_intent": {"status": "begin", "at": "2026-12-01T10:05:00Z", "data": {}}}}


class Boom(str):
    """A text that refuses every use (what an unforeseen value does to code that trusts it);
    ``uses`` counts the refusals."""

    uses = 0

    def _refuse(self, *a):
        Boom.uses += 1
        raise RuntimeError("boom")

    __eq__ = strip = __str__ = _refuse
    __hash__ = str.__hash__


def _fold(state: dict, evs: list) -> dict:
    for i, ev in enumerate(evs, 1):
        state = runs.fold(state, Recorded(i, f"id{i}", "2026-12-01T10:10:00.000Z", tag_of(ev), ev.subject, 1,
                                          ev, b"", b""))
    return state


def _snap(bad_doc: dict) -> Snapshot:
    return Snapshot(runs={"bad": RunObs(run="bad", source="runs", doc=bad_doc),
                          "good": RunObs(run="good", source="runs", doc=GOOD)})


def test_one_run_whose_evaluation_raises_does_not_stop_the_others_being_checked():
    bad = {"run": "bad", "steps": {"facts": {"status": Boom("done"), "at": Boom("2026-12-01T10:00:00Z")}}}
    state = runs.initial()
    memo = RunsTicker()
    evs = memo.tick(state, _snap(bad), NOW)
    mine = [e for e in evs if getattr(e, "run", None) == "bad"]
    assert [(tag_of(e), e.error) for e in mine] == [("run.changed", "could not be evaluated (RuntimeError)")]
    good = {tag_of(e) for e in evs if getattr(e, "run", None) == "good"}
    assert {"run.changed", "step.changed", "rule.violated"} <= good     # the other run is checked
    state = _fold(state, evs)
    assert state["runs"]["bad"]["error"] == "could not be evaluated (RuntimeError)"
    again = memo.tick(state, _snap(bad), NOW + 2)    # once: no event per tick
    assert [e for e in again if getattr(e, "run", None) == "bad"] == []
    fixed = {"run": "bad", "steps": {"facts": {"status": "done", "at": "2026-12-01T10:00:00Z"}}}
    healed = memo.tick(state, _snap(fixed), NOW + 4)     # a new steps.json: read again
    assert any(tag_of(e) == "run.changed" and e.run == "bad" and not e.error for e in healed)


def test_many_runs_whose_evaluation_raises_cost_one_pass_a_tick_not_one_a_run():
    """Each run found raising costs the tick one more pass over the runs: 200 such runs were 201
    passes at every tick. A run still holding the doc that raised is hidden from the start: the
    next tick with the same files touches none of their values, and a run whose file changed is
    evaluated again."""
    obs = {f"b{i:03d}": RunObs(run=f"b{i:03d}", source="runs",
                               doc={"run": f"b{i:03d}", "steps": {"facts": {"status": Boom("done"), "at": "x"}}})
           for i in range(200)}
    obs["good"] = RunObs(run="good", source="runs", doc=GOOD)
    snap = Snapshot(runs=obs)
    state = runs.initial()
    memo = RunsTicker()
    evs = memo.tick(state, snap, NOW)
    assert sum(1 for e in evs if tag_of(e) == "run.changed" and e.error) == 200
    state = _fold(state, evs)
    Boom.uses = 0
    again = memo.tick(state, snap, NOW + 2)
    assert Boom.uses == 0 and [e for e in again if getattr(e, "run", "").startswith("b")] == []
    obs["b007"] = RunObs(run="b007", source="runs", doc={"run": "b007", "steps": {"facts": {"status": "done"}}})
    healed = memo.tick(state, Snapshot(runs=obs), NOW + 4)
    assert [e.run for e in healed if tag_of(e) == "run.changed" and not e.error] == ["b007"]
