"""Rules of the notify plan that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule. Pure: a notify state folded from
events on a virtual clock."""
from __future__ import annotations

import logging

from projections.notify import fold as notify
from projections.notify.plan import NudgeReason, nudge_decision, plan

from tests.support.notifyworld import NP, P, T0, World


def test_the_next_nudge_waits_nudge_gap_after_the_last_nudge():
    """A stalled agent nudged once is nudged again `nudge_gap` after that nudge, not after the
    stall began (nudge_after 60 s, nudge_gap 300 s; nudged 1000 s into the stall)."""
    ag = {"cls": "ESTANCADO", "since": T0, "seq": 5, "state": "idle", "cond": None, "nudges": 1,
          "nudged_at": T0 + 1000}
    st = notify.initial()
    assert nudge_decision("a1", ag, st, T0 + 1299, NP, "s:1", set()) == (NudgeReason.NOT_YET, T0 + 1300)
    assert nudge_decision("a1", ag, st, T0 + 1300, NP, "s:1", set())[0] is NudgeReason.NUDGE


def test_every_decision_of_a_plan_is_logged_at_debug(caplog):
    """`fleetwatch.notify` at DEBUG explains each decision (stage, key, reason): how a user finds
    out why a push did or did not go."""
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    with caplog.at_level(logging.DEBUG, logger="fleetwatch.notify"):
        p = plan(w.state, T0 + 60, P)
    assert p.send and p.decisions
    lines = [r.getMessage() for r in caplog.records if r.name == "fleetwatch.notify"]
    for dec in p.decisions:
        assert f"notify {dec.stage} {dec.key}: {str.__str__(dec.reason)}" in lines
