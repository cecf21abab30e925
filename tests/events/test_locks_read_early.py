"""`status` reads /proc/locks in a thread started first (events.lock.LocksRead: the kernel's first
read of it in a process waits 6-30 ms for an RCU grace period). The early read must answer as the
direct one does: a holder is seen, a file nobody holds is not, and no /proc/locks entry is None."""
from __future__ import annotations

import fcntl
import os

from events.lock import LocksRead, writer_running


def test_the_early_read_sees_the_holder_the_direct_read_sees(tmp_path):
    p = tmp_path / "e.db"
    p.write_bytes(b"")
    assert writer_running(str(p), LocksRead()) == writer_running(str(p)) == (False, None)
    fd = os.open(p, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert writer_running(str(p), LocksRead()) == writer_running(str(p)) == (True, os.getpid())
    finally:
        os.close(fd)
    assert writer_running(str(tmp_path / "missing.db"), LocksRead()) == (None, None)
