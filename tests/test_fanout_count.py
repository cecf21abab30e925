"""The fan-out notice counts distinct agents launched after the census: an agent known since the
start that ended and came back is not counted (issue 45: "23 new agents for 22 created")."""
from __future__ import annotations

import time

from events.log import EventLog
from tests.support.fleet import tick_until, write_goal
from watcher.config import parse
from watcher.runtime.loop import Watcher


def _fanouts(path):
    log = EventLog(str(path), create=False, readonly=True)
    try:
        return [r.event for r in log.read(types=["fleet.fanout"])]
    finally:
        log.close()


def test_a_known_agent_back_from_closed_is_not_counted_among_22_new(tmp_path):
    fleet = tmp_path / "fleet"
    for i in range(3):
        write_goal(fleet, f"old{i}")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                f'[classify]\nfanout_window = "1h"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    try:
        tick_until(w, lambda: len(w.proj["fleet"]["agents"]) == 3)
        for _ in range(2):
            w.tick(time.time())
        write_goal(fleet, "old0", ended=True)                  # a known agent ends ...
        tick_until(w, lambda: w.proj["fleet"]["agents"]["old0"]["class"] == "CERRADO")
        write_goal(fleet, "old0")                              # ... and comes back with 22 new ones
        for i in range(22):
            write_goal(fleet, f"new{i:02d}")
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
    from projections import fanout

    st = fanout.initial()
    now = 1000.0
    st["births"] = [[now, i + 1, f"n{i}", 10 + i] for i in range(9)] + [[now, 10, "n0", 30]]
    st["n"] = 10
    ev = fanout._report(st, now, [], 8, 60.0, False, 5)
    assert len(ev) == 1 and ev[0].count == 9
    assert fanout._report(st, now, [], 9, 60.0, False, 5) == []   # 9 distinct: within a cap of 9
