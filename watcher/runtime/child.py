"""What the watcher needs to run a helper process it cannot trust to behave: how many CPUs it may
use, a forked child that holds nothing of the watcher's (:func:`fork_child`: the first poll's
second reader, watcher/sources/forkread.py; the snapshot encoder, watcher/runtime/snapround.py),
and bounded reads of a helper's answer (``read_capped``: to its end; ``read_exact``: so many bytes;
those, and the rebuild's worker, watcher/runtime/rebuild_par.py).

``read_capped`` reads a pipe to its end, but never more than ``limit`` bytes and never past
``wait_s`` seconds in all: a helper that hangs or floods gives None (the caller kills and reaps
it and does the work itself), never a stuck or ballooning watcher."""
from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def fork_child(work: Callable[[int], None], what: str, log: Any) -> tuple[int, int] | None:
    """Fork a child that runs ``work(w)``, ``w`` the write end of a pipe, and exits: 0 when
    ``work`` returned, 1 when it raised. Here: (its pid, the read end), or None when this system
    cannot fork (a warning: "``what``: cannot fork (...)"). Before ``work`` the child restores the
    stop signals' default actions (a SIGTERM ends it, never runs the watcher's handler) and closes
    every descriptor but its pipe (``close_range(2)`` where there is one): a child stuck in a read
    holds no lock, log or database of the watcher's. It never returns into the caller's code.
    Without ``os.fork`` (not POSIX): None, nothing said."""
    if not hasattr(os, "fork"):
        return None
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:
        os.close(r)
        os.close(w)
        log.warning("%s: cannot fork (%s)", what, e.strerror or e)
        return None
    if pid == 0:  # pragma: no cover - the child (its work is checked through what it writes)
        code = 1
        try:
            os.close(r)
            for s in _STOP_SIGNALS:
                signal.signal(s, signal.SIG_DFL)
            os.closerange(3, w)
            os.closerange(w + 1, max(w + 1, os.sysconf("SC_OPEN_MAX")))
            work(w)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (a pipe takes it in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
        if not readable(fd, end):
            return None
        b = os.read(fd, chunk)
        if not b:
            return b"".join(parts)
        size += len(b)
        if size > limit:
            return None
        parts.append(b)


def read_exact(fd: int, n: int, end: float) -> bytes | None:
    """``n`` bytes from ``fd`` before the monotonic ``end``; None if it ends or is late first."""
    parts: list[bytes] = []
    while n > 0:
        if not readable(fd, end):
            return None
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def readable(fd: int, end: float) -> bool:
    """Whether ``fd`` has something to read (or its end) before the monotonic ``end``."""
    left = end - time.monotonic()
    return left > 0 and bool(select.select([fd], [], [], left)[0])
