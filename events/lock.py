"""The single-writer lock of an event log: ``flock`` on the log file itself.

Invariants
- The lock belongs to the file's identity (device and inode), not to a name: every path that
  reaches the file (a symlink, a relative path, another spelling) meets the same lock, and there
  is no sidecar whose deletion would let a second writer in. A file with more than one hard link
  is refused (SQLite would keep one WAL per name and lose commits).
- At most one holder across processes (``LOCK_EX | LOCK_NB``): a second ``acquire`` fails fast
  with :class:`WriterLocked` naming the holder's pid (from ``/proc/locks``, matched by
  device:inode; None where the kernel does not say).
- The kernel drops an ``flock`` when its holder dies, even by SIGKILL: a dead holder's lock is
  simply taken over. Nothing is written anywhere: a refused file gets nothing beside it.
- SQLite locks with POSIX ``fcntl`` locks, which do not interact with ``flock`` on Linux. Closing
  any descriptor of the file drops this process's POSIX locks on it, so the lock's descriptor is
  kept open until ``release`` (after the log's connections are closed).
- Readers never take it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat

from events.errors import LogReplaced, StoreError, WriterLocked


def lock_path(db_path: str) -> str:
    """The file the lock is taken on: the log itself, symlinks resolved."""
    return os.path.realpath(os.path.expanduser(db_path))


class LocksRead:
    """``/proc/locks`` read in a thread of its own, from now on; :func:`writer_running` takes it.

    Why: the kernel's first read of ``/proc/locks`` in a process takes milliseconds of wall time
    (the read waits for an RCU grace period, the file lock list's
    percpu rwsem being taken for writing) and almost no CPU. A one-shot reader (`status`,
    `summary`) starts it first, so that it runs while the imports and the snapshots' decode do;
    `status` on a 1M-event log waited for it at its end otherwise. The answer is the locks at the
    command's start rather than near its end: either is one moment in a race with a watcher that
    starts or stops. ``_thread`` (built in), not ``threading``: the fast path imports nothing for it."""

    def __init__(self) -> None:
        import _thread

        self.data: bytes | None = None
        self._done = _thread.allocate_lock()
        self._done.acquire()
        _thread.start_new_thread(self._read, ())

    def _read(self) -> None:
        try:
            self.data = _read_locks()
        finally:
            self._done.release()

    def result(self) -> bytes | None:
        """The bytes read (None: unreadable), once the read is over."""
        with self._done:
            return self.data


def _read_locks() -> bytes | None:
    """``/proc/locks`` as bytes; None when it cannot be read."""
    try:
        with open("/proc/locks", "rb") as f:
            return f.read()
    except OSError:
        return None


def _holders(db_path: str, locks: LocksRead | None = None) -> list[int] | None:
    """The pids holding an exclusive ``flock`` on the file at ``db_path`` (``/proc/locks``, matched
    by device:inode; ``locks``: as read by that, else read now); None when that cannot be told
    (no such file, no ``/proc/locks``)."""
    try:
        st = os.stat(db_path)
    except OSError:
        return None
    data = _read_locks() if locks is None else locks.result()
    if data is None:
        return None
    lines = data.decode("ascii", "replace").splitlines()
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pids = []
    for line in lines:
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK" or parts[3] != "WRITE":
            continue
        try:
            maj, mi, ino = parts[5].split(":")
            if (int(maj, 16), int(mi, 16), int(ino)) == want:
                pids.append(int(parts[4]))
        except ValueError:
            continue
    return pids


def holder_pid(db_path: str) -> int | None:
    """The pid holding an exclusive ``flock`` on the file at ``db_path`` (``/proc/locks``), or None."""
    pids = _holders(db_path)
    return pids[0] if pids else None


def writer_running(db_path: str, locks: LocksRead | None = None) -> tuple[bool | None, int | None]:
    """Whether a writer (`fleetwatch run` or `hub`) holds the log at ``db_path`` now, and its pid:
    (True, pid), (False, None), or (None, None) when it cannot be told. Only reads ``/proc/locks``
    (``locks``: a :class:`LocksRead` started earlier): never takes the lock, so a watcher starting
    meanwhile is not refused."""
    pids = _holders(lock_path(db_path), locks)
    if pids is None:
        return None, None
    return (True, pids[0]) if pids else (False, None)


def check_identity(path: str, identity: tuple[int, int]) -> None:
    """Raise :class:`LogReplaced` when the file at ``path`` is gone or is not the file with
    ``identity`` (device, inode): deleted, moved, replaced, or its symlink re-pointed."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise LogReplaced("the event log was deleted or moved away while the watcher ran", gone=True,
                          op="append", path=path,
                          hint="nothing more is written to the old file; restart the watcher "
                               "(systemd does) to start a log at the configured path") from None
    except OSError as e:
        raise LogReplaced(f"cannot stat the event log: {e.strerror}", op="append", path=path) from e
    if (st.st_dev, st.st_ino) != identity:
        raise LogReplaced("the event log was replaced by another file while the watcher ran", op="append",
                          path=path, hint="nothing more is written to the old file; restart the "
                                          "watcher (systemd does) to use the file now at the path")


class WriterLock:
    """Exclusive writer lock for the log at ``db_path`` (which must exist). Use as a context
    manager or ``acquire()`` / ``release()``. Not re-entrant: a second acquire from this process
    on another WriterLock object is refused like any other holder. Dropping the object without
    ``release()`` keeps the lock until the process exits (never a silent early release)."""

    def __init__(self, db_path: str):
        self.db_path = os.path.abspath(os.path.expanduser(db_path))
        self.path = lock_path(self.db_path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int | None:
        """The descriptor the lock is held on (``os.fstat`` gives the identity of the locked file)."""
        return self._fd

    def acquire(self) -> WriterLock:
        if self._fd is not None:
            return self
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            hint = ("start the watcher to create the log" if e.errno == errno.ENOENT
                    else "check the folder and the file's mode")
            raise StoreError(f"cannot open the event log to lock it: {e.strerror}", op="lock", path=self.path,
                             hint=hint) from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StoreError("the event log is not a regular file", op="lock", path=self.path)
            if st.st_nlink > 1:
                raise StoreError(f"the event log has {st.st_nlink} hard links; refused", op="lock",
                                 path=self.path, hint="remove the other names; to alias a log use a symlink")
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
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["WriterLock", "check_identity", "holder_pid", "lock_path", "writer_running"]
