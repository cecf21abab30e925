"""Incremental folding (snapshot round trips at random cuts) equals one full replay *through the
prunes* (issue 23: the 40-event property over 5 minutes reached none). Time jumps (seconds, 5
minutes, days, weeks) and seq jumps (to multiples of 512) bring in notify's cleared and one-shot
prunes, the sweep, the fleet/dod closed-agent prune; a seeded long run then checks those prunes
did happen (the report's rollover against its exact copy: tests/projections/report/test_bounds_report.py)."""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.log import Recorded, iso
from events.types import AgentClassified, encode_data, tag_of
from projections.fleet import fold as fleet
from projections.notify import fold as notify
from projections.base import decode_state, encode_state, registry

from tests.support.eventgen import EVENTS

T0 = 1_800_000_000.0
GAPS = (0.0, 7.5, 301.0, 2 * 86400.0, 8 * 86400.0)           # same tick .. past CLOSED_KEEP_S
SEQ_STEPS = (1, 1, 1, fleet.PRUNE_EVERY - 1, fleet.PRUNE_EVERY)


def recs(events, gaps, steps):
    out, t, seq = [], T0, 0
    for e, g, s in zip(events, gaps, steps):
        t += g
        seq += s
        out.append(Recorded(seq, f"id{seq}", iso(t), tag_of(e), e.subject, 1, e, encode_data(e), b""))
    return out


def folds(records, cuts):
    mods = registry()
    full = {n: m.initial() for n, m in mods.items()}
    inc = {n: m.initial() for n, m in mods.items()}
    for i, r in enumerate(records):
        if i in cuts:
            inc = {n: decode_state(m, encode_state(inc[n])) for n, m in mods.items()}
        for n, m in mods.items():
            full[n] = m.fold(full[n], r)
            inc[n] = m.fold(inc[n], r)
    return mods, full, inc


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_incremental_equals_replay_through_the_prunes(data):
    events = data.draw(st.lists(EVENTS, min_size=1, max_size=60))
    n = len(events)
    gaps = data.draw(st.lists(st.sampled_from(GAPS), min_size=n, max_size=n))
    steps = data.draw(st.lists(st.sampled_from(SEQ_STEPS), min_size=n, max_size=n))
    cuts = data.draw(st.sets(st.integers(0, n), max_size=6))
    mods, full, inc = folds(recs(events, gaps, steps), cuts)
    for name in mods:
        assert encode_state(inc[name]) == encode_state(full[name]), name


def test_a_long_seeded_run_reaches_every_prune_and_still_equals_replay():
    rnd = random.Random(23)
    classes = ("TRABAJANDO", "RECLAMA", "ESTANCADO", "DICE_TERMINADO", "CERRADO")
    events, gaps, steps = [], [], []
    for i in range(4000):
        events.append(AgentClassified(agent=f"a{rnd.randrange(300)}", to=rnd.choice(classes), state="waiting"))
        gaps.append(rnd.choice(GAPS[:3]) if i % 400 else 8 * 86400.0)   # a week and a day every 400 events
        steps.append(1)
    records = recs(events, gaps, steps)
    mods, full, inc = folds(records, set(range(0, 4000, 333)))
    for name in mods:
        assert encode_state(inc[name]) == encode_state(full[name]), name
    seen = {e.agent for e in events}
    closed_last = {}
    for r in records:
        closed_last[r.event.agent] = r.event.to == "CERRADO"
    forgotten = seen - set(full["fleet"]["agents"])
    assert forgotten and all(closed_last[a] for a in forgotten)       # fleet pruned closed agents only
    assert forgotten <= seen - set(full["dod"]["agents"])             # and dod with it
    t_last = notify.parse_iso(records[-1].time)
    conds = full["notify"]["conds"].values()
    assert not [c for c in conds if notify.prunable(c, t_last)]      # notify: nothing prunable left
    assert sum(c["cleared"] is not None for c in conds) < sum(e.to != "CERRADO" for e in events) // 10
