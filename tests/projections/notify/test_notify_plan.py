"""Pure notify pipeline: each stage table-driven, then whole-plan scenarios on a virtual clock."""
from __future__ import annotations

import msgspec
import pytest

from events.log import iso
from events.types import (AgentClassified, AgentNudged, DodFlagged, DodVerdict, MissionCompleted,
                          NoticeAbandoned, NoticeFailed, NoticeSilenced, RuleViolated,
                          SilenceAdded, SilenceRemoved, SourceFailed, SourceRecovered, SwarmChanged,
                          WpChanged)
from projections.notify import fold as notify
from projections.base import encode_state
from projections.notify.fold import Policy
from projections.notify.plan import (DedupeReason, GroupReason, InhibitReason, Item, NudgeReason,
                                     RouteReason, SilenceReason, dedupe, inhibit, nudge_decision,
                                     nudges, plan, ready_at, route, silence)

from tests.support.notifyworld import NP, P, PE, T0, World, cond, flap


# ---- stages --------------------------------------------------------------------------------
@pytest.mark.parametrize("sev,min_sev,want", [
    ("urgent", "warning", RouteReason.ROUTED),           # urgent always passes warning
    ("warning", "warning", RouteReason.ROUTED),          # equal passes
    ("info", "warning", RouteReason.BELOW_MIN_SEVERITY),  # info dropped by default
    ("info", "info", RouteReason.ROUTED),                # info allowed when asked
    ("warning", "urgent", RouteReason.BELOW_MIN_SEVERITY),  # phone-only setups
])
def test_route(sev, min_sev, want):
    assert route(cond(sev=sev), Policy(min_severity=min_sev)) is want


@pytest.mark.parametrize("kw,want", [
    ({}, InhibitReason.PASS),                                            # active
    ({"cleared": T0 + 3, "cleared_by": "TRABAJANDO"}, InhibitReason.CLEARED),  # resolved before push
    ({"cleared": T0 + 3, "cleared_by": "CERRADO"}, InhibitReason.CLOSED),      # agent closed
    ({"cleared": T0 + 3, "cleared_by": "TRABAJANDO", "sent_rev": 0}, InhibitReason.RESOLVED),  # pushed, then fixed
])
def test_inhibit(kw, want):
    assert inhibit(cond(**kw)) is want


S_ALL = {"s1": {"subject": "agent:a1", "cls": None, "until": T0 + 100, "reason": ""}}
S_GLOB = {"s2": {"subject": "agent:*", "cls": "ESTANCADO", "until": T0 + 100, "reason": ""}}


@pytest.mark.parametrize("sil,kw,now,want", [
    (S_ALL, {}, T0, SilenceReason.SILENCED),                       # subject match
    (S_ALL, {"silenced": "s1"}, T0, SilenceReason.SILENCED_RECORDED),  # recorded once
    (S_ALL, {}, T0 + 100, SilenceReason.PASS),                     # expired
    (S_ALL, {"subject": "agent:a2"}, T0, SilenceReason.PASS),      # other subject
    (S_GLOB, {"cls": "ESTANCADO", "subject": "agent:zz"}, T0, SilenceReason.SILENCED),  # glob + class
    (S_GLOB, {"cls": "RECLAMA"}, T0, SilenceReason.PASS),          # class differs
])
def test_silence(sil, kw, now, want):
    assert silence(cond(**kw), sil, now)[0] is want


@pytest.mark.parametrize("kw,now,inflight,retry,want,due,attempt", [
    ({}, T0, (), {}, DedupeReason.NEW, T0, 1),                                        # fresh
    ({}, T0, ("c",), {}, DedupeReason.IN_FLIGHT, None, 1),                            # handed to worker
    ({}, T0 + 5, (), {"c": [1, T0 + 10]}, DedupeReason.RETRY_WAIT, T0 + 10, 2),       # backoff
    ({}, T0 + 10, (), {"c": [2, T0 + 10]}, DedupeReason.RETRY_DUE, T0 + 10, 3),       # retry now
    ({"sent_rev": 0, "sent_at": T0}, T0 + 60, (), {}, DedupeReason.ALREADY_SENT, T0 + 4 * 3600, 1),  # no repeat yet
    ({"sent_rev": 0, "sent_at": T0}, T0 + 4 * 3600, (), {}, DedupeReason.REPEAT_DUE, T0 + 4 * 3600, 1),  # repeat
    ({"sent_rev": 0, "sent_at": T0, "rev": 2, "changed": T0 + 20}, T0 + 30, (), {},
     DedupeReason.UPDATE_WAIT, T0 + 300, 1),                                          # swarm update paced
    ({"cls": "SOURCE_FAILED", "sev": "warning"}, T0 + 30, (), {}, DedupeReason.NOT_YET_DUE, T0 + 60, 1),  # short outage
])
def test_dedupe(kw, now, inflight, retry, want, due, attempt):
    assert dedupe("c", cond(**kw), now, Policy(source_failed_after=60), set(inflight), retry) == (want, due, attempt)


def test_dedupe_repeat_zero_never():
    p = Policy(repeat_interval=0)
    assert dedupe("c", cond(sent_rev=0, sent_at=T0), T0 + 1e7, p, set(), {})[0] is DedupeReason.ALREADY_SENT


@pytest.mark.parametrize("sev,retry,last,want", [
    ("urgent", False, T0, (T0 + 10, GroupReason.WAIT_GROUP)),         # group_interval never holds urgent
    ("warning", False, -1e18, (T0 + 10, GroupReason.WAIT_GROUP)),     # first push: group_wait
    ("warning", False, T0 - 5, (T0 + 295, GroupReason.WAIT_INTERVAL)),  # paced after a recent push
    ("warning", True, T0, (T0, GroupReason.WAIT_GROUP)),              # retries go at retry_at
])
def test_ready_at(sev, retry, last, want):
    assert ready_at(Item(cid="c", c=cond(sev=sev), due=T0, retry=retry), P, last) == want


# ---- whole plans ---------------------------------------------------------------------------
def test_ten_reclama_one_message_after_group_wait():
    w = World()
    for i in range(10):
        w.cls(f"a{i}", "RECLAMA", T0 + i * 0.5, state="waiting")
    p = plan(w.state, T0 + 5, P)
    assert p.send == [] and p.next_wake == T0 + 10
    p = plan(w.state, T0 + 10, P)
    assert len(p.send) == 1
    m = p.send[0]
    assert m.title == "10 need you" and m.severity == "urgent" and len(m.covers) == 10
    assert all(f"a{i} " in m.body for i in range(10))


def test_resolved_inside_group_wait_is_never_pushed():
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    w.cls("a1", "TRABAJANDO", T0 + 4)
    p = plan(w.state, T0 + 60, P)
    assert p.send == [] and ("agent:a1|RECLAMA#1", "inhibit", "cleared-before-push") in \
        [(d.key, d.stage, d.reason) for d in p.decisions]


def test_closed_agent_drops_stall_notice():
    w = World()
    w.cls("a1", "ESTANCADO", T0)
    w.cls("a1", "CERRADO", T0 + 2)
    p = plan(w.state, T0 + 600, P)
    assert p.send == [] and any(d.reason == InhibitReason.CLOSED.value for d in p.decisions)


def test_title_and_body_order():
    w = World()
    w.cls("m1", "MAL_LANZADO", T0, reason="no dod_contract")
    w.cls("s1", "ESTANCADO", T0)
    w.cls("d1", "DICE_TERMINADO", T0, state="idle")
    w.cls("r1", "RECLAMA", T0, state="waiting")
    w.cls("r2", "RECLAMA", T0, state="waiting")
    w.add(RuleViolated(run="T1", rule="deploy-gate", step="launch_intent"), T0)
    p = plan(w.state, T0 + 10, Policy(min_severity="info"))
    m = p.send[0]
    assert m.title == "2 need you · 1 ready for review · 1 stalled · 1 mislaunched · 1 rule violated"
    assert [ln.split()[0] for ln in m.lines] == ["RECLAMA", "RECLAMA", "DICE_TERMINADO", "ESTANCADO",
                                                 "MAL_LANZADO", "RULE_VIOLATED"]


def test_urgent_not_held_by_group_interval_but_warning_is():
    w = World()
    w.cls("s1", "ESTANCADO", T0)
    m = plan(w.state, T0 + 10, P).send[0]
    w.sent(m, T0 + 11)
    w.cls("s2", "ESTANCADO", T0 + 20)
    p = plan(w.state, T0 + 40, P)
    assert p.send == [] and p.next_wake == T0 + 11 + 300      # paced by group_interval
    w.cls("r1", "RECLAMA", T0 + 50, state="waiting")
    p = plan(w.state, T0 + 60, P)                              # urgent: group_wait only
    assert len(p.send) == 1 and p.send[0].title == "1 need you · 1 stalled"   # s2 rides along


def test_repeat_after_interval_and_across_restart():
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, P).send[0]
    w.sent(m, T0 + 10)
    restored = msgspec.json.decode(encode_state(w.state))     # a restart: snapshot round trip
    assert plan(restored, T0 + 3600, P).send == []
    p = plan(restored, T0 + 10 + 4 * 3600 + 10, P)
    assert len(p.send) == 1 and p.send[0].notice != m.notice
    assert plan(restored, T0 + 1e6, Policy(repeat_interval=0)).send == []


def test_failed_then_retry_same_notice_then_abandon():
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, P).send[0]
    w.add(NoticeFailed(notice=m.notice, covers=m.covers, attempt=1, error="500", retry_at=iso(T0 + 20),
                       keys=m.keys), T0 + 10)
    p = plan(w.state, T0 + 15, P)
    assert p.send == [] and p.next_wake == T0 + 20
    m2 = plan(w.state, T0 + 20, P).send[0]
    assert (m2.notice, m2.attempt) == (m.notice, 2)
    w.add(NoticeAbandoned(notice=m.notice, covers=m.covers, attempt=2, keys=m2.keys), T0 + 21)
    p = plan(w.state, T0 + 40, P)       # the agent's notice is not retried; an "undelivered" warning is due
    assert [x.title for x in p.send] == ["1 undelivered"]


def test_source_failed_only_after_a_minute():
    w = World()
    w.add(SourceFailed(source="fleet", error="glob folder vanished"), T0)
    assert plan(w.state, T0 + 50, Policy(source_failed_after=60)).send == []
    w.add(SourceRecovered(source="fleet"), T0 + 55)
    assert plan(w.state, T0 + 600, Policy(source_failed_after=60)).send == []
    w.add(SourceFailed(source="fleet", error="x"), T0 + 700)
    p = plan(w.state, T0 + 700 + 70, Policy(source_failed_after=60))
    assert p.send[0].title == "1 source down"


def test_swarm_children_aggregate_and_pace():
    w = World()
    pol = Policy(min_severity="info", group_wait=10, group_interval=300)
    for c in ("c1", "c2", "c3", "c4"):
        w.add(SwarmChanged(group="g", child=c, to="running"), T0)
    p = plan(w.state, T0 + 10, pol)
    assert len(p.send) == 1 and p.send[0].lines == ["SWARM g · 10s · 4 running"]
    w.sent(p.send[0], T0 + 10)
    for c in ("c1", "c2"):
        w.add(SwarmChanged(group="g", child=c, from_="running", to="done"), T0 + 20)
    assert plan(w.state, T0 + 40, pol).send == []              # paced: one per group_interval
    p = plan(w.state, T0 + 320, pol)
    assert len(p.send) == 1 and "2 done · 2 running" in p.send[0].body


def test_approval_required_is_urgent_and_clears():
    w = World()
    w.add(WpChanged(mission="m1", wp="w3", from_="READY", to="APPROVAL_REQUIRED"), T0)
    assert plan(w.state, T0 + 10, P).send[0].title == "1 need you"
    w.add(WpChanged(mission="m1", wp="w3", from_="APPROVAL_REQUIRED", to="READY"), T0 + 5)
    assert plan(w.state, T0 + 10, P).send == []


def test_dod_flags_and_info_filtered():
    w = World()
    w.add(DodFlagged(agent="a1", flag="self-approved", detail="SECRET dod text"), T0)
    w.add(DodVerdict(agent="a2", verdict="met", verifier="v", evidence="SECRET"), T0)
    w.add(MissionCompleted(mission="m1", wps=3), T0)
    p = plan(w.state, T0 + 10, P)                              # info (verdict, mission) below warning
    assert p.send[0].title == "1 self-approved" and "SECRET" not in p.send[0].body


def test_silence_records_once_and_expires():
    w = World()
    w.add(SilenceAdded(silence="s1", subject_match="agent:a1", until=iso(T0 + 100)), T0)
    w.cls("a1", "RECLAMA", T0 + 1, state="waiting")
    p = plan(w.state, T0 + 20, P)
    assert p.send == [] and len(p.record) == 1 and isinstance(p.record[0], NoticeSilenced)
    w.add(p.record[0], T0 + 20)
    p = plan(w.state, T0 + 30, P)
    assert p.send == [] and p.record == [] and p.next_wake == T0 + 100
    w.add(SilenceRemoved(silence="s1"), T0 + 40)
    assert len(plan(w.state, T0 + 41, P).send) == 1            # still needs you: pushed now


def test_flapping_one_notice_holds_others_then_settles():
    w = World()
    t = flap(w, "a1", 13, T0, step=1.0)                        # ends in RECLAMA
    p = plan(w.state, t + 10, P)
    assert [m.title for m in p.send] == ["1 flapping"]
    assert any(d.stage == "flap" and d.reason == "held-while-flapping" for d in p.decisions)
    w.sent(p.send[0], t + 10)
    t = flap(w, "a1", 5, t + 20, step=1.0)                      # still flapping: nothing new
    assert plan(w.state, t + 10, P).send == []
    p = plan(w.state, t + 3700, P)                             # quiet for the window: settled
    assert [m.title for m in p.send] == ["1 need you"]


def test_slow_changes_are_not_flapping():
    w = World()
    t = flap(w, "a1", 13, T0, step=3600.0)
    assert not any(d.stage == "flap" for d in plan(w.state, t, P).decisions)


# ---- nudges --------------------------------------------------------------------------------


@pytest.mark.parametrize("agent_kw,dod,now,target,want", [
    ({"cls": "ESTANCADO", "state": "idle"}, None, T0 + 60, "s:1", NudgeReason.NUDGE),     # stalled, pending DoD
    ({"cls": "ESTANCADO", "state": "idle"}, None, T0 + 30, "s:1", NudgeReason.NOT_YET),   # before `after`
    ({"cls": "RECLAMA", "state": "waiting"}, None, T0 + 600, "s:1", NudgeReason.NOT_STALLED),  # needs a human
    ({"cls": "ESTANCADO", "state": "waiting"}, None, T0 + 600, "s:1", NudgeReason.WAITING),  # never a waiting agent
    ({"cls": "ESTANCADO", "state": "idle"}, "met", T0 + 600, "s:1", NudgeReason.DOD_MET),  # DoD done
    ({"cls": "ESTANCADO", "state": "idle", "nudges": 2}, None, T0 + 9999, "s:1", NudgeReason.MAX_REACHED),
    ({"cls": "ESTANCADO", "state": "idle", "nudges": 1, "nudged_at": T0 + 60}, None, T0 + 200, "s:1",
     NudgeReason.NOT_YET),                                                                 # gap between nudges
    ({"cls": "ESTANCADO", "state": "idle"}, None, T0 + 600, None, NudgeReason.NO_TARGET),  # argv needs {target}
])
def test_nudge_decision(agent_kw, dod, now, target, want):
    ag = {"cls": "ESTANCADO", "since": T0, "seq": 5, "state": "idle", "cond": None, "nudges": 0, "nudged_at": None}
    ag.update(agent_kw)
    st = notify.initial()
    if dod:
        st["dod"]["a1"] = dod
    assert nudge_decision("a1", ag, st, now, NP, target, set())[0] is want


def test_nudge_counts_per_stall_from_events():
    w = World()
    seq = w.cls("a1", "ESTANCADO", T0, state="idle")
    acts, _ = nudges(w.state, T0 + 60, NP, {"a1": "fleet:1"})
    assert [(a.agent, a.attempt, a.stall_seq, a.target) for a in acts] == [("a1", 1, seq, "fleet:1")]
    w.add(AgentNudged(agent="a1", attempt=1, stall_seq=seq), T0 + 61)
    w.add(AgentNudged(agent="a1", attempt=2, stall_seq=seq), T0 + 400)
    assert nudges(w.state, T0 + 9999, NP, {"a1": "fleet:1"})[0] == []
    w.cls("a1", "TRABAJANDO", T0 + 10000)
    w.cls("a1", "ESTANCADO", T0 + 20000, state="idle")        # a new stall: nudges again
    assert len(nudges(w.state, T0 + 20060, NP, {"a1": "fleet:1"})[0]) == 1


# ---- state hygiene -------------------------------------------------------------------------
def test_state_round_trips_and_stays_bounded():
    w = World()
    t = T0
    for i in range(20_000):
        a = f"a{i % 300}"
        w.cls(a, ("RECLAMA", "TRABAJANDO", "ESTANCADO", "CERRADO")[i % 4], t, state="waiting")
        if i % 50 == 0:
            w.add(RuleViolated(run=f"r{i}", rule="no-redo"), t)
        t += 30
    enc = encode_state(w.state)
    assert encode_state(msgspec.json.decode(enc)) == enc
    assert len(w.state["conds"]) <= notify.MAX_CONDS and len(enc) < 2_000_000


# ---- fold cost structures: exact, deterministic, bounded -------------------------------------
def test_flap_entries_equal_the_reference_percent():
    """The percents rebuilt at plan time equal flap_percent over each entry's last 21 classes
    (what the fold used to store), for histories longer than the 41 kept entries."""
    import random

    from projections.notify.flap import HIST_N, entries, flap_percent
    rnd = random.Random(3)
    for _ in range(300):
        w, ref, t = World(), [], T0
        for _ in range(rnd.randrange(1, 80)):
            t += rnd.choice([0.0, 1.0, 30.0, 600.0, 3600.0, 4000.0])    # same tick .. beyond the window
            to = rnd.choice(("RECLAMA", "TRABAJANDO", "ESTANCADO")[: rnd.choice((1, 2, 3))])
            seq = w.cls("a1", to, t)
            ref = (ref + [[to, notify.parse_iso(iso(t)), seq, 0.0]])[-HIST_N:]
            ref[-1][3] = round(flap_percent(ref, ref[-1][1]), 2)
        assert entries(w.state["classes"]["agent:a1"]) == ref


def test_other_event_types_are_a_no_op():
    from events.types import StepChanged
    w = World()
    before = encode_state(w.state)
    w.add(StepChanged(run="r1", step="facts", to="begin"), T0)
    assert "step.changed" not in notify.TYPES and encode_state(w.state) == before


def test_snapshot_cuts_equal_full_replay_through_prunes():
    """Incremental folding with snapshot round trips at cuts (expiry queues, swarm counts,
    class lists, overflow of MAX_CONDS) equals one fold from scratch."""
    from projections.base import decode_state
    evs, t = [], T0
    for i in range(6000):
        t += 0.5 if i % 500 else 400.0                       # pruning by age between bursts
        k = i % 10
        if k < 6:
            ev = AgentClassified(agent=f"a{i % 400}", to=("RECLAMA", "TRABAJANDO", "ESTANCADO", "CERRADO")[i % 4],
                                 state="waiting")
        elif k < 8:
            ev = SwarmChanged(group=f"g{i % 3}", child=f"c{i % 7}", to=("running", "done", None)[i % 3])
        elif k == 8:
            ev = DodVerdict(agent=f"a{i % 50}", verdict="met", verifier="v")
        else:
            ev = SourceFailed(source="s", error="x") if i % 20 == 9 else SourceRecovered(source="s")
        evs.append((ev, t))
    full, inc = World(), World()
    for i, (ev, t) in enumerate(evs):
        full.add(ev, t)
        if i % 997 == 0:
            inc.state = decode_state(notify, encode_state(inc.state))
        inc.add(ev, t)
    assert encode_state(inc.state) == encode_state(full.state)
    assert len(full.state["conds"]) <= notify.MAX_CONDS
    assert len(full.state["exp_cleared"]) + len(full.state["exp_day"]) <= 2 * notify.MAX_EXPIRY


def test_old_snapshot_layout_is_refused():
    """A snapshot without the current keys does not decode, so the watcher replays instead."""
    from projections.base import decode_state
    old = notify.initial()
    del old["exp_cleared"]
    with pytest.raises(msgspec.ValidationError):
        decode_state(notify, encode_state(old))


# ---- the phone loop: ack, escalation, quiet hours, routes, all clear (virtual clock) -----------
from datetime import datetime, timezone  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

from events.types import NoticeAcked, NoticeEscalated, NoticeHeld  # noqa: E402
from projections.notify.escalate import AckReason, EscalateReason, ack_stage, escalate_decision  # noqa: E402
from projections.notify.msg import dest  # noqa: E402
from projections.notify.quiet import quiet_until  # noqa: E402

MADRID = ZoneInfo("Europe/Madrid")


def _local(y, mo, d, h, mi, tz=MADRID) -> float:
    return datetime(y, mo, d, h, mi, tzinfo=tz).timestamp()


@pytest.mark.parametrize("kw,now,want,until", [
    ({}, T0, AckReason.PASS, None),                                          # never acked
    ({"acked": notify.NEVER, "acked_at": T0}, T0 + 1e6, AckReason.ACKED, None),  # until it clears
    ({"acked": T0 + 3600, "acked_at": T0}, T0 + 10, AckReason.SNOOZED, T0 + 3600),  # snoozed 1h
    ({"acked": T0 + 3600, "acked_at": T0}, T0 + 3600, AckReason.PASS, None),   # snooze over
])
def test_ack_stage(kw, now, want, until):
    assert ack_stage(cond(**kw), now) == (want, until)


@pytest.mark.parametrize("kw,now,want,wake", [
    ({"sent_rev": 0, "sent_at": T0 + 10}, T0 + 899, EscalateReason.NOT_YET, T0 + 900),
    ({"sent_rev": 0, "sent_at": T0 + 10}, T0 + 900, EscalateReason.ESCALATE, None),
    ({}, T0 + 900, EscalateReason.NOT_PUSHED, None),                          # never pushed: nothing to follow up
    ({"sent_rev": 0, "acked": notify.NEVER, "acked_at": T0 + 60}, T0 + 900, EscalateReason.ACKED, None),
    ({"sent_rev": 0, "acked": T0 + 120, "acked_at": T0 + 60}, T0 + 900, EscalateReason.ACKED, None),  # a snooze too
    ({"sent_rev": 0, "escalated": T0 + 900}, T0 + 2000, EscalateReason.DONE, None),  # once per condition
    ({"sent_rev": 0, "cleared": T0 + 100, "cleared_by": "TRABAJANDO"}, T0 + 900, EscalateReason.CLEARED, None),
    ({"sent_rev": 0, "sev": "warning", "cls": "ESTANCADO"}, T0 + 900, EscalateReason.NOT_URGENT, None),
])
def test_escalate_decision(kw, now, want, wake):
    r, w = escalate_decision("agent:a1|RECLAMA#1", cond(**kw), now, PE, frozenset(), {}, {}, None)
    assert (r, w) == (want, wake)


def test_escalate_decision_silenced_quiet_and_retry():
    c = cond(sent_rev=0)
    sil = {"s1": {"subject": "agent:a1", "cls": None, "until": T0 + 5000}}
    assert escalate_decision("x", c, T0 + 900, PE, frozenset(), {}, sil, None)[0] is EscalateReason.SILENCED
    assert escalate_decision("x", c, T0 + 900, PE, {"x"}, {}, {}, None)[0] is EscalateReason.IN_FLIGHT
    assert escalate_decision("x", c, T0 + 900, PE, frozenset(), {"x@esc": [1, T0 + 950]}, {}, None) == \
        (EscalateReason.RETRY_WAIT, T0 + 950)
    strict = msgspec.structs.replace(PE, quiet_urgent=False)
    assert escalate_decision("x", c, T0 + 900, strict, frozenset(), {}, {}, T0 + 9000) == \
        (EscalateReason.QUIET, T0 + 9000)
    assert escalate_decision("x", c, T0 + 900, PE, frozenset(), {}, {}, T0 + 9000)[0] is EscalateReason.ESCALATE


def test_unanswered_reclama_escalates_exactly_once_at_escalate_after():
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    sent = []
    for t in range(0, 4000, 5):     # a tick every 5 s for over an hour of virtual time
        p = plan(w.state, T0 + t, PE)
        for m in p.send:
            sent.append((t, m))
            if m.kind == "escalate":
                w.add(NoticeEscalated(notice=m.notice, conditions=m.conditions, after=m.after, covers=m.covers), T0 + t)
            else:
                w.sent(m, T0 + t)
    kinds = [(t, m.kind) for t, m in sent]
    assert kinds == [(10, "notice"), (900, "escalate")]
    esc = sent[1][1]
    assert esc.title.startswith("unanswered for 15m: ") and esc.priority and esc.severity == "urgent"
    assert esc.route == "" and "a1" in esc.body


def test_escalation_goes_to_escalate_urls_and_acked_never_escalates():
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    w.cls("a2", "RECLAMA", T0, state="waiting")
    pol = msgspec.structs.replace(PE, escalate_urls=True)
    m = plan(w.state, T0 + 10, pol).send[0]
    w.sent(m, T0 + 10)
    a1 = next(k.rpartition("@")[0] for k in m.keys if "a1" in k)
    w.add(NoticeAcked(notice=m.notice, conditions=[a1], via="cli"), T0 + 60)
    p = plan(w.state, T0 + 900, pol)
    assert [x.kind for x in p.send] == ["escalate"] and p.send[0].route == "escalate"
    assert "a2" in p.send[0].body and "a1" not in p.send[0].body
    # acked: no repeat either, long after repeat_interval
    w.add(NoticeEscalated(notice=p.send[0].notice, conditions=p.send[0].conditions, after=900), T0 + 900)
    later = plan(w.state, T0 + 5 * 3600, pol)
    assert all("a1" not in x.body for x in later.send)


def test_snooze_ends_with_one_reminder():
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, PE).send[0]
    w.sent(m, T0 + 10)
    w.add(NoticeAcked(notice=m.notice, conditions=m.conditions, via="web", until=iso(T0 + 3610)), T0 + 20)
    assert plan(w.state, T0 + 3000, PE).send == []
    assert plan(w.state, T0 + 3000, PE).next_wake == pytest.approx(T0 + 3610, abs=0.01)
    p = plan(w.state, T0 + 3620, PE)
    assert len(p.send) == 1 and p.send[0].kind == "notice"     # the reminder (acked once: no escalation)
    w.sent(p.send[0], T0 + 3620)
    assert plan(w.state, T0 + 3700, PE).send == []


def test_ack_clears_with_the_class_change():
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, PE).send[0]
    w.sent(m, T0 + 10)
    w.add(NoticeAcked(notice=m.notice, conditions=m.conditions, via="cli"), T0 + 20)
    w.cls("a1", "TRABAJANDO", T0 + 30)
    w.cls("a1", "RECLAMA", T0 + 40, state="waiting")        # a new condition: not acked
    p = plan(w.state, T0 + 50, PE)
    assert len(p.send) == 1 and "a1" in p.send[0].body


@pytest.mark.parametrize("local,windows,want", [
    ((2026, 12, 1, 23, 0), ["22:00-07:00"], (2026, 12, 2, 7, 0)),     # over midnight, before it
    ((2026, 12, 2, 3, 30), ["22:00-07:00"], (2026, 12, 2, 7, 0)),     # over midnight, after it
    ((2026, 12, 2, 7, 0), ["22:00-07:00"], None),                      # the end is not quiet
    ((2026, 12, 2, 12, 0), ["22:00-07:00"], None),
    ((2026, 12, 2, 12, 30), ["12:00-13:00", "13:00-14:00"], (2026, 12, 2, 14, 0)),  # adjacent windows chain
    ((2026, 12, 2, 23, 0), ["22:00-24:00"], (2026, 12, 3, 0, 0)),     # 24:00 = end of the day
    ((2026, 3, 29, 1, 0), ["22:00-07:00"], (2026, 3, 29, 7, 0)),      # DST spring forward: local 07:00
    ((2026, 10, 25, 1, 0), ["22:00-07:00"], (2026, 10, 25, 7, 0)),    # DST fall back
    ((2026, 12, 2, 12, 0), [], None),
])
def test_quiet_until(local, windows, want):
    got = quiet_until(_local(*local), windows, MADRID)
    assert got == (None if want is None else _local(*want))


def test_quiet_until_other_zone_and_utc():
    t = datetime(2026, 12, 1, 22, 30, tzinfo=timezone.utc).timestamp()
    assert quiet_until(t, ["22:00-07:00"], timezone.utc) == datetime(2026, 12, 2, 7, 0, tzinfo=timezone.utc).timestamp()
    assert quiet_until(t, ["22:00-07:00"], ZoneInfo("Asia/Tokyo")) is None   # 07:30 in Tokyo


def test_quiet_hours_hold_warnings_let_urgent_through_then_one_summary():
    w = World()
    q_end = T0 + 6 * 3600
    w.cls("s1", "ESTANCADO", T0)
    w.cls("s2", "MAL_LANZADO", T0 + 100)
    w.cls("r1", "RECLAMA", T0 + 200, state="waiting")
    held_recorded = 0
    for t in range(0, 6 * 3600, 60):
        p = plan(w.state, T0 + t, PE, quiet_end=q_end)
        for ev in p.record:
            assert isinstance(ev, NoticeHeld) and ev.reason == "quiet"
            held_recorded += 1
            w.add(ev, T0 + t)
        for m in p.send:
            assert "r1" in m.body and "s1" not in m.body and "s2" not in m.body    # only urgent
            w.sent(m, T0 + t)
    assert held_recorded == 2                     # s1, then s2: each recorded once
    p = plan(w.state, q_end + 1, PE, quiet_end=None)
    assert len(p.send) == 1
    m = p.send[0]
    assert m.title.startswith("after quiet hours: ") and "s1" in m.body and "s2" in m.body and "r1" not in m.body


def test_quiet_urgent_false_holds_urgent_too():
    w = World()
    w.cls("r1", "RECLAMA", T0, state="waiting")
    pol = msgspec.structs.replace(PE, quiet_urgent=False)
    p = plan(w.state, T0 + 20, pol, quiet_end=T0 + 3600)
    assert p.send == [] and len(p.record) == 1 and p.next_wake == pytest.approx(T0 + 3600, abs=0.01)


@pytest.mark.parametrize("routes,c,want", [
    ((), cond(), ""),
    (({"severity": "urgent"},), cond(), "route:0"),
    (({"severity": "warning"}, {"class": "reclama"}), cond(), "route:1"),        # class is case-insensitive
    (({"subject": "a1*"}, {"severity": "urgent"}), cond(), "route:0"),           # first match wins
    (({"subject": "run:*"},), cond(), ""),                                        # no match: top-level urls
    (({"severity": "urgent", "class": "ESTANCADO"},), cond(), ""),               # every key must hold
])
def test_route_destinations(routes, c, want):
    assert dest(c, msgspec.structs.replace(P, routes=routes)) == want


def test_routes_split_one_tick_into_messages_per_destination():
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    w.cls("a2", "ESTANCADO", T0)
    pol = msgspec.structs.replace(P, routes=({"severity": "urgent"},))
    p = plan(w.state, T0 + 10, pol)
    by = {m.route: m for m in p.send}
    assert set(by) == {"route:0", ""} and "a1" in by["route:0"].body and "a2" in by[""].body
    assert by["route:0"].priority and not by[""].priority


def test_send_resolved_one_all_clear_for_pushed_conditions():
    w = World()
    pol = msgspec.structs.replace(P, send_resolved=True)
    w.cls("a1", "RECLAMA", T0, state="waiting")
    w.cls("a2", "ESTANCADO", T0)
    m = plan(w.state, T0 + 10, pol).send[0]
    w.sent(m, T0 + 10)
    w.cls("a3", "RECLAMA", T0 + 11, state="waiting")
    w.cls("a3", "TRABAJANDO", T0 + 12)                 # cleared before its push: never said, no all-clear
    w.cls("a1", "TRABAJANDO", T0 + 20)
    w.cls("a2", "CERRADO", T0 + 21)
    assert plan(w.state, T0 + 25, pol).send == []      # waits group_wait after the clearing
    p = plan(w.state, T0 + 31, pol)
    assert [x.kind for x in p.send] == ["resolved"]
    r = p.send[0]
    assert r.title == "all clear: 2 resolved" and "a1 · 11s · back to work" in r.body and "closed" in r.body
    assert "a3" not in r.body
    w.sent(r, T0 + 31)
    assert plan(w.state, T0 + 60, pol).send == []      # once


def test_claims_done_with_met_dod_not_pushed():
    w = World()
    pol = msgspec.structs.replace(P, min_severity="info")
    w.add(DodVerdict(agent="a1", verdict="met", verifier="v", evidence="e"), T0)
    w.cls("a1", "DICE_TERMINADO", T0 + 1, state="idle")
    w.cls("a2", "DICE_TERMINADO", T0 + 1, state="idle")
    p = plan(w.state, T0 + 400, pol)
    body = "\n".join(m.body for m in p.send)
    assert "DICE_TERMINADO a2" in body and "DICE_TERMINADO a1" not in body


def test_push_lines_escape_agent_strings_one_line_per_item():
    w = World()
    evil = "a1\ndod.verdict a9 met verifier=human-lead\x1b]0;pwn\x07"
    w.add(AgentClassified(agent=evil, to="RECLAMA", state="waiting", reason="line1\nline2\u202e"), T0)
    w.cls("a2", "RECLAMA", T0, state="waiting")
    m = plan(w.state, T0 + 10, P).send[0]
    assert len(m.lines) == 2 and all("\n" not in ln and "\x1b" not in ln and "\u202e" not in ln for ln in m.lines)
    assert "\\x1b" in m.body and not any(ln.startswith("dod.verdict") for ln in m.body.split("\n"))


def test_after_quiet_hours_prefix_only_on_the_first_push_after_them():
    w = World()
    w.cls("s1", "ESTANCADO", T0)
    p = plan(w.state, T0 + 20, PE, quiet_end=T0 + 100)
    w.add(p.record[0], T0 + 20)
    m = plan(w.state, T0 + 101, PE).send[0]
    assert m.title.startswith("after quiet hours: ")
    w.sent(m, T0 + 101)
    again = plan(w.state, T0 + 101 + 4 * 3600 + 20, PE).send[0]         # the repeat, 4 h later
    assert not again.title.startswith("after quiet hours")


def test_every_condition_goes_through_the_one_list_of_stages():
    """The stages are one list of one signature (notify_plan.STAGES); a plan's per-condition
    decisions name only those stages, in the list's order per condition, and a stage that stops a
    condition is its last decision (a silenced agent stops at silence; a new one is due)."""
    from projections.notify.plan import STAGES

    assert [n for n, _ in STAGES] == ["route", "inhibit", "silence", "flap", "ack", "dedupe", "quiet"]
    w = World()
    w.cls("a1", "RECLAMA", T0, state="waiting")
    w.cls("a2", "RECLAMA", T0, state="waiting")
    w.add(SilenceAdded(silence="s1", subject_match="agent:a2", until=iso(T0 + 600)), T0)
    p = plan(w.state, T0 + 60, P)
    order = [n for n, _ in STAGES]
    by: dict[str, list[str]] = {}
    for d in p.decisions:
        if d.stage in order:
            by.setdefault(d.key.partition("|")[0], []).append(d.stage)
    assert by["agent:a2"] == ["silence"]
    assert by["agent:a1"] == ["dedupe"] and p.send
    for stages in by.values():
        assert stages == sorted(stages, key=order.index)
