"""``fleetwatch backup PATH``: a consistent, verified copy of a live log.

Invariants
- The copy is made by SQLite's online backup API (apsw ``Connection.backup``) in one step, so it
  is one read transaction of the source: every commit up to that moment, including those still in
  the WAL (a ``cp`` of ``events.db`` misses them), and the writer is never blocked.
- It is written to a temporary file in the destination's folder, checked (chain, guards,
  snapshots, and that its head is the source's head at the copy), given its own ``.head`` anchor
  and only then renamed to ``dest`` (mode 0600): ``dest`` is a whole verified log or absent.
- ``dest`` must not exist, must not be the source, and its folder must exist.
"""
from __future__ import annotations

import os
from typing import Any

import apsw

from events import anchor, sqlrows
from events.chain import VerifyResult
from events.errors import BackupFailed, StoreError


def backup_to(src: Any, dest: str, EventLog: Any) -> VerifyResult:  # noqa: N803 (the class, passed in)
    """Copy the log behind ``src`` (an open ``EventLog``, whose class opens the copy to check it)
    to ``dest``; returns the copy's VerifyResult."""
    dest = os.path.abspath(os.path.expanduser(dest))
    if os.path.lexists(dest):
        raise StoreError("the backup destination exists; nothing written", op="backup", path=dest,
                         hint="name a new file (backups never overwrite)")
    folder = os.path.dirname(dest)
    if not os.path.isdir(folder):
        raise StoreError("the backup folder does not exist; nothing written", op="backup", path=dest,
                         hint="create it first")
    if os.path.realpath(folder) == os.path.dirname(src.path) and os.path.basename(dest).startswith(
            os.path.basename(src.path) + "-"):
        raise StoreError("the backup would sit where SQLite keeps the log's -wal/-shm files", op="backup",
                         path=dest, hint="choose another name")
    tmp = os.path.join(folder, f".{os.path.basename(dest)}.{os.getpid()}.partial")
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except OSError as e:
        raise BackupFailed(f"cannot write the backup: {e.strerror}", op="backup", path=dest) from e
    try:
        try:
            out = apsw.Connection(tmp)
            try:
                with out.backup("main", src.db, "main") as b:
                    b.step(-1)  # everything in one step: one consistent read of the source
                out.execute("PRAGMA journal_mode=DELETE").fetchall()  # one self-contained file
            finally:
                out.close()
        except apsw.Error as e:
            raise BackupFailed(f"backup failed, nothing written: {type(e).__name__}: {e}", op="backup",
                             path=dest, hint="disk full? check the destination folder") from e
        with EventLog(tmp, create=False, readonly=True) as copy:
            res = copy.verify(use_anchor=False)
            seq, h = copy.head()
        if res.ok and seq:
            if sqlrows.hash_at(src.db, seq) != h:
                res = VerifyResult(False, res.head_seq, res.head_hash, res.count, seq,
                                   f"seq {seq} of the copy differs from the log", "events")
        if not res.ok:
            raise BackupFailed(f"the copy does not verify, nothing kept: {res.problem}", op="backup", path=dest,
                             hint="run `fleetwatch verify` on the log itself")
        anchor.write_once(tmp, seq, h)
        os.replace(anchor.path_of(tmp), anchor.path_of(dest))
        os.replace(tmp, dest)
        return res
    except BaseException:
        for p in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm", anchor.path_of(tmp)):
            try:
                os.unlink(p)
            except OSError:
                pass
        raise


__all__ = ["backup_to"]
