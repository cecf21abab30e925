"""A due snapshot round off the watch loop (``Watcher.snap_fork``, as ``fleetwatch run`` sets it):
a forked child encodes the states as of the fork, a thread stores them. Real files, a real log;
the clock is virtual (the rounds are waited for, never timed)."""
from __future__ import annotations

import os
import time

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.runtime.state import Projections
from watcher.runtime.rebuild_par import rebuild

from tests.support.goalfleet import goal

T0 = 1_800_000_000.0
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the round forks")


def _watcher(tmp_path, name: str, n: int, fork: bool) -> tuple:
    fleet_dir = tmp_path / "fleet"
    if not fleet_dir.exists():
        for i in range(n):
            goal(fleet_dir, f"a{i}", state="busy", last_activity=T0)
    db = str(tmp_path / f"{name}.db")
    cfg = parse(f'[store]\npath = "{db}"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet_dir}/*/goal.json"\n')
    elog = EventLog(db)
    w = Watcher(cfg, elog)
    w.snap_fork, w.snap_budget = fork, 0.1
    return fleet_dir, elog, w


def _wait_round(w: Watcher, limit: float = 120.0) -> None:
    """Until the round in flight is over (a bound for a broken test, not a timing)."""
    end = time.monotonic() + limit
    while w._round is not None and w._round.done() is None:
        assert time.monotonic() < end, "the snapshot round never ended"
        time.sleep(0.01)


def test_the_round_off_the_loop_stores_the_very_rows_the_loop_would(tmp_path):
    """Same fleet, same virtual clock: the forked round stores, per projection, the same seq and
    bytes as the loop's own slices; the call that starts it returns at once and the next one
    takes its outcome (the round's seq is the last snapshot's)."""
    rows = {}
    for fork in (False, True):
        _, elog, w = _watcher(tmp_path, f"fork{fork}", 60, fork)
        try:
            w.snap_mono -= 3600   # due by time as soon as anything was folded
            assert w.tick(T0) >= 60 and w.snap_wanted
            assert w.snapshot_if_due(0.1) is True
            if fork:
                assert w._round is not None and w.snap_wanted     # started, not yet taken
                _wait_round(w)
                assert w.snapshot_if_due(0.1) is True             # its outcome
                assert w._round is None
            while w.snap_wanted:   # the loop's slices: a projection or more a window
                w.snapshot_if_due(0.1)
            assert w.snap_seq == elog.head()[0]
            rows[fork] = elog.snapshots()
            assert Projections.load(elog).encoded() == w.proj.encoded()
        finally:
            w.close()
            elog.close()
    assert rows[True] == rows[False] and set(rows[True]) == set(Projections().mods)


def test_the_round_covers_the_seq_of_its_fork_while_the_loop_commits_on(tmp_path):
    """Ticks that commit while the round runs change nothing it stores: every row is the state at
    the fork's seq, a reader loading them folds the rest and gets exactly the watcher's states,
    and `rebuild --check` agrees."""
    fleet_dir, elog, w = _watcher(tmp_path, "e", 40, True)
    try:
        w.snap_mono -= 3600
        assert w.tick(T0) >= 40
        at = w.proj.seq
        assert w.snapshot_if_due(0.1) is True and w._round is not None
        for i in range(6):   # the loop goes on: changes committed while the child encodes
            goal(fleet_dir, f"a{i}", state="waiting", last_activity=T0)
            w.tick(T0 + 1 + i, full=False, changed={str(fleet_dir / f"a{i}" / "goal.json")})
        assert w.proj.seq > at
        _wait_round(w)
        w.snapshot_if_due(0.1)   # its outcome (unless a tick's end took it already)
        assert w._round is None and not w.snap_wanted and w.snap_seq == at
        snaps = elog.snapshots()
        assert {s for s, _ in snaps.values()} == {at}
        assert Projections.load(elog).encoded() == w.proj.encoded()
        assert rebuild(elog, check=True, store=False)[1] is None
    finally:
        w.close()
        elog.close()


def test_a_failed_round_stores_nothing_wrong_and_a_new_one_comes_when_due(tmp_path):
    """A state the child cannot encode (a bug) fails the round, not the loop: what it stored is
    whole projections at the fork's seq (those before the bad one), the loop takes the failure
    (nothing marked written) and the next due round stores everything."""
    _, elog, w = _watcher(tmp_path, "e", 20, True)
    try:
        w.snap_mono -= 3600
        assert w.tick(T0) >= 20
        good = w.proj.states["missions"]
        w.proj.states["missions"] = {"bad": object()}   # msgspec cannot encode it
        assert w.snapshot_if_due(0.1) is True
        w.proj.states["missions"] = good                 # the child has its own copy of the bad one
        _wait_round(w)
        assert w.snapshot_if_due(0.1) is True and not w.snap_wanted and w.snap_seq == 0
        order = list(w.proj.mods)
        stored = elog.snapshots()
        assert set(stored) == set(order[:order.index("missions")])
        assert all(stored[n] == (w.proj.seq, w.proj.encoded()[n]) for n in stored)
        w.snap_mono -= 3600
        w.tick(T0 + 1)
        assert w.snap_wanted and w.snapshot_if_due(0.1) is True
        _wait_round(w)
        assert w.snapshot_if_due(0.1) is True and w.snap_seq == w.proj.seq
        assert set(elog.snapshots()) == set(order)
        assert Projections.load(elog).encoded() == w.proj.encoded()
    finally:
        w.close()
        elog.close()


def test_a_forced_snapshot_ends_the_round_and_writes_all_here(tmp_path):
    """``snapshot()`` (watcher.stopped) does not wait on a round: the round is ended (its child
    killed and reaped) and every projection is stored at the current seq by this process."""
    fleet_dir, elog, w = _watcher(tmp_path, "e", 30, True)
    try:
        w.snap_mono -= 3600
        assert w.tick(T0) >= 30
        assert w.snapshot_if_due(0.1) is True
        r = w._round
        goal(fleet_dir, "a1", state="waiting", last_activity=T0)
        w.tick(T0 + 1, full=False, changed={str(fleet_dir / "a1" / "goal.json")})
        w.snapshot()
        assert w._round is None and r.done() is not None and not w.snap_wanted
        with pytest.raises(ChildProcessError):
            os.waitpid(r._pid, os.WNOHANG)   # reaped
        assert {s for s, _ in elog.snapshots().values()} == {w.proj.seq}
        assert Projections.load(elog).encoded() == w.proj.encoded()
    finally:
        w.close()
        elog.close()


def test_without_a_fork_the_loop_writes_its_slices(tmp_path, monkeypatch):
    """A system that refuses the fork (no memory, a process limit) gets the loop's own slices."""
    _, elog, w = _watcher(tmp_path, "e", 10, True)

    def refuse():
        raise OSError(11, "Resource temporarily unavailable")

    try:
        w.snap_mono -= 3600
        assert w.tick(T0) >= 10
        monkeypatch.setattr(os, "fork", refuse)
        while w.snap_wanted:
            assert w.snapshot_if_due(0.1) is True and w._round is None
        assert {s for s, _ in elog.snapshots().values()} == {w.proj.seq}
    finally:
        w.close()
        elog.close()


def _count_all(w: Watcher) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in w.proj["fleet"]["agents"].values():
        out[a["class"]] = out.get(a["class"], 0) + 1
    return out


def test_class_counts_kept_by_the_commits_equal_a_full_count(tmp_path):
    """Seeded churn over real files (state changes, agents that go away and come back, a week
    of virtual time so closed agents are pruned): after every tick the counts the commits kept
    equal a count of every agent, and the commits kept them most of the time (no full count)."""
    import random

    fleet_dir, elog, w = _watcher(tmp_path, "e", 50, False)
    rng = random.Random(7)
    kept = 0
    try:
        t = T0
        w.tick(t)
        assert w.class_counts() == _count_all(w)
        for step in range(400):
            t += rng.choice((1.0, 30.0, 600.0, 3 * 86400.0 if step % 97 == 0 else 5.0))
            changed = set()
            for _ in range(rng.randint(1, 4)):
                a = f"a{rng.randrange(60)}"
                p = fleet_dir / a / "goal.json"
                if p.exists() and rng.random() < 0.15:
                    p.unlink()   # gone: closed after the grace, pruned a week later
                else:
                    goal(fleet_dir, a, state=rng.choice(("busy", "waiting", "done")), last_activity=t)
                changed.add(str(p))
            w.tick(t, full=step % 5 == 0, changed=None if step % 5 == 0 else changed)
            kept += w.counts.seq == w.proj.seq   # the commits' own counts, before any full count
            assert w.class_counts() == _count_all(w), step
        assert kept > 200
    finally:
        w.close()
        elog.close()


def test_the_rounds_snapshots_reach_the_disk_in_its_thread_not_in_the_loops_commit(tmp_path, monkeypatch):
    """Snapshots are stored with durability normal; left at that, the loop's next commit
    (durability full) flushed them in its own fsync — ~25 MB a projection at 50,000 agents, and
    every write waited (p99 650 ms in the 1 % churn at 50k). The round's thread fsyncs the WAL
    itself after each projection, with the watcher's write lock released. A spy on the real
    os.fsync records, for each flush of the WAL, whether the lock was held."""
    from watcher.runtime import snapround
    _, elog, w = _watcher(tmp_path, "sync", 60, True)
    wal = os.path.realpath(elog.path) + "-wal"
    seen: list[bool] = []
    real = os.fsync

    def spy(fd):
        if os.path.realpath(f"/proc/self/fd/{fd}") == wal:
            seen.append(w.write_lock.locked())
        return real(fd)
    monkeypatch.setattr(snapround.os, "fsync", spy)
    try:
        w.snap_mono -= 3600
        assert w.tick(T0) >= 60
        assert w.snapshot_if_due(0.1) is True
        _wait_round(w)
        assert w.snapshot_if_due(0.1) is True and w._round is None
        names = [r[0] for r in elog.db.execute("SELECT name FROM snapshots")]
        assert names and len(seen) >= len(names)   # one flush a projection stored at least
        assert not any(seen)                        # none of them under the write lock
    finally:
        w.close()
        elog.close()
