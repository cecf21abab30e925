"""One file's stat and capped read for the file sources (watcher/sources/files.py): what a path
is (gone, a dangling symlink, unreadable, not a regular file), its bytes without blocking, and
the per-file cache entry of the two-read rule."""
from __future__ import annotations

import errno
import os
import stat
import time
from typing import Any

from watcher.config_limits import file_kind, open_regular, read_fd

DEFAULT_MAX_BYTES = 1 << 20  # per goal.json / steps.json unless the source sets max_bytes


def _folder_id(path: str) -> str:
    """The name of the folder holding ``path`` (os.path.basename(os.path.dirname(path))), as text
    that encodes: see :func:`shown_name`."""
    parts = path.rsplit(os.sep, 2)
    name = parts[-2] if len(parts) > 1 else ""
    return name if name.isascii() else shown_name(name)


def shown_name(name: str) -> str:
    """A file name's bytes that are not UTF-8 (os.fsdecode's lone surrogates, which no event, snapshot
    or terminal can encode) as ``\\xNN`` escapes; valid UTF-8 names are returned as they are."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _stat(path: str) -> os.stat_result | OSError | None:
    """The file's stat; the error if it exists but cannot be stat'ed; None if it is gone."""
    try:
        return os.stat(path)
    except FileNotFoundError:  # gone, or a dangling symlink (a file that is there but leads nowhere)
        return OSError(errno.ENOENT, "dangling symlink") if os.path.islink(path) else None
    except OSError as e:  # EACCES: a folder we may not search, which may hold one (reported, not CERRADO)
        return e if e.errno in (errno.EACCES, errno.EPERM) or os.path.lexists(path) else None


def _not_regular(mode: int) -> str | None:
    """Why a stat's file cannot be read ("a FIFO, not a regular file"); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return f"{file_kind(mode)}, not a regular file"


class _Entry:
    __slots__ = ("key", "obs", "fails", "good", "racy")

    def __init__(self) -> None:
        self.key: tuple[int, int, int] | None = None
        self.obs: Any = None        # what this file reports now (None: nothing yet)
        self.good: Any = None       # last successfully parsed observation
        self.fails = 0
        self.racy = False           # read within its mtime's grain: read once more (reread_racy)


COARSE_GRAIN_NS = 2_000_000_000   # mtimes in whole seconds: a coarse file system (FAT's are 2 s)
AHEAD_NS = 10_000_000_000         # an mtime this far ahead of our clock still counts (a skewed NFS server)


def racy(mtime_ns: int, now_ns: int) -> bool:
    """A read at ``now_ns`` cannot tell this file from a same-size rewrite stamped with the same
    mtime: the mtime is coarse (whole seconds) and the grain has not passed since it."""
    return mtime_ns % 1_000_000_000 == 0 and -AHEAD_NS < now_ns - mtime_ns < COARSE_GRAIN_NS


def reread_racy(update: Any) -> Any:
    """A file source's ``_update`` that does not trust (inode, size, mtime) alone where mtimes are
    coarse: a file read within its whole-second mtime's grain (:func:`racy`) can be rewritten to the
    same size within the same second, and the key would hide it. Such an entry waits for one more
    read, as a first failed read does (``fails`` 1: the source's suspects, read on its next poll;
    the watcher's --once reads again), its view kept; that read is a fresh first read (the two-read
    rule holds), and an equal result keeps the observation object it had (no change to fold).
    Re-reading and parsing compares the content, as a hash would."""

    def _update(self: Any, path: str, st: Any, ent: Any, obs: Any = None) -> Any:
        prev = None
        if ent is not None and ent.racy and obs is None:
            prev, ent.racy, ent.fails, ent.key = ent.obs, False, 0, None
        ent = update(self, path, st, ent, obs)
        if ent is None or ent.key is None or isinstance(st, OSError):
            return ent
        if prev is not None and ent.obs is not prev and ent.obs == prev:
            ent.obs = ent.good = prev
        if ent.fails == 0 and racy(ent.key[2], time.time_ns()):
            ent.racy, ent.fails = True, 1
        return ent

    return _update


def read_new(path: str, limit: int) -> tuple[os.stat_result, bytes, str | None]:
    """A regular file opened at once, without blocking (its descriptor's fstat is its stat), and
    read up to ``limit`` + 1 bytes with plain os calls: (stat, bytes, why it is no good or None).
    Raises NotRegular (nothing read) for anything but a regular file, OSError if it cannot be
    opened."""
    fd, st = open_regular(path)
    try:
        if st.st_size > limit:
            return st, b"", f"too large ({st.st_size} bytes > {limit})"
        # one byte past the fstat's size: a file that grew since reads on; os.read allocates all
        # of ``want`` before it shrinks to what came (a fixed slack is paid on every file)
        want = min(st.st_size + 1, limit + 1)
        raw = os.read(fd, want)
        if len(raw) == want and want <= limit:  # grew past its fstat (or reports no size): read on to the limit
            raw += read_fd(fd, limit + 1 - want)
        # else a short read is the end: a regular file reads short only at its end (or when a
        # signal cuts a read, which then fails to parse and gets the two-read rule's second
        # look); no second read() that returns b"" (one syscall of five per file on a first poll)
    except OSError as e:
        return st, b"", f"unreadable: {e.strerror or type(e).__name__}"
    finally:
        os.close(fd)
    if len(raw) > limit:
        return st, b"", f"too large (> {limit} bytes)"
    return st, raw, None
