"""What a full disk must not lose: the last decisions and ``watcher.stopped``, kept beside the log.

The log cannot take an append while its file system is full; a watcher stopping then used to
lose what it had decided and not written (a check's verdict: the claim was checked again at the
next start, and the check filled the disk again) and its ``watcher.stopped``.

Invariants
- ``<log>.spill`` is reserved when the watcher starts (``SIZE`` bytes allocated with
  ``posix_fallocate``), so writing into it later needs no new block: it takes what a full disk
  refuses the log. One record: an 8-byte length, then a msgspec JSON list of
  ``[type, data, id]`` (the events' own encoding), the newest kept when they do not all fit.
- ``take`` (the next start) reads the records back as :class:`events.log.Pending` (their ids:
  re-appending one already in the log is a no-op) and ``clear`` zeroes the length once they are
  appended. A damaged or foreign file is ignored (said once), never raised.
- Only states and decisions travel (event data as recorded), never command output.
- :func:`full` tells a full disk from other append failures (``doctor`` and the push say so).
"""
from __future__ import annotations

import errno
import logging
import os
import struct
from typing import Any

import msgspec

log = logging.getLogger("fleetwatch.watcher")

SIZE = 256 * 1024
_LEN = struct.Struct(">Q")
LOW_FREE = 16 * 1024 * 1024   # bytes free under which `doctor` calls the log's disk full


def path_of(log_path: str) -> str:
    return log_path + ".spill"


def reserve(log_path: str) -> bool:
    """Make sure ``<log>.spill`` exists with ``SIZE`` bytes allocated (best effort)."""
    p = path_of(log_path)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_blocks * 512 < SIZE:
            os.posix_fallocate(fd, 0, SIZE)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _encode(batch: list[Any]) -> list[list[Any]]:
    from events.log import Pending
    from events.types import encode_data, tag_of

    out = []
    for item in batch:
        ev, id_ = (item.event, item.id) if isinstance(item, Pending) else (item, None)
        out.append([tag_of(ev), msgspec.json.decode(encode_data(ev)), id_])
    return out


def keep(log_path: str, batch: list[Any]) -> int:
    """Write ``batch`` (events or Pendings) into the reserved file; how many were kept (the newest
    when not all fit; 0 when the file cannot be written)."""
    rows = _encode(batch)
    body = msgspec.json.encode(rows)
    while rows and len(body) + _LEN.size > SIZE:
        rows = rows[1:]
        body = msgspec.json.encode(rows)
    try:
        fd = os.open(path_of(log_path), os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        log.error("cannot keep %d events for the next start in %s: %s", len(batch), path_of(log_path), e.strerror)
        return 0
    try:
        os.pwrite(fd, body, _LEN.size)
        os.pwrite(fd, _LEN.pack(len(body)), 0)
        os.fsync(fd)
        return len(rows)
    except OSError as e:
        log.error("cannot keep %d events for the next start in %s: %s", len(batch), path_of(log_path), e.strerror)
        return 0
    finally:
        os.close(fd)


def take(log_path: str) -> list[Any]:
    """The events a stopping watcher kept, as Pendings ([] when none or unreadable)."""
    from events.log import Pending
    from events.types import decode_data

    try:
        fd = os.open(path_of(log_path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        head = os.pread(fd, _LEN.size, 0)
        n = _LEN.unpack(head)[0] if len(head) == _LEN.size else 0
        if not 0 < n <= SIZE:
            return []
        rows = msgspec.json.decode(os.pread(fd, n, _LEN.size), type=list[tuple[str, dict[str, Any], str | None]])
        return [Pending(decode_data(t, msgspec.json.encode(d)), id=i) for t, d, i in rows]
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as e:
        log.warning("%s is unreadable (%s): ignored", path_of(log_path), type(e).__name__)
        return []
    finally:
        os.close(fd)


def clear(log_path: str) -> None:
    try:
        fd = os.open(path_of(log_path), os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.pwrite(fd, _LEN.pack(0), 0)
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def full(err: BaseException | None) -> bool:
    """True when ``err`` (an AppendFailed or what caused it) is a full disk or quota."""
    while err is not None:
        if type(err).__name__ == "FullError" or (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)):
            return True
        if "disk is full" in str(err) or "No space left" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def free_bytes(log_path: str) -> int | None:
    """Bytes an unprivileged writer may still use on the log's file system (None: unknown)."""
    d = os.path.dirname(os.path.abspath(log_path))
    while d and not os.path.isdir(d):
        d = os.path.dirname(d)
    try:
        st = os.statvfs(d or "/")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def waiting(log_path: str) -> int:
    """How many events wait in ``<log>.spill`` for the next start."""
    return len(take(log_path))


def push_if_full(cfg: Any, log_path: str, err: BaseException) -> None:
    """:func:`push_full` when ``err`` is a full disk (:func:`full`)."""
    if full(err):
        push_full(cfg, log_path, err)


def push_full(cfg: Any, log_path: str, err: BaseException) -> None:
    """One direct push (the log cannot record a notice) that the log's disk is full, in a thread
    of its own: the tick never waits for a receiver."""
    import threading

    def send() -> None:
        try:
            from watcher.runtime.deliver import Deliverer

            d = Deliverer(cfg)
            if d.configured:
                d.send("fleetwatch: the log's disk is full",
                       f"The watcher cannot append to {log_path}: {err}. Nothing new is recorded until space is "
                       "freed; decisions already made wait in memory and are appended then.", "failure")
        except Exception as e:   # a courtesy: the service log says it too
            log.error("could not push the disk-full notice: %s", type(e).__name__)

    threading.Thread(target=send, name="fleetwatch-disk-full-push", daemon=True).start()
