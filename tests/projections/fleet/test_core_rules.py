"""Contract rules of the termination machine and the run rules, one test per rule a surviving
mutant broke (issue 23). Named after the rule (docs/contract.md), checked on observable outcomes:
the class and the events of a tick, the violations reported through the real log.
"""
from __future__ import annotations

import pytest

from events.timefmt import iso
from projections.fleet import fold as fleet
from projections.fleet.fold import Cls, classify
from projections.observations import Snapshot, SourceResult
from tests.support.runsworld import T0 as RT0, EVID, HEX, MIN, S, doc, snap, violations
from tests.support.fleetstep import NOW, STALL, obs  # busy, haciendo, a contract, active at NOW
from tests.support.fleetstep import step


# ---- the termination machine --------------------------------------------------------------
@pytest.mark.parametrize("state,phase,want", [
    ("busy", "hecho", Cls.TRABAJANDO),          # claims done only when idle AND hecho
    ("busy", "done", Cls.TRABAJANDO),
    ("idle", "hecho", Cls.DICE_TERMINADO),
    ("idle", "done", Cls.DICE_TERMINADO),
    ("idle", "haciendo", Cls.TRABAJANDO),       # idle, recent activity
])
def test_claims_done_needs_idle_and_hecho(state, phase, want):
    assert classify(obs(state=state, phase=phase), NOW, STALL)[0] is want


@pytest.mark.parametrize("alias,state,want", [
    ("blocked", "busy", Cls.RECLAMA), ("blocked", "idle", Cls.RECLAMA),
    ("asking", "busy", Cls.RECLAMA), ("bloqueado", "busy", Cls.RECLAMA), ("preguntando", "idle", Cls.RECLAMA),
    ("working", "busy", Cls.TRABAJANDO), ("testing", "busy", Cls.TRABAJANDO), ("done", "idle", Cls.DICE_TERMINADO),
])
def test_english_phase_aliases_classify_as_their_spanish_phase(alias, state, want):
    assert classify(obs(state=state, phase=alias), NOW, STALL)[0] is want


def test_english_aliases_are_recorded_in_spanish():
    assert {a: fleet.normalise_phase(a) for a in ("working", "testing", "done", "asking", "blocked")} == {
        "working": "haciendo", "testing": "testeando", "done": "hecho", "asking": "preguntando",
        "blocked": "bloqueado"}


@pytest.mark.parametrize("kw,want", [
    (dict(state="idle", last_activity=NOW - STALL), Cls.ESTANCADO),          # exactly stall_after
    (dict(state="idle", last_activity=NOW - STALL + 0.5), Cls.TRABAJANDO),
    (dict(state="idle", last_activity=None), Cls.TRABAJANDO),                # unknown activity never stalls
    (dict(state="idle", phase="hecho", last_activity=0.0), Cls.DICE_TERMINADO),
    (dict(state="busy", last_activity=NOW - 10 * STALL), Cls.TRABAJANDO),    # no backstop: busy never stalls
])
def test_idle_stalls_after_stall_after(kw, want):
    assert classify(obs(**kw), NOW, STALL)[0] is want


@pytest.mark.parametrize("kw,want", [
    (dict(last_activity=NOW - 600), Cls.ESTANCADO),                          # exactly busy_silence
    (dict(last_activity=NOW - 599), Cls.TRABAJANDO),
    (dict(last_activity=NOW - 600, tool_open=True), Cls.TRABAJANDO),         # a tool call is open: longer
    (dict(last_activity=NOW - 1800, tool_open=True), Cls.ESTANCADO),
    (dict(last_activity=NOW - 1799, tool_open=True), Cls.TRABAJANDO),
    (dict(last_activity=None), Cls.TRABAJANDO),
])
def test_busy_silent_for_busy_silence_is_stalled(kw, want):
    assert classify(obs(state="busy", **kw), NOW, STALL, 600.0, 1800.0)[0] is want


def test_busy_silence_tool_shorter_than_busy_silence_keeps_the_longer():
    assert classify(obs(state="busy", last_activity=NOW - 300, tool_open=True), NOW, STALL, 600.0, 60.0)[0] \
        is Cls.TRABAJANDO


# ---- step: edges and closing ------------------------------------------------------------
def rec(cls: str, source: str = "fleet", **kw) -> dict:
    r = {"class": cls, "since": iso(NOW - 100), "state": "busy", "phase": "haciendo", "reason": "",
         "source": source, "contract_sha256": "c" * 64, "contract_len": 10, "target": None, "task": None,
         "last_activity": None}
    r.update(kw)
    return r


def _classified(evs) -> list[tuple[str, str | None, str]]:
    return [(e.agent, e.from_, e.to) for e in evs if type(e).__name__ == "AgentClassified"]


def test_a_closed_agent_is_not_closed_again():
    prev = {"agents": {"a1": rec("CERRADO")}, "sources": {}}
    memo = None
    for k in range(6):
        evs, memo = step(prev, Snapshot(), NOW + k, stall_after=STALL, memo=memo)
        assert _classified(evs) == [], k


def test_an_unseen_agent_is_closed_on_its_second_miss_once():
    prev = {"agents": {"a1": rec("TRABAJANDO")}, "sources": {}}
    evs, memo = step(prev, Snapshot(), NOW, stall_after=STALL)
    assert _classified(evs) == []                                 # one resync of grace
    evs, memo = step(prev, Snapshot(), NOW + 1, stall_after=STALL, memo=memo)
    assert _classified(evs) == [("a1", "TRABAJANDO", "CERRADO")]
    assert (evs[0].source, evs[0].reason) == ("fleet", "no longer seen by any source")


def test_a_seen_agent_resets_its_misses():
    prev = {"agents": {"a1": rec("TRABAJANDO")}, "sources": {}}
    _, memo = step(prev, Snapshot(), NOW, stall_after=STALL)
    _, memo = step(prev, Snapshot(agents={"a1": obs()}), NOW + 1, stall_after=STALL, memo=memo)
    evs, memo = step(prev, Snapshot(), NOW + 2, stall_after=STALL, memo=memo)
    assert _classified(evs) == []


def test_a_failed_source_never_closes_its_agents():
    prev = {"agents": {"a1": rec("TRABAJANDO", source="goals")}, "sources": {}}
    snap_ = Snapshot(failed={"goals": "boom"}, results=[SourceResult(name="goals", kind="goals", ok=False, error="boom")])
    memo = None
    for k in range(4):
        evs, memo = step(prev, snap_, NOW + k, stall_after=STALL, memo=memo)
        assert _classified(evs) == []


def test_source_failed_and_recovered_are_edges():
    bad = Snapshot(results=[SourceResult(name="goals", kind="goals", ok=False, error="boom")])
    good = Snapshot(results=[SourceResult(name="goals", kind="goals", ok=True)])
    names = lambda evs: [type(e).__name__ for e in evs]  # noqa: E731
    assert names(step({"agents": {}, "sources": {}}, bad, NOW, stall_after=STALL)[0]) == ["SourceFailed"]
    failed = {"agents": {}, "sources": {"goals": {"failed": True, "error": "boom", "since": iso(NOW)}}}
    assert names(step(failed, bad, NOW, stall_after=STALL)[0]) == []
    assert names(step(failed, good, NOW, stall_after=STALL)[0]) == ["SourceRecovered"]
    assert names(step({"agents": {}, "sources": {}}, good, NOW, stall_after=STALL)[0]) == []


def test_first_sight_is_an_event_and_a_persisting_class_is_not():
    prev = {"agents": {}, "sources": {}}
    evs, memo = step(prev, Snapshot(agents={"a1": obs()}), NOW, stall_after=STALL)
    assert _classified(evs) == [("a1", None, "TRABAJANDO")]
    prev = {"agents": {"a1": rec("TRABAJANDO", last_activity=iso(NOW))}, "sources": {}}
    evs, _ = step(prev, Snapshot(agents={"a1": obs()}), NOW + 1, stall_after=STALL, memo=memo)
    assert _classified(evs) == []


def test_time_alone_stalls_an_idle_agent_through_the_memo():
    o = obs(state="idle", last_activity=NOW)
    prev = {"agents": {"a1": rec("TRABAJANDO", state="idle", last_activity=iso(NOW))}, "sources": {}}
    snap_ = Snapshot(agents={"a1": o})
    evs, memo = step(prev, snap_, NOW + 1, stall_after=STALL)
    assert _classified(evs) == []
    evs, memo = step(prev, snap_, NOW + STALL - 1, stall_after=STALL, memo=memo)
    assert _classified(evs) == []
    evs, memo = step(prev, snap_, NOW + STALL, stall_after=STALL, memo=memo)
    assert _classified(evs) == [("a1", "TRABAJANDO", "ESTANCADO")]


# ---- pruning ------------------------------------------------------------------------------
DAY = 86400.0


def _agents(**classes_days_ago) -> dict:
    return {a: {"class": c, "since": iso(NOW - d * DAY)} for a, (c, d) in classes_days_ago.items()}


def test_pruning_forgets_only_agents_closed_over_seven_days():
    agents = _agents(old_closed=("CERRADO", 8), new_closed=("CERRADO", 6), edge=("CERRADO", 7),
                     reclama=("RECLAMA", 30), stalled=("ESTANCADO", 30), done=("DICE_TERMINADO", 30),
                     working=("TRABAJANDO", 30), mal=("MAL_LANZADO", 30))
    fleet.prune_closed(agents, iso(NOW), "since")
    assert sorted(agents) == ["done", "edge", "mal", "new_closed", "reclama", "stalled", "working"]


def test_pruning_through_the_fold_never_forgets_a_reclama_agent():
    from events.log import Recorded
    from events.types import AgentClassified
    st = fleet.initial()
    seq = 0

    def add(agent: str, to: str, t: float) -> None:
        nonlocal seq
        seq += 1
        ev = AgentClassified(agent=agent, to=to, state="waiting", reason="")
        fleet.fold(st, Recorded(seq, f"id{seq}", iso(t), "agent.classified", f"agent:{agent}", 1, ev, b"", b""))

    add("keep", "RECLAMA", NOW)
    add("gone", "CERRADO", NOW)
    while seq < fleet.PRUNE_EVERY - 1:
        add("busy", "TRABAJANDO", NOW + 8 * DAY)
    assert "gone" in st["agents"]                       # no prune before seq 512
    add("busy", "TRABAJANDO", NOW + 8 * DAY)            # seq 512: the prune scan
    assert "keep" in st["agents"] and st["agents"]["keep"]["class"] == "RECLAMA"
    assert "gone" not in st["agents"]


@pytest.mark.parametrize("seq,n,want", [
    (512, 1, True), (511, 1, False), (1024, 512, True), (513, 512, False),
    (1024, 513, True), (512, 513, False), (2048, 1500, True), (1024, 1500, False),
])
def test_prune_scan_comes_once_per_max_512_or_the_agent_count_rounded_up(seq, n, want):
    assert fleet.prune_due(seq, dict.fromkeys(range(n))) is want


# ---- run rules ----------------------------------------------------------------------------
@pytest.mark.parametrize("sha,n", [
    (HEX, 0), (HEX.upper(), 0), (HEX + "zz", 1), (HEX + "0", 1), ("zz" + HEX, 1), (HEX[:-1], 1),
    (HEX + "\n", 1), (64, 1), (None, 1),
])
def test_upload_intent_evidence_is_exactly_64_hex(h, sha, n):
    data = {"candidate": "c-1"} if sha is None else {"sha256": sha, "candidate": "c-1"}
    assert len(violations(h, None, {"upload_intent": S("begin", 50, **data)}, "upload-intent-evidence")) == n


@pytest.mark.parametrize("cand,n", [("c-1", 0), (7, 0), ("", 1), ("  ", 1), (True, 1), (None, 1), ([], 1)])
def test_upload_intent_evidence_needs_a_candidate(h, cand, n):
    data = {"sha256": HEX} if cand is None else {"sha256": HEX, "candidate": cand}
    assert len(violations(h, None, {"upload_intent": S("begin", 50, **data)}, "upload-intent-evidence")) == n


@pytest.mark.parametrize("rid,n", [("req-1", 0), (42, 0), (True, 1), (False, 1), ("", 1), (" ", 1),
                                   (None, 1), ([], 1), ({}, 1)])
def test_launch_request_id_must_be_a_string_or_number(h, rid, n):
    data = {} if rid is None else {"request_id": rid}
    assert len(violations(h, None, {"launch_intent": S("begin", 50, **data)}, "launch-request-id")) == n


def _no_redo(h, *ticks: dict) -> list[list[str]]:
    """Per tick, the no-redo violations reported (their details)."""
    got = []
    for i, steps in enumerate(ticks):
        evs = h.tick(snap(doc("R1", steps)), RT0 + (100 + i) * MIN)
        got.append([e.detail for e in evs if type(e).__name__ == "RuleViolated" and e.rule == "no-redo"])
    return got


def test_done_then_fail_then_begin_is_a_redo(h):
    # the fail after done is itself a redo (it ran again); the begin after that fail is one more
    got = _no_redo(h, {"apply": S("done", 10)}, {"apply": S("fail", 20)}, {"apply": S("begin", 30)})
    assert got[0] == [] and len(got[1]) == 1 and got[2] == ["apply was done and began again (attempt 3)"]


def test_begin_fail_begin_is_not_a_redo(h):
    assert _no_redo(h, {"apply": S("begin", 10)}, {"apply": S("fail", 20)}, {"apply": S("begin", 30)}) == [[], [], []]


def test_a_redo_is_reported_per_new_attempt(h):
    got = _no_redo(h, {"apply": S("done", 10)}, {"apply": S("begin", 20)}, {"apply": S("done", 30)},
                   {"apply": S("begin", 40)})
    assert [len(g) for g in got] == [0, 1, 0, 1]


def test_busy_silence_off_means_no_backstop_even_with_a_tool_setting():
    o = obs(state="busy", last_activity=NOW - 10 * STALL, tool_open=True)
    assert classify(o, NOW, STALL, None, 1800.0)[0] is Cls.TRABAJANDO


def test_busy_silence_stalls_a_busy_agent_through_the_memo():
    # stall_after (900) is longer than busy_silence (600): the busy agent is due at la + 600
    o = obs(state="busy", last_activity=NOW)
    prev = {"agents": {"a1": rec("TRABAJANDO", last_activity=iso(NOW))}, "sources": {}}
    snap_ = Snapshot(agents={"a1": o})
    memo = None
    for t in (NOW + 1, NOW + 599):
        evs, memo = step(prev, snap_, t, stall_after=STALL, memo=memo, busy_silence=600.0)
        assert _classified(evs) == []
    evs, memo = step(prev, snap_, NOW + 600, stall_after=STALL, memo=memo, busy_silence=600.0)
    assert _classified(evs) == [("a1", "TRABAJANDO", "ESTANCADO")]


@pytest.mark.parametrize("kw,cls", [
    (dict(state="idle", last_activity=None), "TRABAJANDO"),     # no activity known: never stalls by time
    (dict(state="busy", last_activity=None), "TRABAJANDO"),
    (dict(state="waiting", last_activity=NOW - 10 * STALL), "RECLAMA"),
    (dict(state="idle", phase="hecho", last_activity=NOW - 10 * STALL), "DICE_TERMINADO"),
])
def test_agents_that_time_cannot_change_stay_quiet_tick_after_tick(kw, cls):
    o = obs(**kw)
    prev = {"agents": {"a1": rec(cls, state=kw["state"], phase=kw.get("phase", "haciendo"))}, "sources": {}}
    memo = None
    for t in (NOW, NOW + STALL, NOW + 10 * STALL, NOW + 100 * STALL):
        evs, memo = step(prev, Snapshot(agents={"a1": o}), t, stall_after=STALL, memo=memo, busy_silence=600.0)
        assert [e for e in evs if type(e).__name__ == "AgentClassified"] == []


def test_a_shorter_stall_after_applies_on_the_next_tick():
    # a reload that lowers stall_after: the idle agent is stalled at once, not at the old bound
    o = obs(state="idle", last_activity=NOW)
    prev = {"agents": {"a1": rec("TRABAJANDO", state="idle", last_activity=iso(NOW))}, "sources": {}}
    snap_ = Snapshot(agents={"a1": o})
    evs, memo = step(prev, snap_, NOW + 100, stall_after=STALL)
    assert _classified(evs) == []
    evs, memo = step(prev, snap_, NOW + 101, stall_after=50.0, memo=memo)
    assert _classified(evs) == [("a1", "TRABAJANDO", "ESTANCADO")]
    evs, memo = step(prev, snap_, NOW + 102, stall_after=50.0, memo=memo, busy_silence=600.0)
    assert _classified(evs) == [("a1", "TRABAJANDO", "ESTANCADO")]   # the backstop changed: afresh too


def test_an_agent_that_left_with_a_pending_stall_is_closed_not_classified():
    # a1 is idle (it would stall at NOW + 900) and then vanishes; a2 stays. Past a1's stall time
    # the tick must close a1 on its second miss, never look it up in the snapshot
    a1, a2 = obs(agent="a1", state="idle", last_activity=NOW), obs(agent="a2")
    prev = {"agents": {"a1": rec("TRABAJANDO", state="idle", last_activity=iso(NOW)),
                       "a2": rec("TRABAJANDO", last_activity=iso(NOW))}, "sources": {}}
    _, memo = step(prev, Snapshot(agents={"a1": a1, "a2": a2}), NOW + 1, stall_after=STALL)
    evs, memo = step(prev, Snapshot(agents={"a2": a2}), NOW + STALL + 5, stall_after=STALL, memo=memo)
    assert _classified(evs) == []
    evs, memo = step(prev, Snapshot(agents={"a2": a2}), NOW + STALL + 6, stall_after=STALL, memo=memo)
    assert _classified(evs) == [("a1", "TRABAJANDO", "CERRADO")]


def _rule_ticks(h, rule: str, *ticks) -> list[list[str]]:
    """Per tick (a list of run docs), the details of ``rule`` violations of R1 reported."""
    got = []
    for i, docs in enumerate(ticks):
        evs = h.tick(snap(*docs), RT0 + (100 + i) * MIN)
        got.append([e.detail for e in evs if type(e).__name__ == "RuleViolated" and e.rule == rule and e.run == "R1"])
    return got


def test_a_launch_that_switches_to_a_tainted_continue_from_is_an_audit_branch_violation(h):
    bad = doc("R0", {"audit": S("done", 1, verdict="fail")})
    clean = {"audit": S("done", 1, verdict="pass"), "launch_intent": S("begin", 5, request_id="r")}
    switched = {"audit": S("done", 1, verdict="pass"),
                "launch_intent": S("begin", 5, request_id="r", continue_from="R0")}
    got = _rule_ticks(h, "audit-branch", [doc("R1", clean), bad], [doc("R1", switched), bad],
                      [doc("R1", switched), bad])
    assert got[0] == [] and len(got[1]) == 1 and "tainted run R0" in got[1][0] and got[2] == []


def test_a_confirmed_upload_allows_the_next_intent_even_when_the_doc_drops_the_confirmation(h):
    first = {"upload_intent": S("done", 10, **EVID), "upload_confirmed": S("done", 11)}
    again = {"upload_intent": S("begin", 20, **EVID)}
    assert _rule_ticks(h, "single-open-intent", [doc("R1", first)], [doc("R1", again)]) == [[], []]


@pytest.mark.parametrize("audit,n", [
    (S("done", 1, verdict="pass"), 0),
    (S("begin", 1, verdict="pass"), 1),       # a verdict is only a verdict once audit is done
    (S("fail", 1, verdict="pass"), 1),
    (S("done", 1), 1),                        # done without a verdict
    (None, 1),
])
def test_upload_needs_a_done_audit_with_verdict_pass(h, audit, n):
    steps = {"upload_intent": S("begin", 5, **EVID)}
    if audit is not None:
        steps["audit"] = audit
    assert len(violations(h, None, steps, "upload-needs-audit")) == n


def test_retry_backoff_detail_names_the_minutes():
    from projections.runs.rules import check_retry
    from projections.runs.rules import ts as _ts
    lf = iso(RT0 + 40 * MIN)
    view = {"audit": ("begin", iso(RT0 + 45 * MIN), RT0 + 45 * MIN, {}, [])}
    got = check_retry({"failures": 1, "last_failure_at": lf}, view, [], None, RT0 + 46 * MIN)
    assert _ts(lf) == RT0 + 40 * MIN
    assert got is not None and got[0].value == "retry-backoff" and got[1] == "audit"
    assert got[3].endswith("5.0 min after failure 1; 10 min required")


def test_retry_backoff_reads_an_epoch_last_failure_at():
    from projections.runs.rules import check_retry
    view = {"audit": ("begin", iso(RT0 + 45 * MIN), RT0 + 45 * MIN, {}, [])}
    got = check_retry({"failures": 1, "last_failure_at": RT0 + 40 * MIN}, view, [], None, RT0 + 46 * MIN)
    assert got is not None and "5.0 min after failure 1" in got[3]


def test_retry_backoff_is_reported_per_failure_time():
    from projections.runs.rules import check_retry
    view = {"audit": ("begin", iso(RT0 + 45 * MIN), RT0 + 45 * MIN, {}, [])}
    a = check_retry({"failures": 1, "last_failure_at": iso(RT0 + 40 * MIN)}, view, [], None, RT0 + 46 * MIN)
    b = check_retry({"failures": 1, "last_failure_at": iso(RT0 + 41 * MIN)}, view, [], None, RT0 + 46 * MIN)
    assert a is not None and b is not None and a[2] != b[2]
    assert a[2] == f"retry-backoff:1@{iso(RT0 + 40 * MIN)}"


@pytest.mark.parametrize("las,dts", [
    ((0, 500, 300), (10, 600, 950, 1000, 1400, 1450, 1500, 100, 960, 2000, 50, 1399, 1401, 3000)),
    # a1 stalls at 1300, a2 at 1350; the clock steps back to 1320 (a2 works again), then to 1250
    ((400, 450, 0), (10, 1400, 1410, 1320, 1250, 1260)),
])
def test_the_memo_never_changes_what_a_tick_reports_even_when_the_clock_steps_back(las, dts):
    # step (the scheduler) and detect (every agent) agree tick by tick, clock jumps back included
    snap_ = Snapshot(agents={"a1": obs(agent="a1", state="idle", last_activity=NOW + las[0]),
                             "a2": obs(agent="a2", state="idle", last_activity=NOW + las[1]),
                             "a3": obs(agent="a3", state="busy", last_activity=NOW + las[2])})
    prev: dict = {"agents": {}, "sources": {}}
    memo = None
    for dt in dts:
        t = NOW + dt
        want, _ = fleet.detect(prev, snap_, t, fleet.Limits(STALL, 1200.0))
        got, memo = step(prev, snap_, t, stall_after=STALL, memo=memo, busy_silence=1200.0)
        assert _classified(got) == _classified(want), dt
        agents = dict(prev["agents"])
        for e in got:
            if type(e).__name__ == "AgentClassified":
                agents[e.agent] = rec(e.to, state=e.state, phase=e.phase, last_activity=e.last_activity,
                                     reason=e.reason)
        assert not [e for e in got if type(e).__name__ == "AgentUpdated"]  # the records match the files
        prev = {"agents": agents, "sources": {}}


def test_an_unknown_state_is_named_in_the_reason_cut_to_40_characters():
    cls, reason = classify(obs(state="x" * 100), NOW, STALL)
    assert cls is Cls.MAL_LANZADO and reason == "unknown state " + repr("x" * 40)


@pytest.mark.parametrize("target,exact,closed", [("=fleet:1", True, True), ("fleet:1", True, False),
                                                 (None, True, False), ("=fleet:1", False, False)])
def test_a_tmux_window_gone_closes_an_agent_seen_in_an_exact_window(target, exact, closed):
    """``exact``: the tmux source matched the agent by the pane its hook recorded or its goal.json
    target; a window matched by its name alone closes nothing when it goes (issue 47)."""
    prev = {"agents": {"a1": rec("TRABAJANDO", target=target, last_activity=iso(NOW))}, "sources": {}}
    evs, _ = step(prev, Snapshot(agents={"a1": obs(tmux_missing=True, tmux_exact=exact)}), NOW + 1, stall_after=STALL)
    assert _classified(evs) == ([("a1", "TRABAJANDO", "CERRADO")] if closed else [])


def test_a_record_changed_by_another_writer_is_classified_again():
    # the memo saw TRABAJANDO; a folded foreign event says RECLAMA: the next tick reports the files' class
    o = obs()
    prev = {"agents": {"a1": rec("TRABAJANDO", last_activity=iso(NOW))}, "sources": {}}
    snap_ = Snapshot(agents={"a1": o})
    evs, memo = step(prev, snap_, NOW + 1, stall_after=STALL)
    assert _classified(evs) == []
    prev = {"agents": {"a1": rec("RECLAMA", last_activity=iso(NOW))}, "sources": {}}
    evs, memo = step(prev, snap_, NOW + 2, stall_after=STALL, memo=memo)
    assert _classified(evs) == [("a1", "RECLAMA", "TRABAJANDO")]


@pytest.mark.parametrize("v,want", [(0, 0.0), (1e11 - 1, 1e11 - 1), (1e11, None), (1.5e11, None), (-1, None),
                                    (True, None), (float("nan"), None), ("2026-11-29T10:00:00Z", 1795946400.0),
                                    ("2026-11-29T10:00:00", 1795946400.0), ("yesterday", None), (None, None)])
def test_a_step_time_is_iso_or_an_epoch_within_years_1970_to_5138(v, want):
    from projections.runs.rules import ts
    assert ts(v) == want


def test_a_step_first_seen_beginning_without_at_after_a_failure_started_by_now(h):
    from tests.support.runsworld import at
    kw = dict(failures=1, last_failure_at=at(95))
    got = violations(h, {"facts": S("done", 30)}, {"facts": S("done", 30), "audit": S("begin", None)},
                     "retry-backoff", **kw)
    assert len(got) == 1 and "(audit)" in got[0].detail      # 6 min after failure 1 (tick at +101)


def test_retry_backoff_detail_for_the_second_failure_names_twenty_minutes():
    from projections.runs.rules import check_retry
    view = {"audit": ("begin", iso(RT0 + 45 * MIN), RT0 + 45 * MIN, {}, [])}
    got = check_retry({"failures": 2, "last_failure_at": iso(RT0 + 40 * MIN)}, view, [], None, RT0 + 46 * MIN)
    assert got is not None and got[3].endswith("5.0 min after failure 2; 20 min required")


@pytest.mark.parametrize("kw,want", [
    ({"claude_gone": True}, (Cls.CERRADO, "claude exited: no claude process left in its tmux pane")),
    ({"claude_gone": True, "state": "waiting"}, (Cls.CERRADO, "claude exited: no claude process left in its tmux pane")),
    ({"claude_gone": True, "ended": True}, (Cls.CERRADO, "session ended")),
    ({"claude_gone": True, "pane_dead": True, "pane_dead_status": 3}, (Cls.CERRADO, "tmux pane dead (exit 3)")),
    ({"claude_gone": True, "error": "no goal.json"}, (Cls.CERRADO, "claude exited: no claude process left in its tmux pane")),
])
def test_a_pane_whose_claude_process_is_gone_closes_the_agent(kw, want):
    """Issue 43: claude killed (-9) in a shell pane that lives on; the tmux source finds no claude
    process in the recorded pane's tree (claude_gone): CERRADO, whatever goal.json still says."""
    assert classify(obs(**kw), NOW, STALL) == want
