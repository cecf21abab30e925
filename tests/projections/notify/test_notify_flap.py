"""An independent oracle for flap detection (issue 23): hand-computed Nagios-style percents.

Nagios weights the 20 transition slots of the last 21 states linearly from 0.75 (oldest, slot 1)
to 1.25 (newest, slot 20): w(s) = 0.75 + 0.5 * (s - 1) / 19, and the percent state change is
100 * sum(w(s) for changed slots) / 20. Every expected number below was worked out by hand from
that formula (the working is in the comment of its row), never with the module's own function;
then the hysteresis (start at >= flap_high, end below flap_low, also by time alone) row by row.
"""
from __future__ import annotations

import pytest

from projections.notify.flap import entries, flap_percent
from projections.notify.policy import Policy

from tests.support.flaphistory import ALT, T, flat, hist, pattern, state

PERCENTS = [
    # (classes, times (None: 1 s apart), expected percent at the last entry)
    ("A" * 21, None, 0.0),                             # no change
    (ALT, None, 100.0),                                # 20 * 0.75 + 0.5 * (0+..+19) / 19 = 15 + 5 = 20 -> 100
    ("A" * 20 + "B", None, 6.25),                      # newest slot only: 1.25 / 20
    ("A" + "B" * 20, None, 3.75),                      # oldest slot only: 0.75 / 20
    ("AB" + "B" * 20, None, 0.0),                      # 22 classes: that change is 21 entries back, out
    ("AB", None, 6.25),                                # two classes: the change is the newest slot
    ("ABA", None, 12.37),                              # slots 19, 20: 1.25 + 0.75 + 9/19 = 2.47368 -> 12.368
    (pattern(list(range(13, 21))), None, 46.32),       # slots 13..20: 6 + 0.5*124/19 = 9.26316 -> 46.316
    (pattern(list(range(12, 21))), None, 51.51),       # slots 12..20: 6.75 + 0.5*135/19 = 10.30263 -> 51.513
    (pattern([5, 6, 7, 8, 9, 10, 11, 14, 15, 20]), None, 50.0),  # 7.5 + 0.5 * (4+..+10+13+14+19)/19 = 10
    # only changes within FLAP_WINDOW (3600 s) of the entry count: slots 1..10 at T+1..T+10 are old
    (ALT, [T + i for i in range(11)] + [T + 4000 + i for i in range(10)], 56.58),  # 11..20: 7.5+0.5*145/19
]


@pytest.mark.parametrize("classes,times,want", PERCENTS)
def test_flap_percent_is_the_nagios_weighted_change(classes, times, want):
    h = hist(classes, times)
    assert round(flap_percent(h, h[-1][1]), 2) == want
    assert entries(flat(classes, times))[-1][3] == want


@pytest.mark.parametrize("at,want", [(T + 3700, 6.25), (T + 3700.5, 0.0)])
def test_a_change_exactly_flap_window_old_still_counts(at, want):
    assert round(flap_percent(hist("AB", [T, T + 100]), at), 2) == want


def test_entries_hold_the_percent_at_each_of_the_last_21_classes():
    # 41 alternating classes: from the 21st on, every window is full of changes
    e = entries(flat("AB" * 20 + "A"))
    assert len(e) == 21 and [x[3] for x in e] == [100.0] * 21 and e[-1][2] == 41
    # the first classes of a subject: percents grow slot by slot
    e = entries(flat("ABAB"))
    assert [x[3] for x in e] == [0.0, 6.25, 12.37, 18.36]   # + w(18) = 0.75 + 0.5*17/19: 3.67105 -> 18.355


# ---- hysteresis -------------------------------------------------------------------------
@pytest.mark.parametrize("classes,flapping", [
    (pattern(list(range(12, 21))), True),               # 51.51 >= 50: starts
    (pattern(list(range(13, 21))), False),              # 46.32 < 50: never started
    (pattern([5, 6, 7, 8, 9, 10, 11, 14, 15, 20]), True),  # exactly 50.0 starts (>= flap_high)
    # after an episode, no new change for k classes: changes in slots 1..20-k only
    (ALT + "A" * 10, True),                             # k=10: 7.5 + 0.5*45/19 = 8.68421 -> 43.42: stays
    (ALT + "A" * 13, True),                             # k=13: 5.25 + 0.5*21/19 = 5.80263 -> 29.01: stays
    (ALT + "A" * 14, False),                            # k=14: 4.5 + 0.5*15/19 = 4.89474 -> 24.47 < 25: ends
])
def test_flapping_starts_at_flap_high_and_ends_below_flap_low(classes, flapping):
    start, _, _ = state(classes)
    assert (start is not None) is flapping


def test_exactly_flap_high_is_the_boundary():
    assert state(pattern([5, 6, 7, 8, 9, 10, 11, 14, 15, 20]), policy=Policy(flap_high=50.01, flap_low=25))[0] is None


def test_the_episode_starts_at_the_first_class_at_or_over_flap_high():
    start, e, _ = state(pattern(list(range(12, 21))))
    assert start is not None and start[2] == 21 and e[-1][3] == 51.51
    # ALT, k changes newest: 1.25, 2.47368, 3.67105, 4.84211, 5.98684, 7.10526, 8.19737, 9.26316
    # (46.32), 10.30263 (51.51): the 9th change, at the 10th class, starts the episode
    start, _, _ = state(ALT)
    assert start is not None and start[2] == 10
    start, _, _ = state(ALT + "A" * 10)                 # only the last 21 classes are kept: the 11th
    assert start is not None and start[2] == 11


@pytest.mark.parametrize("dt,flapping", [
    (1800, True),    # every change within the hour: 100
    (3610, True),    # changes at T+10..T+20 count: 11 slots 10..20: 8.25 + 0.5*154/19 = 12.3026 -> 61.51
    (3616, True),    # T+16..T+20: 5 slots 16..20: 3.75 + 0.5*85/19 = 5.98684 -> 29.93 >= 25
    (3617, False),   # T+17..T+20: 4 slots 17..20: 3 + 0.5*70/19 = 4.84211 -> 24.21 < 25: settled by time
    (3621, False),   # nothing within the hour
])
def test_a_quiet_subject_settles_by_time_alone(dt, flapping):
    start, _, _ = state(ALT, now=T + dt)
    assert (start is not None) is flapping


@pytest.mark.parametrize("n,flapping", [(7, False), (8, True)])
def test_fewer_than_eight_classes_never_flap(n, flapping):
    # 8 classes, 7 changes in slots 14..20: 5.25 + 0.5*112/19 = 8.19737 -> 40.99 >= 30
    pol = Policy(flap_high=30.0, flap_low=10.0)
    assert (state(("AB" * 4)[:n], policy=pol)[0] is not None) is flapping


def test_the_notice_covers_its_episode_until_the_subject_settles():
    classes = ALT
    assert state(classes)[2] is False                    # not yet sent
    assert state(classes, sent=["c", T + 15])[2] is True  # sent during this episode
    # an episode, a settle below flap_low (k=14 quiet classes at T+21..T+34), then a new episode
    again = ALT + "A" * 14 + "BABABABABABA"
    times = [T + i for i in range(len(again))]
    assert state(again, times=times)[0] is not None
    assert state(again, times=times, sent=["c", T + 20])[2] is False  # sent before the settle: new notice
    assert state(again, times=times, sent=["c", T + 40])[2] is True   # sent after it: covered


def test_classes_after_the_time_asked_do_not_count():
    # ALT at T+9.5: only the first 10 classes (9 changes, the newest slots 12..20): 51.51
    assert round(flap_percent(hist(ALT), T + 9.5), 2) == 51.51


def test_flap_low_is_exclusive_at_the_boundary():
    # ALT then 13 quiet classes: 29.01 (hand, above); exactly flap_low stays flapping, below ends
    assert state(ALT + "A" * 13, policy=Policy(flap_high=50.0, flap_low=29.01))[0] is not None
    assert state(ALT + "A" * 13, policy=Policy(flap_high=50.0, flap_low=29.02))[0] is None


def test_an_ended_episode_needs_flap_high_again():
    # ALT + 14 quiet (24.47: ended) + one change: window of that class holds the old changes in
    # slots 1..5 and the new one in slot 20: 3.75 + 0.5*10/19 + 1.25 = 5.26316 -> 26.32, >= flap_low
    # but the episode ended: not flapping until flap_high is reached again
    assert entries(flat(ALT + "A" * 14 + "B"))[-1][3] == 26.32
    assert state(ALT + "A" * 14 + "B")[0] is None


def test_the_current_percent_is_the_newest_class_not_the_one_before():
    # 21 classes back the first change drops out: at class 22 one change (6.25 < 7, settled), at 23
    # two (12.37 >= 10): flapping again, all within the hour
    pol = Policy(flap_high=10.0, flap_low=7.0)
    classes = "AB" + "B" * 19 + "AB"
    e = entries(flat(classes))
    assert [x[3] for x in e[-2:]] == [6.25, 12.37]
    start, _, _ = state(classes, policy=pol)
    assert start is not None and start[2] == 23


# three episodes an hour apart (flap_high 10, flap_low 7): each pair of changes is 12.37 (start),
# an hour later the first class of the next pair is 0 (ended), the second 6.25 (still low)
EPISODES = "ABAABAABA"
EP_TIMES = [T, T + 1, T + 2, T + 4000, T + 4001, T + 4002, T + 8000, T + 8001, T + 8002]


@pytest.mark.parametrize("sent_at,low,notified", [
    (None, 7.0, False),
    (T + 4500, 7.0, False),      # sent in the second episode: the third needs its own notice
    (T + 8001, 7.0, True),       # sent at the last low class: covers the episode that follows
    (T + 8001.5, 7.0, True),
    (T + 8000.5, 6.25, True),    # 6.25 is not below flap_low 6.25: the last low class is T+8000
    (T + 7999, 6.25, False),
])
def test_a_flapping_notice_covers_only_the_episode_after_the_last_settle(sent_at, low, notified):
    pol = Policy(flap_high=10.0, flap_low=low)
    sent = None if sent_at is None else ["c", sent_at]
    start, _, got = state(EPISODES, now=T + 8003, policy=pol, sent=sent, times=EP_TIMES)
    assert start is not None and start[2] == 9
    assert got is notified


def test_not_flapping_is_never_notified():
    for classes in (pattern(list(range(13, 21))), ALT + "A" * 14, ALT + "A" * 14 + "B"):  # last: ended, 26.32
        assert state(classes, sent=["c", T + 9999])[0::2] == (None, False)


def test_a_list_grown_in_place_is_computed_again():
    f = flat(ALT[:10])
    assert entries(f)[-1][3] == 51.51           # 9 changes
    f += ["A", T + 10, 11]
    assert entries(f)[-1][3] == 56.58           # 10 changes: 7.5 + 0.5*145/19 = 11.31579


def test_no_module_level_memo():
    """Issue 23: the pure core keeps no cache of its own (nor a class of one: issue 46)."""
    from projections.notify import flap as notify_flap
    assert not [k for k, v in vars(notify_flap).items() if isinstance(v, (dict, list, set)) and not k.startswith("__")]
    assert not hasattr(notify_flap, "FlapMemo")


# ---- the running count against the definition, on lists grown as the fold grows them -----------
def _grow(rnd, f: list, seq: int, t: float, back: float) -> tuple[int, float]:
    """One class appended as the fold does (the last HIST_KEEP kept), the clock now and then
    stepped back by up to 2 hours (``back``: how often)."""
    from projections.notify.flap import HIST_KEEP

    seq += rnd.randrange(1, 4)
    t += rnd.choice((0.0, 1.0, 30.0, 600.0, 1800.0)) if rnd.random() >= back else -rnd.choice((5.0, 3000.0, 4000.0, 7200.0))
    f += [rnd.choice("AB"), t, seq]
    if len(f) > 3 * HIST_KEEP:
        del f[:3]
    return seq, t


def test_each_entry_holds_flap_percent_at_its_time_over_its_predecessors():
    """Random lists grown as the fold grows them (times in order, the last HIST_KEEP kept):
    each of the last 21 entries holds :func:`flap_percent` at its time over it and its 20
    predecessors (``entries`` computes them all in one pass with a running count)."""
    import random

    rnd = random.Random(7)
    f: list = []
    seq, t = 0, T
    for _ in range(400):
        seq, t = _grow(rnd, f, seq, t, 0.0)
        pairs = [[f[i], f[i + 1]] for i in range(0, len(f), 3)]
        got = entries(f)
        assert [e[2] for e in got] == f[2::3][-21:]
        for j, e in enumerate(got, len(pairs) - len(got)):
            assert abs(e[3] - flap_percent(pairs[:j + 1], e[1])) < 0.011, (j, e)
