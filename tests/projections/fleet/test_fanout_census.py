"""A watcher that starts among running agents takes a census, not a fan-out: the contract's
"10 agents merely started working -> no push" holds, and a real burst of launches afterwards is
still one fleet.fanout (issue 22, acceptance check `notify`)."""
from __future__ import annotations

import json
import os
import time

from events.log import EventLog
from watcher.config import parse
from tests.support.waiting import tick_until
from watcher.runtime.loop import Watcher


def _goal(root, agent, **extra):
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    (d / "g.tmp").write_text(json.dumps({"agent": agent, "state": "busy", "phase": "haciendo",
                                          "dod_contract": "c", "last_activity": time.time(), **extra}))
    os.replace(d / "g.tmp", d / "goal.json")


def _fanouts(path):
    log = EventLog(str(path), create=False, readonly=True)
    try:
        return [r.event for r in log.read(types=["fleet.fanout"])]
    finally:
        log.close()


def test_the_fleet_found_at_start_is_a_census_and_a_later_burst_a_fanout(tmp_path):
    fleet = tmp_path / "fleet"
    for i in range(10):
        _goal(fleet, f"old{i}")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 10)
    for _ in range(3):
        w.tick(time.time())
    assert _fanouts(cfg.store.path) == []              # ten agents already running: no push
    for i in range(12):
        _goal(fleet, f"new{i}")
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 22)
    for _ in range(3):
        w.tick(time.time())
    f = _fanouts(cfg.store.path)
    assert len(f) == 1 and f[0].count == 12 and all(a.startswith("new") for a in f[0].agents)
    w.close()


def test_ended_agents_are_no_launches_tick_after_tick(tmp_path):
    """Regression: an ended agent is never alive (CERRADO pops it), so it was counted as a new
    agent on every tick; a dozen ended folders gave one fleet.fanout per tick."""
    fleet = tmp_path / "fleet"
    _goal(fleet, "alive")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 1)
    for i in range(12):
        _goal(fleet, f"done{i}")
        g = fleet / f"done{i}" / "goal.json"
        g.write_text(json.dumps({**json.loads(g.read_text()), "ended": True}))
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 13)
    for _ in range(5):
        w.tick(time.time())
    assert _fanouts(cfg.store.path) == []
    assert {a["class"] for k, a in w.proj["fleet"]["agents"].items() if k != "alive"} == {"CERRADO"}
    w.close()


def test_a_known_agent_back_from_closed_is_not_counted_among_22_new(tmp_path):
    fleet = tmp_path / "fleet"
    for i in range(3):
        _goal(fleet, f"old{i}")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                f'[classify]\nfanout_window = "1h"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    try:
        tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 3)
        for _ in range(2):
            w.tick(time.time())
        _goal(fleet, "old0", ended=True)                  # a known agent ends ...
        tick_until(w, lambda: w.proj["fleet"]["agents"]["old0"]["class"] == "CERRADO")
        _goal(fleet, "old0")                              # ... and comes back with 22 new ones
        for i in range(22):
            _goal(fleet, f"new{i:02d}")
        tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 25
                   and w.proj["fleet"]["agents"]["old0"]["class"] != "CERRADO")
        for _ in range(3):
            w.tick(time.time())
        f = _fanouts(cfg.store.path)
        assert len(f) == 1 and f[0].count == 22, [(e.count, e.agents) for e in f]
        assert "old0" not in f[0].agents
    finally:
        w.close()


def test_an_agent_born_twice_in_the_window_counts_once():
    """Pure: births after the census hold one agent twice (it ended and came back): one agent."""
    from projections.fleet import fanout
    from projections.observations import Snapshot

    st = fanout.initial()
    now = 1000.0
    st["births"] = [[now, i + 1, f"n{i}", 10 + i] for i in range(9)] + [[now, 10, "n0", 30]]
    st["n"] = 10
    ev = fanout.detect(st, Snapshot(), now, 8, 60.0, census_seq=5, new=[])
    assert len(ev) == 1 and ev[0].count == 9
    assert fanout.detect(st, Snapshot(), now, 9, 60.0, census_seq=5, new=[]) == []   # 9 distinct: within a cap of 9
