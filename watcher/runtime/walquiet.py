"""Whether the log can hold rows the watcher has not read: one ``stat`` of its ``-wal`` file
instead of a query, on the ticks of an idle fleet.

Each tick begins with the catch-up (``Projections.catch_up``: other writers' events, `ack`
and `silence` among them, folded before the detectors run). On a log nobody wrote to, that is an
empty query, but a query opens a read transaction, and on an idle watcher it runs cache-cold
after the sleep between ticks, many times its warm cost, whatever the fleet's size
(docs/bench.md).

Every commit, by any connection of any process, writes frames to the ``-wal`` file, so its
(device, inode, size, mtime) moves with each one (a WAL restarted from its start after a
checkpoint is written too: its mtime moves). :meth:`Quiet.maybe_changed` is False only when that
tuple is the one seen at the last look that said True, and that look's mtime was over
``RACY_NS`` old then: a later write carries a later mtime (the kernel's coarse clock lags by a
tick, milliseconds), so "same tuple" means "no commit since that look", and the query it
answered saw every earlier one. A file that cannot be stat'ed (no WAL: another journal mode, a
race with a TRUNCATE) says True. And at least every ``FORCE_S`` the answer is True whatever the
file says: a clock set back could in principle repeat an mtime, and an answer wrong that way
would cost at most that long (the next commit folds the other writers' events first in any
case: ``Watcher.commit``'s ``foreign``).
"""
from __future__ import annotations

import os
import time

RACY_NS = 1_000_000_000   # an mtime this recent may be shared by a write still to come
FORCE_S = 30.0            # the catch-up query runs at least this often


class Quiet:
    def __init__(self, path: str, clock=time.monotonic, wall_ns=time.time_ns):
        self.wal = path + "-wal"
        self._seen: tuple[int, int, int, int] | None = None
        self._asked = -FORCE_S
        self._clock, self._wall_ns = clock, wall_ns

    def maybe_changed(self) -> bool:
        """False: no commit since the last True (the caller's read then saw everything)."""
        mono = self._clock()
        try:
            st = os.stat(self.wal)
        except OSError:
            self._seen = None
            return True
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self._seen and mono - self._asked < FORCE_S:
            return False
        self._seen = key if self._wall_ns() - st.st_mtime_ns > RACY_NS else None
        self._asked = mono
        return True
