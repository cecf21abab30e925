"""Rules of the fleet projection that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (CONTRACT.md, docs/readme/03-goal.md,
status.md). Real log, virtual clock."""
from __future__ import annotations

import pytest

from events.log import EventLog
from events.types import AgentClassified, AgentUpdated
from projections import fleet
from projections.fleet import Cls, classify, diff, initial
from projections.observations import Snapshot, SourceResult
from watcher.runtime.state import Projections

from tests.test_bounds_fleet import Fold
from tests.test_fleet import NOW as FNOW, STALL, obs as fobs
from tests.test_fleet_updates import NOW, obs, snap, tick
from tests.test_watcher import T0


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
        evs, _ = diff(initial(), Snapshot(results=[res], failed={"cmd": error or ""}), FNOW, stall_after=STALL)
        assert [(type(e).__name__, e.source, e.error) for e in evs] == [("SourceFailed", "cmd", want)]


def test_a_new_stall_after_applies_at_the_next_tick(tmp_path):
    """ESTANCADO: idle, not done, no activity for `stall_after` — the stall_after of this tick (a
    reloaded config), even when the per-tick memo was made under another one."""
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    s = snap(obs(state="idle", last_activity=NOW))
    evs, memo = fleet_step(p, s, NOW + 120, 900.0, None)
    assert [e.to for e in evs] == ["TRABAJANDO"]
    for seq in elog.append(evs, NOW + 120):
        pass
    for rec in elog.read(p.seq):
        p.fold(rec)
    evs, memo = fleet_step(p, s, NOW + 121, 900.0, memo)       # the memo: nothing due before NOW + 900
    assert evs == []
    evs, memo = fleet_step(p, s, NOW + 122, 60.0, memo)        # stall_after is now 1 min
    assert [(e.from_, e.to) for e in evs] == [("TRABAJANDO", "ESTANCADO")]


def fleet_step(p, s, now, stall_after, memo):
    return fleet.step(p.states["fleet"], s, now, stall_after=stall_after, memo=memo)


@pytest.mark.parametrize("age,kept", [(7 * 86400, True), (7 * 86400 + 1, False)])
def test_a_closed_agent_is_forgotten_seven_days_after_it_closed(age, kept):
    """A CERRADO agent is kept 7 days, to the second, then forgotten (the state stays bounded while
    agents come and go): the numbers are written here, not read from the module's constant."""
    f = Fold()
    f.cls("gone", "CERRADO", T0)
    f.until(fleet.PRUNE_EVERY, T0 + age)            # the prune scan at seq 512, at that age
    assert f.has("gone") == (kept, kept)
