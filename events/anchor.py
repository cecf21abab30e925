"""The head anchor: the last committed (seq, hash) of a log, kept outside the log file.

Invariants
- ``<log>.head`` (mode 0600) holds one line ``SEQ:HASH`` (seq zero-padded to 20 digits, the
  64-hex chain hash), rewritten in place by one ``pwrite`` of a fixed size after every commit
  of a writer connection (never inside the transaction: it never names a seq that was not
  committed). Concurrent writers can only leave it behind the true head, never ahead of it.
- It is not fsynced: after a power cut it may be older than the log (still a valid anchor), or,
  with ``durability = "normal"``, newer than what the log kept — which ``verify`` then reports
  as the truth it is: commits were lost.
- ``verify`` compares the log with it by default, so a cut tail (rows removed from the end and
  the chain still consistent) is caught without the user keeping a hash; push bodies carry
  :func:`label` ("log head 1234:9f2c1a2b") as a second, off-host witness.
"""
from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from typing import Any

SUFFIX = ".head"
_WIDTH = 20 + 1 + 64 + 1


def path_of(log_path: str) -> str:
    return log_path + SUFFIX


def label(seq: int, hash_: bytes | str) -> str:
    """``SEQ:HASH8``: the short head carried in push bodies and printed by ``verify``."""
    h = hash_.hex() if isinstance(hash_, bytes) else hash_
    return f"{seq}:{h[:8]}"


def read(log_path: str) -> tuple[int, str] | None:
    """(seq, hex hash) from ``<log>.head``; None when there is none; (-1, text) when it is garbled."""
    try:  # never follow a symlink, never block on a FIFO, never read more than one line
        fd = os.open(path_of(log_path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        return -1, f"unreadable: {e.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return -1, "not a regular file"
        raw = os.read(fd, _WIDTH + 1)
    except OSError as e:
        return -1, f"unreadable: {e.strerror}"
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    seq_s, _, h = text.partition(":")
    if not seq_s.isdigit() or len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
        return -1, text[:40]
    return int(seq_s), h


def line(seq: int, hash_: bytes) -> bytes:
    """The anchor's bytes for head (seq, hash): ``SEQ:HASH`` and a newline, always _WIDTH long."""
    return b"%020d:%s\n" % (seq, hash_.hex().encode())


def problem(db: Any, head_seq: int, want: tuple[int, str], who: str) -> tuple[int | None, str] | None:
    """Why the log behind ``db`` (rows 1..``head_seq``) does not hold the head ``want`` = (seq,
    hex hash) that ``who`` names: (the first bad seq, or None for a garbled ``want``; the problem),
    or None when it holds it (a head behind the log's is fine: concurrent writers)."""
    from events import sqlrows

    es, eh = want
    if es < 0:
        return None, f"{who} is garbled ({eh!r}); delete it only if you know why"
    if head_seq < es:
        return head_seq + 1, f"log ends at seq {head_seq}, {who} says {es} (truncated tail)"
    at: object = sqlrows.hash_at(db, es) if es else bytes(32)  # seq 0: the genesis every log starts from
    # checked: a hash edited to text is a rewritten history. A short hash (a push body's 8 hex
    # digits, "log head 1234:9f2c1a2b") is a prefix of the row's
    if not isinstance(at, bytes) or not eh or not at.hex().startswith(eh.lower()):
        return es, f"seq {es}: hash differs from {who} (history rewritten or another log)"
    return None


def keep_if_lost(log_path: str, db: Any) -> str | None:
    """Before a writer's first write of ``<log>.head`` (after its first commit): when the log does
    not hold the head the file names (its tail was cut, an older copy was put back, another log),
    that file is the only evidence left and the write would erase it, so it is renamed to
    ``<log>.head.lost-<UTC time>`` first and a warning says so (``doctor`` lists such files).
    Returns the kept path, or None. The file is read before the log's head: another writer moves
    the head forward and writes the file only after its commit, so it is never taken for a cut.
    A garbled file is left to ``verify``."""
    from events import sqlrows

    want = read(log_path)
    if want is None or want[0] < 0:
        return None
    head = sqlrows.head(db)
    why = problem(db, head[0] if head else 0, want, "its head file")
    if why is None:
        return None
    import logging  # not at import: the CLI's fast path reads logs without it (tests/watcher/cli/test_cli_start.py)

    log = logging.getLogger("fleetwatch.log")
    kept = f"{path_of(log_path)}.lost-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    try:
        os.rename(path_of(log_path), kept)
    except FileNotFoundError:  # another writer found the same and kept it first
        return None
    except OSError as e:
        log.warning("the log %r does not hold the head its head file names (%s), and that file could not be "
                    "kept aside (%s): it is overwritten now", log_path, why[1], e.strerror)
        return None
    # paths as repr: a folder name's escapes and newlines stay inert text in a terminal or the journal
    log.warning("the log %r does not hold the head its head file named (%s): that file is kept as %r; "
                "`fleetwatch verify --expect-head %d:%s` checks a copy against it", log_path, why[1], kept, *want)
    return kept


def lost(log_path: str) -> list[str]:
    """Head files a writer kept aside (:func:`keep_if_lost`), oldest first."""
    folder, name = os.path.split(path_of(log_path))
    try:
        return sorted(os.path.join(folder, f) for f in os.listdir(folder or ".") if f.startswith(name + ".lost-"))
    except OSError:
        return []


class HeadFile:
    """The writer's handle on ``<log>.head``: opened on the first write, one pwrite per commit.
    A write that fails is skipped silently (the anchor is a witness, never a reason to fail a
    commit that already happened); ``failed`` counts them. ``db_of`` (a writer's): the log's
    connection, for :func:`keep_if_lost` before the first write."""

    def __init__(self, log_path: str, db_of: Callable[[], Any] | None = None):
        self.path = path_of(log_path)
        self._log_path, self._db_of = log_path, db_of
        self._fd: int | None = None
        self.failed = 0

    def write(self, seq: int, hash_: bytes) -> None:
        self.write_line(line(seq, hash_))

    def write_line(self, text: bytes) -> None:
        """Write ``text`` (from :func:`line`): the writer builds it before its COMMIT, so all that
        is left after the commit is this one pwrite."""
        try:
            if self._fd is None:
                if self._db_of is not None:
                    keep_if_lost(self._log_path, self._db_of())
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                             0o600)
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted there: not ours
                    os.close(fd)
                    self.failed += 1
                    return
                self._fd = fd
            os.pwrite(self._fd, text, 0)
        except OSError:
            self.failed += 1

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def write_once(log_path: str, seq: int, hash_: bytes) -> None:
    """Write the anchor of a finished copy (``backup``)."""
    h = HeadFile(log_path)
    h.write(seq, hash_)
    h.close()


__all__ = ["SUFFIX", "HeadFile", "label", "line", "path_of", "read", "write_once"]
