"""Flap rules that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule; expected values by hand."""
from __future__ import annotations

from projections.notify.flap import entries
from projections.notify.policy import Policy

from tests.support.flaphistory import ALT, T, state
from tests.support.notifyworld import T0, World


def test_each_of_the_last_21_classes_has_its_percent_over_its_20_predecessors():
    """45 class changes one second apart (every one a change, all within the hour): each of the
    last 21 classes has 20 counted changes before it, so each percent is 100 — the oldest one too,
    whose window reaches 41 entries back (the fold keeps 41)."""
    w = World()
    for i in range(45):
        w.cls("a1", ("RECLAMA", "TRABAJANDO")[i % 2], T0 + i)
    e = entries(w.state["classes"]["agent:a1"])
    assert len(e) == 21 and [x[3] for x in e] == [100.0] * 21


def test_a_change_exactly_flap_window_old_still_counts_toward_flapping():
    """ALT flaps (100 %); an hour after its last change only that change counts (slot 20: 1.25/20
    = 6.25 %), which is still at or over a flap_low of 5: the subject is still flapping. One
    second later nothing counts: settled."""
    pol = Policy(flap_high=50.0, flap_low=5.0)
    last = T + len(ALT) - 1
    assert state(ALT, now=last + 3600, policy=pol)[0] is not None
    assert state(ALT, now=last + 3601, policy=pol)[0] is None
