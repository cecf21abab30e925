"""WAL checkpoints off the tick: a thread with its own connection copies the WAL into the log.

SQLite's automatic checkpoint runs inside the commit that passes ``wal_autocheckpoint`` pages:
it copies them into the database file and, with durability full, fsyncs it. At 10,000 agents a
projection snapshot is ~10 MB of WAL, and the checkpoint after it stalled one tick for 0.3–0.5 s
(the p99 of write → commit went from ~120 ms to ~480 ms in the 1 % churn bench). Here a
``Checkpointer`` thread runs a PASSIVE checkpoint (it never blocks the writer or a reader; apsw
releases the GIL while SQLite works) whenever the ``-wal`` file has grown past ``EVERY_BYTES``,
looking every ``LOOK_S``; the watcher's own connection keeps ``BACKSTOP_PAGES`` as its automatic
checkpoint, so a stuck or failed thread still leaves the WAL bounded. The thread writes no
row: it takes no writer lock and runs no trigger. Errors (busy, I/O) are left for the next look.
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("fleetwatch.watcher")

EVERY_BYTES = 4 << 20      # a checkpoint once the WAL has grown this much (1,000 pages of 4 KiB)
LOOK_S = 0.5               # how often the thread looks at the WAL's size
BACKSTOP_PAGES = 16000     # the writer's own automatic checkpoint (64 MiB): only if the thread falls behind


class Checkpointer:
    def __init__(self, path: str, every_bytes: int = EVERY_BYTES, look_s: float = LOOK_S):
        self.path = path
        self.every = every_bytes
        self.look = look_s
        self.runs = 0                      # checkpoints done (for tests and the curious)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)

    def start(self) -> Checkpointer:
        self._thread.start()
        return self

    def _wal(self) -> int:
        try:
            return os.stat(self.path + "-wal").st_size
        except OSError:
            return 0

    def _run(self) -> None:
        import apsw

        db = None
        last = 0
        try:
            db = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE)
            db.setbusytimeout(50)
            while not self._stop.wait(self.look):
                size = self._wal()
                if size < last:   # the writer rewound the WAL after the last checkpoint
                    last = 0
                if size - last < self.every:
                    continue
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.runs += 1
                except apsw.Error as e:   # busy or I/O: the next look tries again
                    log.debug("background checkpoint: %s", type(e).__name__)
                last = size
        except Exception as e:  # cannot open: the writer's backstop keeps the WAL bounded
            log.warning("background checkpoints off (%s); SQLite's automatic ones stay", type(e).__name__)
        finally:
            if db is not None:
                try:
                    db.close()
                except Exception:
                    pass

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
