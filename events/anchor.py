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


class HeadFile:
    """The writer's handle on ``<log>.head``: opened on the first write, one pwrite per commit.
    A write that fails is skipped silently (the anchor is a witness, never a reason to fail a
    commit that already happened); ``failed`` counts them."""

    def __init__(self, log_path: str):
        self.path = path_of(log_path)
        self._fd: int | None = None
        self.failed = 0

    def write(self, seq: int, hash_: bytes) -> None:
        self.write_line(line(seq, hash_))

    def write_line(self, text: bytes) -> None:
        """Write ``text`` (from :func:`line`): the writer builds it before its COMMIT, so all that
        is left after the commit is this one pwrite."""
        try:
            if self._fd is None:
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
