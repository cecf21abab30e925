"""What the watcher needs to run a helper process it cannot trust to behave: how many CPUs it may
use, and a bounded read of the helper's answer (the first poll's forked reader,
watcher/sources/forkread.py; the rebuild's worker, watcher/runtime/rebuild_par.py).

``read_capped`` reads a pipe to its end, but never more than ``limit`` bytes and never past
``wait_s`` seconds in all: a helper that hangs or floods gives None (the caller kills and reaps
it and does the work itself), never a stuck or ballooning watcher."""
from __future__ import annotations

import os
import select
import time


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read_capped(fd: int, limit: int, wait_s: float, chunk: int = 1 << 20) -> bytes | None:
    """Everything ``fd`` gives until its end, read ``chunk`` bytes at a time; None when that is
    more than ``limit`` bytes or not over within ``wait_s`` s."""
    parts: list[bytes] = []
    size = 0
    end = time.monotonic() + wait_s
    while True:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        b = os.read(fd, chunk)
        if not b:
            return b"".join(parts)
        size += len(b)
        if size > limit:
            return None
        parts.append(b)
