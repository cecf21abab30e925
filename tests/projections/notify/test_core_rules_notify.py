"""Contract rules of the notify pipeline, one test per rule a surviving mutant broke (issue 23).

Each test is named after the rule it pins (docs/contract.md "Writers and notification timing", the
class table) and checks the observable outcome — the messages a plan sends, their severity,
destination, lines and covers — never the code's own helpers.
"""
from __future__ import annotations

import pytest

from events.timefmt import iso
from events.types import RuleViolated, SilenceAdded
from projections.notify.fold import Policy
from projections.notify.msg import MAX_LINES, Item, message
from projections.notify.plan import NudgeReason, nudge_decision, plan
from tests.support.notifyworld import T0, World, cond, flap

P = Policy(group_wait=10, group_interval=300, repeat_interval=4 * 3600, min_severity="warning")


def _item(name: str, cls: str, sev: str, since: float = T0, seq: int = 1, last_seq: int | None = None) -> Item:
    return Item(cid=f"agent:{name}|{cls}#{seq}", c=cond(subject=f"agent:{name}", name=name, cls=cls, sev=sev,
                                                       since=since, seq=seq,
                                                       last_seq=seq if last_seq is None else last_seq), due=T0)


# ---- one message --------------------------------------------------------------------------
@pytest.mark.parametrize("order", [("urgent", "warning"), ("warning", "urgent")])
def test_severity_of_a_message_is_its_highest_item(order):
    items = [_item("r1", "RECLAMA", "urgent", seq=1), _item("s1", "ESTANCADO", "warning", seq=2)]
    if order[0] == "warning":
        items.reverse()
    m = message(items, T0 + 10, P)
    assert m.severity == "urgent" and m.priority and m.notify_type == "failure"


def test_severity_of_a_warning_only_message_is_warning_without_priority():
    m = message([_item("s1", "ESTANCADO", "warning"), _item("m1", "MAL_LANZADO", "warning", seq=2)], T0 + 10, P)
    assert m.severity == "warning" and not m.priority and m.notify_type == "warning"


def test_grouped_urgent_and_stall_go_out_urgent_through_the_plan():
    w = World()
    w.cls("s1", "ESTANCADO", T0)
    w.cls("r1", "RECLAMA", T0, state="waiting")
    sent = plan(w.state, T0 + 10, P).send
    assert len(sent) == 1 and sent[0].severity == "urgent" and sent[0].title == "1 need you · 1 stalled"


def test_body_is_capped_at_40_lines_with_a_count_of_the_rest():
    items = [_item(f"a{i:02d}", "RECLAMA", "urgent", since=T0 + i, seq=i + 1) for i in range(45)]
    m = message(items, T0 + 100, P)
    assert len(m.lines) == MAX_LINES == 40
    assert m.lines[-1] == "… and 6 more (fleetwatch summary)"
    assert m.lines[-2].startswith("RECLAMA a38 ")          # 39 items shown, oldest first
    assert m.title == "45 need you" and len(m.covers) == 45   # every item is covered


def test_body_of_exactly_40_items_shows_every_one():
    items = [_item(f"a{i:02d}", "RECLAMA", "urgent", since=T0 + i, seq=i + 1) for i in range(40)]
    m = message(items, T0 + 100, P)
    assert len(m.lines) == 40 and m.lines[-1].startswith("RECLAMA a39 ") and "more" not in m.body


def test_covers_are_every_seq_and_last_seq_of_the_items_sorted_once():
    items = [_item("r1", "RECLAMA", "urgent", seq=7, last_seq=9), _item("s1", "ESTANCADO", "warning", seq=3),
             _item("r2", "RECLAMA", "urgent", seq=9)]
    assert message(items, T0 + 10, P).covers == [3, 7, 9]


def test_body_order_is_urgency_then_oldest_then_name():
    items = [_item("z", "ESTANCADO", "warning", since=T0, seq=1), _item("b", "RECLAMA", "urgent", since=T0 + 5, seq=2),
             _item("a", "RECLAMA", "urgent", since=T0 + 5, seq=3), _item("c", "RECLAMA", "urgent", since=T0, seq=4),
             _item("d", "DICE_TERMINADO", "info", since=T0, seq=5), _item("m", "MAL_LANZADO", "warning", seq=6)]
    m = message(items, T0 + 10, Policy(min_severity="info"))
    assert [ln.split()[:2] for ln in m.lines] == [["RECLAMA", "c"], ["RECLAMA", "a"], ["RECLAMA", "b"],
                                                  ["DICE_TERMINADO", "d"], ["ESTANCADO", "z"], ["MAL_LANZADO", "m"]]
    assert m.title == "3 need you · 1 ready for review · 1 stalled · 1 mislaunched"


def test_body_line_names_class_agent_and_age():
    m = message([_item("r1", "RECLAMA", "urgent", since=T0)], T0 + 125, P)
    assert m.lines == ["RECLAMA r1 · 2m"] or m.lines[0].startswith("RECLAMA r1 · 2m")


# ---- destinations -------------------------------------------------------------------------
def test_tag_routes_are_separate_messages_per_severity_tag():
    pol = Policy(group_wait=10, group_interval=300, tags={"urgent": "phone", "warning": "mail"})
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    w.cls("s1", "ESTANCADO", T0)
    sent = plan(w.state, T0 + 10, pol).send
    assert sorted((m.tag, m.severity, m.title) for m in sent) == [("mail", "warning", "1 stalled"),
                                                                 ("phone", "urgent", "1 need you")]


def test_severities_sharing_a_tag_share_one_message():
    pol = Policy(group_wait=10, group_interval=300, tags={"urgent": "ops", "warning": "ops"})
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    w.cls("s1", "ESTANCADO", T0)
    sent = plan(w.state, T0 + 10, pol).send
    assert [(m.tag, m.severity) for m in sent] == [("ops", "urgent")]


def test_group_interval_paces_a_tag_by_its_own_last_push():
    # the phone got a push; a stall for the mail tag is not held by the phone's group_interval
    pol = Policy(group_wait=10, group_interval=300, tags={"urgent": "phone", "warning": "mail"})
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, pol).send[0]
    w.sent(m, T0 + 10)
    w.cls("s1", "ESTANCADO", T0 + 20)
    sent = plan(w.state, T0 + 30, pol).send
    assert [(x.tag, x.title) for x in sent] == [("mail", "1 stalled")]


# ---- repeats ------------------------------------------------------------------------------
def test_flapping_notice_is_sent_once_per_episode_not_every_group_interval():
    w = World()
    t = flap(w, "a1", 13, T0, step=1.0)
    p = plan(w.state, t + 10, P)
    assert [m.title for m in p.send] == ["1 flapping"]
    w.sent(p.send[0], t + 10)
    for k in range(1, 8):                                     # still flapping, many group_intervals on
        t = flap(w, "a1", 2, t + 280, step=1.0)
        assert plan(w.state, t + 10, P).send == [], k


def test_one_shot_rule_violation_is_not_repeated_after_repeat_interval():
    w = World()
    w.add(RuleViolated(run="R1", rule="deploy-gate", step="launch_intent", detail="x"), T0)
    m = plan(w.state, T0 + 10, P).send
    assert [x.title for x in m] == ["1 rule violated"]
    w.sent(m[0], T0 + 10)
    for dt in (P.repeat_interval + 20, 3 * P.repeat_interval, 30 * 86400):
        assert plan(w.state, T0 + dt, P).send == []


def test_a_standing_condition_is_repeated_after_repeat_interval():
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, P).send[0]
    w.sent(m, T0 + 10)
    assert plan(w.state, T0 + 10 + P.repeat_interval - 5, P).send == []
    assert [x.title for x in plan(w.state, T0 + 10 + P.repeat_interval + 10, P).send] == ["1 need you"]


# ---- nudges -------------------------------------------------------------------------------
NP = Policy(nudge_enabled=True, nudge_max=2, nudge_after=60, nudge_gap=300)
STALLED = {"cls": "ESTANCADO", "state": "idle", "nudges": 0, "seq": 1, "since": T0, "nudged_at": None}


@pytest.mark.parametrize("sil,want", [
    ({}, NudgeReason.NUDGE),
    ({"s1": {"subject": "agent:a1", "cls": None, "until": T0 + 9999, "reason": ""}}, NudgeReason.SILENCED),
    ({"s1": {"subject": "agent:*", "cls": None, "until": T0 + 9999, "reason": ""}}, NudgeReason.SILENCED),
    ({"s1": {"subject": "", "cls": "ESTANCADO", "until": T0 + 9999, "reason": ""}}, NudgeReason.SILENCED),
    ({"s1": {"subject": "", "cls": "RECLAMA", "until": T0 + 9999, "reason": ""}}, NudgeReason.NUDGE),
    ({"s1": {"subject": "agent:a2", "cls": None, "until": T0 + 9999, "reason": ""}}, NudgeReason.NUDGE),
    ({"s1": {"subject": "agent:a1", "cls": None, "until": T0 + 100, "reason": ""}}, NudgeReason.NUDGE),  # expired
])
def test_a_silenced_agent_is_not_nudged(sil, want):
    state = {"dod": {}, "silences": sil}
    assert nudge_decision("a1", dict(STALLED), state, T0 + 600, NP, "s:1", set())[0] is want


def test_a_silenced_agent_is_not_nudged_through_the_fold():
    from projections.notify.plan import nudges
    w = World()
    w.cls("a1", "ESTANCADO", T0, state="idle")
    w.cls("a2", "ESTANCADO", T0, state="idle")
    w.add(SilenceAdded(silence="s1", subject_match="agent:a1", until=iso(T0 + 9999)), T0 + 1)
    out, _ = nudges(w.state, T0 + 600, NP, {"a1": "s:1", "a2": "s:2"})
    assert [n.agent for n in out] == ["a2"]


# ---- flapping notice, timing edges, nudge wake ----------------------------------------------
def test_the_flapping_notice_covers_its_episode_and_ages_from_its_start():
    w = World()
    t = flap(w, "a1", 13, T0, step=1.0)          # seqs 1..13 at T0..T0+12
    # percents of the alternation (tests/projections/notify/test_notify_flap.py): the 9th change, class 10 (seq 10,
    # at T0+9), is the first at or over 50: the episode starts there
    m = plan(w.state, t + 10, P).send[0]
    assert m.title == "1 flapping" and m.covers == [10, 13] and m.keys == ["agent:a1|FLAPPING#10@0"]
    assert m.lines[0].startswith("FLAPPING a1 · 14s · ")   # now T0+23 - start T0+9
    # the current percent, at the 13th class: 12 changes, 9 + 0.5 * (8+..+19) / 19 = 13.263 -> 66.32
    assert m.lines[0].endswith(" · 66% state change; notices held until it settles")


def test_while_flapping_the_plan_looks_again_within_a_minute():
    w = World()
    t = flap(w, "a1", 13, T0, step=1.0)
    p = plan(w.state, t + 10, P)
    w.sent(p.send[0], t + 10)
    p = plan(w.state, t + 20, P)
    assert p.send == [] and p.next_wake is not None and p.next_wake <= t + 20 + 60.01


def test_nothing_is_pushed_before_group_wait_beyond_the_millisecond_rounding():
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    assert plan(w.state, T0 + P.group_wait - 0.0015, P).send == []
    assert len(plan(w.state, T0 + P.group_wait - 0.0005, P).send) == 1


def test_nudges_wake_at_the_earliest_due_stall():
    from projections.notify.plan import nudges
    w = World()
    w.cls("a1", "ESTANCADO", T0, state="idle")
    w.cls("a2", "ESTANCADO", T0 + 30, state="idle")
    out, wake = nudges(w.state, T0 + 10, NP, {"a1": "s:1", "a2": "s:2"})
    assert out == [] and wake == T0 + NP.nudge_after


def test_a_snooze_reminder_is_a_first_attempt():
    from events.types import NoticeAcked
    from tests.support.notifyworld import PE
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, PE).send[0]
    w.sent(m, T0 + 10)
    w.add(NoticeAcked(notice=m.notice, conditions=m.conditions, via="web", until=iso(T0 + 3610)), T0 + 20)
    p = plan(w.state, T0 + 3620, PE)
    assert [(x.kind, x.attempt) for x in p.send] == [("notice", 1)]


def test_a_one_second_repeat_interval_still_repeats():
    pol = Policy(group_wait=10, group_interval=300, repeat_interval=1.0)
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, pol).send[0]
    w.sent(m, T0 + 10)
    assert [x.title for x in plan(w.state, T0 + 11 + 10 + 1, pol).send] == ["1 need you"]   # due + group_wait


def test_after_quiet_hours_heads_a_push_when_any_of_its_items_was_held():
    from tests.support.notifyworld import PE
    w = World()
    w.cls("s1", "ESTANCADO", T0)
    p = plan(w.state, T0 + 20, PE, quiet_end=T0 + 100)          # held by quiet hours
    w.add(p.record[0], T0 + 20)
    w.cls("s2", "ESTANCADO", T0 + 95)                          # new, never held
    m = plan(w.state, T0 + 106, PE).send[0]
    assert m.title == "after quiet hours: 2 stalled"
