"""The Waker (inotify through watchdog) and the resync period: real inotify, real files, a real
log; a real `fleetwatch run` for the safety-net resync."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Waker, Watcher

from tests.support.goalfleet import wait_for
from tests.support.goalfleet import goal
from tests.support.exe import FLEETWATCH

T0 = 1_800_000_000.0


def test_watchers_own_reads_do_not_feed_back(tmp_path):
    """Opening and reading files (what every tick does) produces no wake-up: only
    close-after-write, create, move and delete reach the Waker (the 100 % CPU at 10k agents)."""
    (tmp_path / "a1").mkdir()
    f = tmp_path / "a1" / "goal.json"
    f.write_text("{}")
    waker = Waker([str(tmp_path)], 0.01)
    assert waker.observer is not None
    try:
        waker.take()
        for _ in range(50):
            with open(f, "rb") as fh:
                fh.read()
            os.listdir(tmp_path / "a1")
        sentinel = tmp_path / "sentinel"
        sentinel.write_text("x")
        got = wait_for(waker, str(sentinel))
        assert str(f) not in got and str(tmp_path / "a1") not in got
    finally:
        waker.close()


def test_queue_overflow_means_one_resync_not_a_storm(tmp_path):
    """watchdog reports a kernel queue overflow only in its log: the Waker turns it into one
    "look everywhere" (take() is None once, then paths again) and wakes the loop."""
    waker = Waker([str(tmp_path)], 0.01)
    try:
        assert waker.healthy
        wlog = logging.getLogger(Waker.OVERFLOW_LOGGER)
        for _ in range(5):  # a burst: one resync
            wlog.warning("Inotify queue overflowed; filesystem events were lost")
        assert waker.overflows == 1 and not waker.healthy
        assert waker.event.is_set()
        assert waker.take() is None
        assert waker.healthy and waker.take() == set()
        wlog.warning("some other watchdog warning")
        assert waker.take() == set()
    finally:
        waker.close()
    assert not any(type(h).__name__ == "Overflow" for h in logging.getLogger(Waker.OVERFLOW_LOGGER).handlers)


def test_interval_tick_with_paths_does_not_stat_every_file(tmp_path):
    """An interval tick while inotify is healthy (changed = the Waker's set) re-reads only the
    reported paths; a change inotify never reported waits for the resync (changed None)."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    goal(fleet, "a1")
    goal(fleet, "a2")
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(T0)
    goal(fleet, "a1", state="waiting")
    goal(fleet, "a2", state="waiting")
    assert w.tick(T0 + 2, full=True, changed={str(fleet / "a1" / "goal.json")}) == 1
    assert w.tick(T0 + 4, full=True, changed=set()) == 0   # a2's change was not reported
    assert w.tick(T0 + 6, full=True, changed=None) == 1    # the resync finds it
    w.close()
    elog.close()


def test_resync_finds_a_change_inotify_does_not_report(tmp_path):
    """A goal.json rewritten in place and held open (no close-after-write: inotify says nothing
    the filter lets through) is still seen: the full resync every ``watch.resync``."""
    fleet = tmp_path / "fleet"
    goal(fleet, "a1")
    cfgp = tmp_path / "c.toml"
    cfgp.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "100ms"\nresync = "500ms"\n'
                    f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    exe = FLEETWATCH
    p = subprocess.Popen([exe, "run", "--config", str(cfgp), "--log-level", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fh = None
    try:
        elog = EventLog(str(tmp_path / "e.db"))

        def classes():
            return [r.event.to for r in elog.read(0, types=["agent.classified"])]

        end = time.monotonic() + 30
        while classes() != ["TRABAJANDO"] and time.monotonic() < end:
            time.sleep(0.05)
        assert classes() == ["TRABAJANDO"]
        doc = json.dumps({"agent": "a1", "state": "waiting", "phase": "preguntando",
                          "dod_contract": "tests for a1", "last_activity": T0}).encode()
        fh = os.open(fleet / "a1" / "goal.json", os.O_WRONLY | os.O_TRUNC)
        os.write(fh, doc)  # IN_MODIFY only, the file stays open
        end = time.monotonic() + 30
        while len(classes()) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        assert classes() == ["TRABAJANDO", "RECLAMA"]
        elog.close()
    finally:
        if fh is not None:
            os.close(fh)
        p.send_signal(signal.SIGTERM)
        p.wait(30)


def _fleet_watcher(tmp_path, n):
    """(the fleet folder of ``n`` busy agents, a fresh log, a Watcher of that folder)."""
    fleet_dir = tmp_path / "fleet"
    for i in range(n):
        goal(fleet_dir, f"a{i}", state="busy", last_activity=T0)
    db = str(tmp_path / "e.db")
    cfg = parse(f'[store]\npath = "{db}"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet_dir}/*/goal.json"\n')
    elog = EventLog(db)
    return fleet_dir, elog, Watcher(cfg, elog)


def test_a_due_snapshot_is_written_in_the_debounce_after_a_wake(tmp_path):
    """The snapshot a tick made due is written while the loop debounces the next file event
    (time it sleeps anyway), not after a tick whose writes then wait for it; a wake by timeout
    runs nothing, and the next tick writes what is still due."""
    fleet_dir, elog, w = _fleet_watcher(tmp_path, 20)
    waker = Waker([str(fleet_dir)], 0.05)
    try:
        w.snap_mono -= 3600   # due by time as soon as anything was folded
        assert w.tick(T0) >= 20 and w.snap_wanted and elog.snapshots() == {}
        ran: list[bool] = []
        assert waker.wait(0.01, during=lambda: ran.append(w.snapshot_if_due())) is False
        assert ran == [] and elog.snapshots() == {}          # a timeout: no debounce, nothing run
        goal(fleet_dir, "a3", state="waiting", last_activity=T0)
        assert waker.wait(30, during=lambda: ran.append(w.snapshot_if_due())) is True
        assert ran == [True] and not w.snap_wanted
        assert {s for s, _ in elog.snapshots().values()} == {elog.head()[0]}
        assert w.snapshot_if_due() is False                  # nothing due twice
        assert w.tick(T0 + 1, full=False, changed=waker.take()) == 1
    finally:
        waker.close()
        w.close()
        elog.close()


def test_a_big_snapshot_is_written_a_projection_per_debounce_and_loads_from_mixed_seqs(tmp_path):
    """In the debounce the snapshot is written one projection after another until the budget is
    spent (at least one), the rest in the next windows, while ticks fold more events in between:
    each projection's snapshot covers its own seq, and a reader loading them (each folded from
    its own seq) gets exactly the watcher's states; `rebuild --check` agrees at every seq."""
    from watcher.runtime.rebuild_par import rebuild
    from watcher.runtime.state import Projections

    fleet_dir, elog, w = _fleet_watcher(tmp_path, 40)
    try:
        w.snap_mono -= 3600
        assert w.tick(T0) >= 40 and w.snap_wanted
        n_proj, rounds, t = len(w.proj.mods), 0, T0
        while w.snap_wanted:
            assert w.snapshot_if_due(budget=0.0) is True        # a window with no time: one projection
            rounds += 1
            i = rounds % 40
            goal(fleet_dir, f"a{i}", state="waiting" if rounds % 2 else "busy", last_activity=T0)
            t += 1
            w.tick(t, full=False, changed={str(fleet_dir / f"a{i}" / "goal.json")})   # more events folded
        assert rounds == n_proj
        snaps = elog.snapshots()
        assert set(snaps) == set(w.proj.mods) and len({s for s, _ in snaps.values()}) > 1   # mixed seqs
        assert w.snap_seq == min(s for s, _ in snaps.values())
        assert Projections.load(elog).encoded() == w.proj.encoded()
        assert rebuild(elog, check=True, store=False)[1] is None
    finally:
        w.close()
        elog.close()


def test_a_loop_behind_writes_a_share_of_the_snapshot_per_tick_not_all_of_it(tmp_path):
    """When no debounce window comes between ticks (a loop behind its interval does not wait:
    at 50,000 agents one tick wrote the whole 1.2 s snapshot at its end), a tick's end writes
    only ``snap_budget``'s worth (at least one projection); the round ends a few ticks later and
    loads to the watcher's states."""
    from watcher.runtime.state import Projections

    fleet_dir, elog, w = _fleet_watcher(tmp_path, 30)
    try:
        w.snap_budget = 0.0
        w.snap_mono -= 3600
        assert w.tick(T0) >= 30 and w.snap_wanted
        written = []
        t = T0
        while w.snap_wanted:
            t += 1
            w.tick(t)
            written.append(len(elog.snapshots()))
        assert written[:3] == [1, 2, 3] and written[-1] == len(w.proj.mods)
        assert Projections.load(elog).encoded() == w.proj.encoded()
    finally:
        w.close()
        elog.close()


def test_watches_started_after_the_first_tick_lose_no_change_made_before_them(tmp_path):
    """`run` starts inotify after its first tick (the watches cost ~0.4 s at 10k agents, and a
    first tick waited for them): a file changed between that tick's reads and the watches is
    not lost, the first take after the late start says "look everywhere"."""
    fleet = tmp_path / "fleet"
    goal(fleet, "a1")
    goal(fleet, "a2")
    db = str(tmp_path / "e.db")
    elog = EventLog(db)
    w = Watcher(parse(f'[store]\npath = "{db}"\n[[sources]]\nname = "f"\nkind = "goals"\n'
                      f'glob = "{fleet}/*/goal.json"\n'), elog)
    waker = Waker([str(fleet)], 0.01, start=False)
    assert waker.observer is None
    try:
        w.tick(T0, full=True)
        goal(fleet, "a1", state="waiting")     # after the first tick's reads, before any watch
        waker.start()
        assert waker.observer is not None and waker.take() is None
        w.tick(T0 + 1, full=False, changed=None)
        assert [r.event.to for r in elog.read(0, types=["agent.classified"]) if r.event.agent == "a1"] \
            == ["TRABAJANDO", "RECLAMA"]
        goal(fleet, "a2", state="waiting")     # and inotify reports the next ones
        w.tick(T0 + 2, full=False, changed=wait_for(waker, str(fleet / "a2" / "goal.json")))
        assert [r.event.to for r in elog.read(0, types=["agent.classified"]) if r.event.agent == "a2"] \
            == ["TRABAJANDO", "RECLAMA"]
    finally:
        waker.close()
        w.close()
        elog.close()
