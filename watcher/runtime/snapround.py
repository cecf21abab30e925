"""A round of projection snapshots written off the watch loop (`fleetwatch run`): a forked child
encodes the states as of the fork, a thread of this process stores them (:class:`SnapshotRound`).

Its own module so that the readers' fast paths (`status`, `tail`, ...), which load
``watcher.runtime.state``, do not also load logging, signal and threading for it
(tests/watcher/cli/test_cli_start.py).
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from events.log import EventLog
from projections.base import encode_state
from watcher.runtime.child import fork_child, read_exact, write_all

log = logging.getLogger("fleetwatch.watcher")
CHILD_NICE = 10     # the snapshot encoder's niceness above the watcher's (SnapshotRound)


class SnapshotRound:
    """One round of projection snapshots written off the watch loop (``fleetwatch run``).

    Why: at 50,000 agents a round is ~70 MB (fleet 16, dod 22, notify 10-28, report 4-9) and
    ~1 s of CPU (encode ~0.5 s, digest + SQLite ~0.45 s, measured in the running watcher on a
    busy machine); written by the loop, even one projection per debounce window, each slice
    held the loop 0.2-0.8 s (the budget is looked at between projections, and one is ~0.1-0.4 s)
    and every write meanwhile waited: in the 1 % churn bench the slowest writes were those of
    the first 2-7 s of the churn, when the 60 s snapshot came due.

    How: ``start`` forks; the child encodes every state (``encode_state``, the very bytes the
    loop would store: the fork is a copy of the states at ``seq``, between ticks) and writes
    them to a pipe, one after the other; the loop goes on at once (after the fork itself). A thread of this process reads each and stores it with
    ``put_snapshots`` at ``seq`` through its own connection (durability normal: a snapshot is
    a cache), one projection a transaction under the watcher's ``write_lock``, so the loop's
    commit waits at most for one row being stored (another process's commit meeting it: tried
    again); then, the lock released, it fsyncs the WAL itself (``_sync_wal``), so the loop's next
    commit does not flush the snapshot's megabytes in its own fsync (docs/bench.md: what a round
    costs the loop's commits). ``done()`` says how it went: None while running, then True/False.

    The child runs ``CHILD_NICE`` steps nicer than the watcher: on a machine whose cores are
    busy the loop's ticks (and the writes they commit) go first and the round takes longer.

    Invariants (``watcher.runtime.child.fork_child``'s): the child resets the stop signals,
    closes every descriptor but its pipe, takes no lock of this process's (no logging, no
    imports, no SQLite), writes only to its pipe and ends with ``os._exit``; its answer is
    bounded (MAX_OUT bytes within WAIT_S, else it is killed and reaped and the round failed:
    the loop starts another when due). A failed round stores nothing it was not sure of: each
    stored row is a whole projection's state at ``seq``, bound to the chain like any other."""

    MAX_OUT = 1 << 30     # bytes of one projection's snapshot from the child
    WAIT_S = 120.0        # s the child may take
    BUSY_TRIES = 50       # transactions tried per projection while the loop's commits meet them

    def __init__(self, elog: EventLog, seq: int, names: list[str], pid: int, r: int, lock: Any):
        self.path, self.identity, self.seq, self.names, self.lock = elog.path, elog.identity, seq, names, lock
        self._pid, self._r = pid, r
        self._ok: bool | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._finish, name="snapshot-writer", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, elog: EventLog, states: dict[str, Any], seq: int, lock: Any) -> SnapshotRound | None:
        """Fork the encoder of ``states`` (covering ``seq`` of ``elog``, the watcher's); None if
        this system cannot fork. The rows go to the file ``elog`` has open, never to another one
        at its path (a log replaced meanwhile: the round stores nothing).
        ``lock`` (the watcher's ``write_lock``, held around its appends) is held around each
        store, so the loop's commit waits for the row being stored and no longer (SQLite's busy
        handler would sleep in steps of up to 100 ms; and a commit between the store's read of
        the chain hash and its write would make it start again)."""
        names = list(states)
        child = fork_child(lambda w: _encode_child(w, [states[n] for n in names]), "snapshot in this process", log)
        if child is None:
            return None
        pid, r = child
        return cls(elog, seq, names, pid, r, lock)

    def done(self) -> bool | None:
        """None while the round runs; then True (every projection stored at ``seq``) or False."""
        return None if self._thread.is_alive() else bool(self._ok)

    def close(self, timeout: float = 10.0) -> None:
        """End the round now: the child is killed (a projection being stored is finished)."""
        self._closing = True
        try:
            os.kill(self._pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._thread.join(timeout)

    def _finish(self) -> None:
        import apsw

        from watcher.runtime.checkpoint import BACKSTOP_PAGES

        ok = False
        end = time.monotonic() + self.WAIT_S
        try:
            elog = EventLog(self.path, durability="normal", create=False)
            try:
                if elog.identity != self.identity:  # not the watcher's file (replaced): its states are not this one's
                    log.error("snapshot round at seq %d: the event log at the path was replaced; nothing stored", self.seq)
                    return
                elog.set_autocheckpoint(BACKSTOP_PAGES)  # as the watcher's: checkpoints are the Checkpointer's
                for name in self.names:  # one projection at a time: as much memory as the loop's own round
                    head = read_exact(self._r, 8, end)
                    size = int.from_bytes(head, "little") if head is not None else self.MAX_OUT + 1
                    data = read_exact(self._r, size, end) if size <= self.MAX_OUT else None
                    if data is None:
                        if not self._closing:
                            log.error("snapshot round at seq %d: the encoder gave no usable answer for %s; "
                                      "another round when due", self.seq, name)
                        return
                    for _ in range(self.BUSY_TRIES):
                        try:
                            with self.lock:
                                elog.put_snapshots(self.seq, {name: data})
                            _sync_wal(self.path)  # here, not in the loop's next commit (its fsync)
                            break
                        except apsw.BusyError:  # another process's commit (a CLI writer)
                            time.sleep(0.01)
                    else:
                        log.error("snapshot round at seq %d: %s stayed busy; another round when due", self.seq, name)
                        return
                ok = True
            finally:
                elog.close()
        except Exception as e:  # a snapshot is only a cache: the round starts again when due
            log.error("could not store snapshots: %s", type(e).__name__)
        finally:
            os.close(self._r)
            try:
                os.kill(self._pid, signal.SIGKILL)  # done with it (it has exited, or it is late)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._ok = ok


def _encode_child(w: int, states: list[Any]) -> None:
    """In the forked child (``fork_child``): each state's snapshot bytes to ``w``, in order, each
    after its length (8 bytes, little-endian)."""
    try:
        os.nice(CHILD_NICE)  # a cache: on a busy machine the loop's ticks come first
    except OSError:
        pass
    for state in states:
        data = encode_state(state)
        write_all(w, len(data).to_bytes(8, "little") + data)
        del data


def _sync_wal(path: str) -> None:
    """fsync the log's WAL file from this thread, outside the write lock: a projection's snapshot
    (up to ~25 MB at 50,000 agents) is stored with durability normal, so without this the loop's
    next commit (durability full) would flush it in its own fsync while every write waits. A
    WAL that is not there (a checkpoint restarted it) has nothing to flush."""
    try:
        fd = os.open(path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
