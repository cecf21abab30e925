"""One file's stat and capped read for the file sources (watcher/sources/files.py): what a path
is (gone, a dangling symlink, unreadable, not a regular file), its bytes without blocking, and
the per-file cache entry of the two-read rule."""
from __future__ import annotations

import errno
import os
import stat
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
    __slots__ = ("key", "obs", "fails", "good")

    def __init__(self) -> None:
        self.key: tuple[int, int, int] | None = None
        self.obs: Any = None        # what this file reports now (None: nothing yet)
        self.good: Any = None       # last successfully parsed observation
        self.fails = 0


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
        # of ``want`` before it shrinks to what came (64 KiB of slack here cost ~1.3 µs a file,
        # ~65 ms of a 50,000-file first poll)
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
