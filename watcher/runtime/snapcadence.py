"""When the watcher stores its projection snapshots (:class:`SnapshotCadence`, a base of
``loop.Watcher``): which round is due, and writing it in the loop's idle windows or off the loop
(:class:`watcher.runtime.snapround.SnapshotRound`).

Invariants: a snapshot is a cache, never atomic with the events (a failed store is logged and the
round starts again when due); each stored state is at the seq it covers, so ``Projections.load``
folds each from its own.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from events.log import EventLog
from projections.base import encode_state
from watcher.runtime.snapround import SnapshotRound
from watcher.runtime.state import Projections

log = logging.getLogger("fleetwatch.watcher")

SNAPSHOT_EVERY_EVENTS = 2000
SNAPSHOT_EVERY_SECONDS = 60.0
SNAPSHOT_SHARE = 100   # agents per event folded that make a round due by time (snapshot_due)


class SnapshotCadence:
    """The snapshot half of the watcher; ``loop.Watcher.__init__`` sets these attributes."""

    proj: Projections
    log: EventLog
    snap_seq: int
    snap_mono: float
    snap_wanted: bool
    snap_fork: bool
    _snap_todo: list[str]
    _snap_low: int
    _window: bool
    _round: SnapshotRound | None
    write_lock: Any

    def snapshot_due(self) -> bool:
        """Every ``max(SNAPSHOT_EVERY_EVENTS, agents)`` events (a snapshot's cost grows with the
        fleet: one per that many events keeps it O(1) per event), or every
        SNAPSHOT_EVERY_SECONDS when at least one event per SNAPSHOT_SHARE agents was folded
        since (at least one): a round's cost grows with the agents, and a few
        events after the last one cost a restart or a `status` next to nothing to fold — an
        idle big fleet's trickle (a source's edge, a notice) no longer buys a round a minute."""
        behind = self.proj.seq - self.snap_seq
        agents = len(self.proj["fleet"]["agents"])
        return behind >= max(SNAPSHOT_EVERY_EVENTS, agents) or (
            behind >= max(1, agents // SNAPSHOT_SHARE) and time.monotonic() - self.snap_mono >= SNAPSHOT_EVERY_SECONDS)

    def snapshot(self) -> None:
        """Store every projection's state now, here (a round in flight is ended), at the seq it
        covers (one transaction of its own: snapshots are a cache, not atomic with the events)."""
        self._end_round()
        self._snap_todo, self.snap_wanted = [], True   # a round of its own, all of it
        self.snapshot_if_due()

    def _end_round(self) -> None:  # kill and reap a round in flight (its outcome is not taken)
        if self._round is not None:
            self._round.close()
            self._round = None

    def snapshot_if_due(self, budget: float | None = None) -> bool:
        """Write the snapshot that came due (True), if one did. ``budget`` (seconds): `run` calls
        this in the debounce after a wake-up, time the loop sleeps anyway, and then it encodes
        one projection after another until the budget is spent, at least one, and stores them
        at the seq they cover (``Projections.load`` folds each from its own); the rest go in the
        next windows: 50,000 agents' projections are ~0.4 s to encode, one of them ≤ ~0.1 s. A
        tick's end with no window since the last one (idle, or a loop so far behind that it
        does not wait) writes its share with ``snap_budget``. Without a budget it writes all
        that are left.

        With ``snap_fork`` (``run``) and a budget the loop writes none of it: a
        :class:`SnapshotRound` forks a child that encodes the states as of now, a thread stores
        them (slices held the loop 0.2-0.8 s each at 50,000 agents); a later call takes the
        outcome: stored (its seq is the last snapshot's) or failed (a new round when due). If
        the fork fails, the slices above."""
        if budget is not None:
            self._window = True
        if self._round is not None:   # a round off the loop: its outcome once it is over
            ok = self._round.done()
            if ok is None:
                return False
            r, self._round = self._round, None
            if ok:
                self.snap_seq, self.snap_mono = r.seq, time.monotonic()
            self.snap_wanted = False   # stored, or failed (logged): a new round when due
            return True
        if not self.snap_wanted:
            return False
        if self.snap_fork and budget is not None and not self._snap_todo:
            self._round = SnapshotRound.start(self.log, self.proj.states, self.proj.seq, self.write_lock)
            if self._round is not None:
                return True
        if not self._snap_todo:
            self._snap_todo, self._snap_low = list(self.proj.mods), self.proj.seq
        start = time.monotonic()
        snaps: dict[str, bytes] = {}
        for name in self._snap_todo:
            snaps[name] = encode_state(self.proj.states[name])
            if budget is not None and time.monotonic() - start >= budget:
                break
        try:
            self.log.put_snapshots(self.proj.seq, snaps)
        except Exception as e:  # a snapshot is only a cache: the round starts again when due
            log.error("could not store snapshots: %s", type(e).__name__)
            self._snap_todo, self.snap_wanted = [], False
            return True
        del self._snap_todo[:len(snaps)]
        if not self._snap_todo:
            self.snap_seq, self.snap_mono, self.snap_wanted = self._snap_low, time.monotonic(), False
        return True
