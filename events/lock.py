"""The single-writer lock of an event log: ``flock`` on ``<db>.lock``.

Invariants
- At most one holder per log across processes (``LOCK_EX | LOCK_NB``): a second ``acquire``
  fails fast with :class:`WriterLocked` naming the holder's pid (read from the lock file).
- The kernel drops an ``flock`` when its holder dies, even by SIGKILL, so a lock left by a
  killed process is simply taken over; the stale pid in the file is overwritten.
- The lock file is created with mode 0600 and never deleted (deleting it would let two
  processes lock two different inodes). Readers never take it.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os

from events.errors import StoreError, WriterLocked

log = logging.getLogger("fleetwatch.events")


def lock_path(db_path: str) -> str:
    return f"{db_path}.lock"


def holder_pid(path: str) -> int | None:
    """The pid written in a lock file, or None if absent/unreadable/empty."""
    try:
        with open(path, "rb") as f:
            text = f.read(32).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class WriterLock:
    """Exclusive writer lock for the log at ``db_path``. Use as a context manager or
    ``acquire()`` / ``release()``. Not re-entrant: a second acquire from this process on
    another WriterLock object is refused like any other holder. Dropping the object without
    ``release()`` keeps the lock until the process exits (never a silent early release)."""

    def __init__(self, db_path: str):
        self.db_path = os.path.abspath(os.path.expanduser(db_path))
        self.path = lock_path(self.db_path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> WriterLock:
        if self._fd is not None:
            return self
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise StoreError(f"cannot open the writer lock: {e.strerror}", op="lock", path=self.path,
                             hint="the folder of the event log must be writable") from e
        try:
            os.fchmod(fd, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                pid = holder_pid(self.path)
                who = f"pid {pid}" if pid else "another process"
                raise WriterLocked(f"the event log is held by {who} (another `fleetwatch run`?)",
                                   pid=pid, op="lock", path=self.db_path,
                                   hint="stop the other watcher (e.g. `systemctl --user stop fleetwatch`); "
                                        "reading commands work meanwhile") from e
            raise StoreError(f"cannot lock the event log: {e.strerror}", op="lock", path=self.path) from e
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:  # the lock is ours even if the pid note fails
            log.warning("cannot write the pid into %s: %s", self.path, e.strerror)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["WriterLock", "holder_pid", "lock_path"]
