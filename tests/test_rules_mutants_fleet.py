"""Rules of the fleet projection that a mutant broke with no test noticing (the full mutation run,
tests/mutation/mutate.py), one test each, named after the rule (CONTRACT.md, docs/readme/03-goal.md,
status.md). Real log, virtual clock."""
from __future__ import annotations

from events.log import EventLog
from events.types import AgentClassified, AgentUpdated
from watcher.runtime.state import Projections

from tests.test_fleet_updates import NOW, obs, snap, tick


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
