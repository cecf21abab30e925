"""A first tick linear in agents: amortized prune scans, the snapshot out of the appending commit,
the GC settled after start-up. Real files, a real log, a virtual clock."""
from __future__ import annotations

import gc
import json
import os

from events.log import EventLog
from events.types import AgentClassified
from projections.fleet import fold as fleet
from watcher.config import parse
from watcher.runtime.loop import Watcher, settle_gc
from watcher.runtime.state import Projections

T0 = 1_800_000_000.0


def _fleet(tmp_path, n: int):
    """``n`` busy agents' goal.json under tmp_path/fleet, and a config watching them."""
    fleet_dir = tmp_path / "fleet"
    for i in range(n):
        d = fleet_dir / f"a{i}"
        d.mkdir(parents=True)
        (d / "goal.json").write_text(json.dumps({"agent": f"a{i}", "state": "busy", "last_activity": T0}))
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet_dir}/*/goal.json"\n')
    return fleet_dir, cfg


def test_prune_scans_at_most_once_per_agent_count_of_seqs():
    """A scan of N agents comes at most every N seqs (the O(N²) first tick at 50k agents)."""
    small = {f"a{i}": {} for i in range(100)}
    assert [s for s in range(1, 2049) if fleet.prune_due(s, small)] == [512, 1024, 1536, 2048]
    big = {f"a{i}": {} for i in range(3000)}
    assert [s for s in range(1, 20000) if fleet.prune_due(s, big)] == [4096, 8192, 12288, 16384]


def test_closed_agents_are_still_forgotten_in_a_big_fleet(tmp_path):
    """With 3,000 agents an agent CERRADO for over 7 days is forgotten by seq 4096, in the
    fleet and the dod projections alike, and a replay agrees with the incremental state."""
    elog = EventLog(str(tmp_path / "e.db"))
    elog.append([AgentClassified(agent="old", to="TRABAJANDO"),
                 AgentClassified(agent="old", from_="TRABAJANDO", to="CERRADO")], T0)
    elog.append([AgentClassified(agent=f"f{i}", to="TRABAJANDO") for i in range(3000)], T0 + 86400)
    later = T0 + 8 * 86400
    elog.append([AgentClassified(agent=f"f{i}", from_="TRABAJANDO", to="RECLAMA") for i in range(600)], later)
    p = Projections.load(elog)
    assert "old" in p["fleet"]["agents"]      # seq 3602: 3,001 agents, a scan every 4096 seqs
    elog.append([AgentClassified(agent=f"f{i}", from_="RECLAMA", to="TRABAJANDO") for i in range(600)], later)
    p.catch_up(elog)
    assert "old" not in p["fleet"]["agents"] and "old" not in p["dod"]["agents"]   # seq 4096 scanned
    replay = Projections.load(EventLog(str(tmp_path / "e.db"), create=False))
    assert replay.encoded() == p.encoded()
    elog.close()


def test_first_tick_commits_without_a_snapshot_and_the_next_tick_writes_it(tmp_path):
    fleet_dir, cfg = _fleet(tmp_path, 50)
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.snap_mono -= 3600  # the snapshot is due by time as soon as anything was folded
    assert w.tick(T0) >= 50                 # every agent new (a fleet.fanout warning may come too)
    assert elog.snapshots() == {}
    assert w.tick(T0 + 2) == 0
    snaps = elog.snapshots()
    assert {s for s, _ in snaps.values()} == {elog.head()[0]}
    w.close()
    elog.close()
    elog = EventLog(str(tmp_path / "e.db"), create=False)
    assert Projections.load(elog).encoded() == w.proj.encoded()
    elog.close()


def test_settle_gc_freezes_what_start_up_made():
    old = gc.get_threshold()
    try:
        keep = [{"x": i} for i in range(1000)]
        settle_gc()
        assert gc.get_freeze_count() >= len(keep)
        assert gc.get_threshold()[0] == 50_000
    finally:
        gc.unfreeze()
        gc.set_threshold(*old)
    assert os.getpid()  # the process goes on (nothing else to say)


def test_a_tick_runs_without_young_collections_and_gives_the_gc_back(tmp_path):
    """The cyclic GC is off while a tick runs (its observations, records and events are trees:
    a young collection in it finds nothing) and on again after, also when the tick fails; a GC
    that was off stays off."""
    fleet_dir = tmp_path / "fleet"
    for i in range(30):
        d = fleet_dir / f"a{i}"
        d.mkdir(parents=True)
        (d / "goal.json").write_text(json.dumps({"agent": f"a{i}", "state": "busy", "dod_contract": "t",
                                                 "last_activity": T0}))
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet_dir}/*/goal.json"\n')
    during: list[bool] = []

    class Seen(Watcher):  # the real watcher, telling what the GC was while its stages ran
        def detect(self, snap, now):
            during.append(gc.isenabled())
            return super().detect(snap, now)

        def commit(self, events, now, **kw):
            during.append(gc.isenabled())
            return super().commit(events, now, **kw)

    elog = EventLog(str(tmp_path / "e.db"))
    w = Seen(cfg, elog)
    try:
        assert gc.isenabled()
        assert w.tick(T0) >= 30
        assert during and not any(during) and gc.isenabled()
        os.replace(tmp_path / "e.db", tmp_path / "moved.db")   # the next tick fails: LogReplaced
        try:
            w.tick(T0 + 1)
            raise AssertionError("a replaced log was not noticed")
        except Exception as e:
            assert type(e).__name__ == "LogReplaced"
        assert gc.isenabled()
        gc.disable()
        try:
            try:
                w.tick(T0 + 2)
            except Exception:
                pass
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        w.close()
        elog.close()


def test_a_big_fleets_trickle_buys_no_snapshot_round_a_minute(tmp_path):
    """Regression: at 50,000 agents an idle watcher wrote a round (~1 s of CPU) every 60 s for a
    handful of events since the last one (the idle row at 50k: 5.8 % of a core). By time a round
    is due once one event per SNAPSHOT_SHARE agents came; by count as before."""
    from watcher.runtime import loop

    fleet_dir, cfg = _fleet(tmp_path, 3 * loop.SNAPSHOT_SHARE)
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(T0)
    w.snapshot()   # stored at the head: nothing behind
    assert w.snap_seq == w.proj.seq
    w.snap_mono -= 3600   # a minute and more since
    for k in range(1, 4):  # three agents change: 1, 2, then 3 events behind (3 = n // SNAPSHOT_SHARE)
        (fleet_dir / f"a{k}" / "goal.json").write_text(
            json.dumps({"agent": f"a{k}", "state": "waiting", "last_activity": T0}))
        assert w.tick(T0 + 2 * k) == 1
        assert w.snapshot_due() is (k == 3), k
    w.close()
    elog.close()
