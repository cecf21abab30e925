"""Rules of the fleet projection that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (docs/contract.md, docs/readme/03-goal.md,
status.md). Real log, virtual clock."""
from __future__ import annotations

import pytest

from events.log import EventLog
from events.types import AgentClassified, AgentUpdated
from projections.fleet import fold as fleet
from projections.fleet.fold import Cls, Limits, classify, detect, initial
from projections.observations import Snapshot, SourceResult
from watcher.runtime.state import Projections
from tests.support.fleetstep import step

from tests.support.fleetstep import NOW as FNOW, STALL, Fold, obs as fobs
from tests.support.fleetupdates import NOW, obs, snap, tick
from tests.support.goalfleet import T0


def test_status_target_is_the_last_ticks_target_across_class_changes(tmp_path):
    """`status --json` target: the value of the last tick. A class change that saw a new target
    records it (not the old one); one whose tick saw no target keeps the recorded one."""
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    evs, memo = tick(elog, p, snap(obs(state="waiting", target="fleet:1")), NOW)
    assert [e.to for e in evs] == ["RECLAMA"]
    evs, memo = tick(elog, p, snap(obs(state="busy", target="fleet:2")), NOW + 1, memo)
    assert [(type(e), e.to) for e in evs] == [(AgentClassified, "TRABAJANDO")]
    assert p.states["fleet"]["agents"]["a1"]["target"] == "fleet:2"
    evs, memo = tick(elog, p, snap(obs(state="waiting", target=None)), NOW + 2, memo)
    assert [e.to for e in evs] == ["RECLAMA"]
    assert p.states["fleet"]["agents"]["a1"]["target"] == "fleet:2"


def test_last_activity_alone_is_recorded_when_it_moved_5_minutes(tmp_path):
    """docs/readme/03-goal.md: a change of last activity alone is an `agent.updated` event when it
    moved 5 min (not per hook): 299 s gives nothing, 300 s one event."""
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    _, memo = tick(elog, p, snap(obs(state="busy", last_activity=NOW)), NOW)
    evs, memo = tick(elog, p, snap(obs(state="busy", last_activity=NOW + 299)), NOW + 299, memo)
    assert evs == []
    evs, memo = tick(elog, p, snap(obs(state="busy", last_activity=NOW + 300)), NOW + 300, memo)
    assert [(type(e), e.changed) for e in evs] == [(AgentUpdated, ["last_activity"])]


def test_a_dead_tmux_pane_is_cerrado_and_its_reason_names_the_exit_status():
    """CERRADO: the session is gone; the event's `reason` says why, with the pane's exit status
    when tmux knows it (a status of 0 is a status too)."""
    assert classify(fobs(pane_dead=True, pane_dead_status=7), FNOW, STALL) == (Cls.CERRADO, "tmux pane dead (exit 7)")
    assert classify(fobs(pane_dead=True, pane_dead_status=0), FNOW, STALL) == (Cls.CERRADO, "tmux pane dead (exit 0)")
    assert classify(fobs(pane_dead=True, pane_dead_status=None), FNOW, STALL) == (Cls.CERRADO, "tmux pane dead")


def test_source_failed_carries_the_sources_error():
    """`source.failed` has `error`: the source's own message; "failed" when it gave none."""
    for error, want in (("timed out after 1s", "timed out after 1s"), (None, "failed"), ("", "failed")):
        res = SourceResult(name="cmd", kind="command", ok=False, error=error)
        evs, _ = detect(initial(), Snapshot(results=[res], failed={"cmd": error or ""}), FNOW, Limits(STALL))
        assert [(type(e).__name__, e.source, e.error) for e in evs] == [("SourceFailed", "cmd", want)]


def test_a_new_stall_after_applies_at_the_next_tick(tmp_path):
    """ESTANCADO: idle, not done, no activity for `stall_after` — the stall_after of this tick (a
    reloaded config), even when the per-tick memo was made under another one."""
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    s = snap(obs(state="idle", last_activity=NOW))
    evs, memo = fleettick(p, s, NOW + 120, 900.0, None)
    assert [e.to for e in evs] == ["TRABAJANDO"]
    for seq in elog.append(evs, NOW + 120):
        pass
    for rec in elog.read(p.seq):
        p.fold(rec)
    evs, memo = fleettick(p, s, NOW + 121, 900.0, memo)       # the memo: nothing due before NOW + 900
    assert evs == []
    evs, memo = fleettick(p, s, NOW + 122, 60.0, memo)        # stall_after is now 1 min
    assert [(e.from_, e.to) for e in evs] == [("TRABAJANDO", "ESTANCADO")]


def fleettick(p, s, now, stall_after, memo):
    return step(p.states["fleet"], s, now, stall_after=stall_after, memo=memo)


@pytest.mark.parametrize("age,kept", [(7 * 86400, True), (7 * 86400 + 1, False)])
def test_a_closed_agent_is_forgotten_seven_days_after_it_closed(age, kept):
    """A CERRADO agent is kept 7 days, to the second, then forgotten (the state stays bounded while
    agents come and go): the numbers are written here, not read from the module's constant."""
    f = Fold()
    f.cls("gone", "CERRADO", T0)
    f.until(fleet.PRUNE_EVERY, T0 + age)            # the prune scan at seq 512, at that age
    assert f.has("gone") == (kept, kept)


# ---- found by the thirteenth session's full mutation run of projections.fleet.fold -----------------
def test_another_stall_after_classifies_every_agent_again(tmp_path):
    """A reload that shortens stall_after: an agent idle for 10 min is TRABAJANDO under 15 min and
    ESTANCADO under 5, at the next tick, though neither its file nor the clock moved."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    s = snap(obs(state="idle", last_activity=NOW - 600))
    evs, memo = tick(elog, p, s, NOW, stall=900.0)
    assert [e.to for e in evs] == ["TRABAJANDO"]
    assert tick(elog, p, s, NOW, memo, stall=900.0)[0] == []
    evs, _ = tick(elog, p, s, NOW, memo, stall=300.0)
    assert [e.to for e in evs] == ["ESTANCADO"]


def test_another_busy_silence_classifies_every_agent_again(tmp_path):
    """A reload that turns the busy backstop on: a busy agent silent for 10 min is TRABAJANDO
    without it and ESTANCADO with busy_silence 5 min, at the next tick."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    s = snap(obs(state="busy", last_activity=NOW - 600))
    evs, memo = tick(elog, p, s, NOW)
    assert [e.to for e in evs] == ["TRABAJANDO"]
    evs, memo = tick(elog, p, s, NOW, memo)
    assert evs == []
    evs, _ = tick(elog, p, s, NOW, memo, busy=300.0)
    assert [e.to for e in evs] == ["ESTANCADO"]


def test_a_record_another_writer_changed_is_looked_at_again(tmp_path):
    """The same snapshot, no change hint: an agent whose folded record another writer changed (its
    class here) is classified again against it, and the difference is an event."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    s = snap(obs(state="busy"))
    _, memo = tick(elog, p, s, NOW)
    evs, memo = tick(elog, p, s, NOW + 1, memo)   # a quiet tick: a1 is no longer looked at for its event
    assert evs == []
    elog.append([AgentClassified(agent="a1", from_="TRABAJANDO", to="RECLAMA", source="other")], NOW + 1)
    for rec in elog.read(p.seq):
        p.fold(rec)
    evs, _ = tick(elog, p, s, NOW + 2, memo)
    assert [(e.from_, e.to) for e in evs] == [("RECLAMA", "TRABAJANDO")]


def _hinted(s: Snapshot, gen: int, dirty) -> Snapshot:
    s.gen, s.dirty = gen, frozenset(dirty)
    return s


def test_a_change_hint_older_than_the_memo_is_not_trusted(tmp_path):
    """The hint names what changed since snapshot gen - 1. A memo two snapshots old (a tick in
    between that the detector did not see) compares everything: a1's change there is found."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    both = (obs(agent="a1", state="busy"), obs(agent="a2", state="busy"))
    _, memo = tick(elog, p, _hinted(snap(*both), 1, ()), NOW)
    evs, memo = tick(elog, p, _hinted(snap(*both), 2, ()), NOW, memo)   # quiet: nothing looked at again
    assert evs == []
    s4 = _hinted(snap(obs(agent="a1", state="waiting"), both[1]), 4, ())  # a1 changed at gen 3
    evs, _ = tick(elog, p, s4, NOW + 1, memo)
    assert [(e.agent, e.to) for e in evs] == [("a1", "RECLAMA")]


def test_a_new_agent_the_hint_does_not_name_is_seen(tmp_path):
    """A hint that leaves out an agent that appeared (the agent count changed) is not trusted."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    a1 = obs(agent="a1", state="busy")
    _, memo = tick(elog, p, _hinted(snap(a1), 1, ()), NOW)
    evs, memo = tick(elog, p, _hinted(snap(a1), 2, ()), NOW, memo)   # quiet: nothing looked at again
    assert evs == []
    s3 = _hinted(snap(a1, obs(agent="a2", state="waiting")), 3, ())
    evs, _ = tick(elog, p, s3, NOW + 1, memo)
    assert [(e.agent, e.to) for e in evs] == [("a2", "RECLAMA")]


def _blind(*agents) -> Snapshot:
    s = snap(*agents)
    s.tmux_unknown = True
    return s


def test_while_tmux_has_not_answered_a_pane_it_saw_dead_stays_closed(tmp_path):
    """An agent CERRADO 'tmux pane dead' (exact '=' target): while tmux has not answered in this
    process nothing reopens it; once tmux is known again (it answered: the pane is alive), the
    goal.json's busy is believed."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    elog.append([AgentClassified(agent="a1", to="CERRADO", reason="tmux pane dead (exit 3)", source="fleet",
                                 target="=fleet:@1.%1")], NOW - 60)
    for rec in elog.read(0):
        p.fold(rec)
    assert tick(elog, p, _blind(obs(state="busy", target=None)), NOW)[0] == []
    evs, _ = tick(elog, p, snap(obs(state="busy", target="=fleet:@1.%1")), NOW + 1)
    assert [(e.from_, e.to) for e in evs] == [("CERRADO", "TRABAJANDO")]


def test_while_tmux_has_not_answered_an_agent_never_seen_in_tmux_is_classified(tmp_path):
    """tmux's silence keeps only what tmux said: an agent with no recorded tmux target is
    classified from its goal.json as always."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    evs, _ = tick(elog, p, _blind(obs(state="waiting")), NOW)
    assert [(e.agent, e.to) for e in evs] == [("a1", "RECLAMA")]


@pytest.mark.parametrize("age,n", [(fleet.CLOSED_KEEP_S, 1), (fleet.CLOSED_KEEP_S + 1, 0)])
def test_an_agent_first_seen_ended_is_news_for_exactly_the_prune_horizon(tmp_path, age, n):
    """An agent first seen ended is recorded CERRADO if it ended at most CLOSED_KEEP_S (7 days)
    ago; older, it is history (it would be pruned and recorded again at each prune)."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    evs, _ = tick(elog, p, snap(obs(state="idle", ended=True, last_activity=NOW - age)), NOW)
    assert [e.to for e in evs] == ["CERRADO"] * n


def test_a_change_hint_after_an_agent_left_is_applied(tmp_path):
    """An agent left (no event on its first miss, the memo's ids changed); the next tick's hint
    names the agent that changed, and its change is found (a2, missed twice, is CERRADO)."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    a1, a2 = obs(agent="a1", state="busy"), obs(agent="a2", state="busy")
    _, memo = tick(elog, p, _hinted(snap(a1, a2), 1, ()), NOW)
    evs, memo = tick(elog, p, _hinted(snap(a1, a2), 2, ()), NOW, memo)   # quiet: nothing looked at again
    assert evs == []
    evs, memo = tick(elog, p, _hinted(snap(a1), 3, ("a2",)), NOW, memo)
    assert evs == []
    evs, _ = tick(elog, p, _hinted(snap(obs(agent="a1", state="waiting")), 4, ("a1",)), NOW + 1, memo)
    assert [(e.agent, e.to) for e in evs] == [("a1", "RECLAMA"), ("a2", "CERRADO")]


@pytest.mark.parametrize("named", ["new", "old"])
def test_a_hint_that_names_half_a_rename_is_not_trusted(tmp_path, named):
    """a1's folder now says a3 (as many agents as before): a hint naming only one of the two ids
    is not trusted; a3 is seen (and a1 is missed once, no event yet)."""
    elog, p = EventLog(str(tmp_path / "e.db")), Projections()
    a1 = obs(agent="a1", state="busy")
    _, memo = tick(elog, p, _hinted(snap(a1), 1, ()), NOW)
    evs, memo = tick(elog, p, _hinted(snap(a1), 2, ()), NOW, memo)
    assert evs == []
    s3 = _hinted(snap(obs(agent="a3", state="waiting")), 3, ("a3",) if named == "new" else ("a1",))
    evs, _ = tick(elog, p, s3, NOW + 1, memo)
    assert [(e.agent, e.to) for e in evs] == [("a3", "RECLAMA")]
