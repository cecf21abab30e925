"""``fleetwatch backup PATH``: a consistent, verified copy of a live log.

Invariants
- The copy is made by SQLite's online backup API (apsw ``Connection.backup``) in one step, so it
  is one read transaction of the source: every commit up to that moment, including those still in
  the WAL (a ``cp`` of ``events.db`` misses them), and the writer is never blocked.
- It is written to a temporary file in the destination's folder, checked (chain, guards,
  snapshots, and that its head is the source's head at the copy), given its own ``.head`` anchor
  and only then linked into place (mode 0600): ``dest`` is a whole verified log or absent.
- It never replaces a file: ``dest`` and ``dest.head`` must not exist (a log named ``X.head``
  backed up to ``X`` had its anchor written over it), ``dest`` must not be one of the source's
  companions (``-wal``/``-shm``/``-journal``, ``.head`` and what is set aside from them: a
  backup at ``events.db.head`` was overwritten by the writer's next anchor), and both are put in
  place with ``link`` (refused if a name appeared meanwhile), not ``rename``.
- A backup killed mid-way (``kill -9``) leaves its ``.NAME.PID.partial`` file behind; each
  backup holds a ``flock`` on its own, and the next backup to that name deletes those nobody holds.
"""
from __future__ import annotations

import errno
import fcntl
import os
from typing import Any

import apsw

from events import anchor, schema, sqlrows
from events.chain import GENESIS, VerifyResult
from events.errors import BackupFailed, StoreError

COMPANION_PREFIXES = ("-", anchor.SUFFIX)  # after the log's name: -wal, -shm, -journal, .head(.lost-…, .orphan-…)
PARTIAL_PARTS = ("", "-journal", "-wal", "-shm", anchor.SUFFIX)


NEW_NAME = "name a new file (backups never overwrite)"


def refusal(src_path: str, dest: str) -> tuple[str, str] | None:
    """(why, hint) when ``dest`` (absolute) cannot receive a backup of the log at ``src_path``
    (resolved), else None."""
    if not schema.is_utf8(dest):
        return "the backup path is not valid UTF-8 (SQLite takes UTF-8 file names); nothing written", NEW_NAME
    if os.path.lexists(dest):
        return "the backup destination exists; nothing written", NEW_NAME
    if os.path.lexists(anchor.path_of(dest)):
        return (f"the backup's head file {os.path.basename(anchor.path_of(dest))} exists; nothing written",
                NEW_NAME)
    folder = os.path.dirname(dest)
    name, log_name = os.path.basename(dest), os.path.basename(src_path)
    if os.path.realpath(folder) == os.path.dirname(src_path) and any(
            name.startswith(log_name + p) for p in COMPANION_PREFIXES):
        return ("the backup would sit where fleetwatch and SQLite keep the log's -wal/-shm/.head files",
                "choose another name")
    return None


def agreed(log: apsw.Connection, copy: apsw.Connection, differs: int) -> tuple[int, bytes]:
    """The last seq below ``differs`` whose chain hash is the same in ``log`` and ``copy``, and
    that hash ((0, GENESIS): none): a binary search, as an equal hash at a seq binds every row up to it (the chain). What
    ``backup`` names as the copy's last good row when the log's row ``differs`` is not the copy's
    (a writer that rewrote rows meanwhile), rather than the copy's head, which is not the log's."""
    lo, hi, at = 0, differs, GENESIS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        h = sqlrows.hash_at(copy, mid)
        if h is not None and h == sqlrows.hash_at(log, mid):
            lo, at = mid, h
        else:
            hi = mid
    return lo, at


def remove_stale_partials(folder: str, name: str) -> None:
    """Delete ``.NAME.*.partial`` files (and their companions) whose backup is gone: no process
    holds their flock (a backup killed with ``kill -9``)."""
    head = f".{name}."
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for n in names:
        pid = n[len(head):-len(".partial")] if n.startswith(head) and n.endswith(".partial") else ""
        if not (pid.isascii() and pid.isdigit()):  # only names a backup makes: .NAME.PID.partial
            continue
        p = os.path.join(folder, n)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a running backup holds it
        try:
            _remove_partial(p)
        finally:
            os.close(fd)


def _remove_partial(tmp: str) -> None:
    """Delete a backup's temporary file and its companions, whichever exist."""
    for part in PARTIAL_PARTS:
        try:
            os.unlink(tmp + part)
        except OSError:
            pass


def place(tmp: str, dest: str) -> None:
    """Give ``tmp`` the name ``dest`` without ever replacing a file there (``link``, then unlink
    ``tmp``); a file system without hard links: ``rename`` after one more look."""
    appeared = StoreError("the backup destination appeared meanwhile; nothing written", op="backup",
                          path=dest, hint=NEW_NAME)
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise appeared from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        if os.path.lexists(dest):
            raise appeared from None
        os.rename(tmp, dest)
        return
    os.unlink(tmp)


def _failed(e: apsw.Error, dest: str) -> BackupFailed:
    if isinstance(e, apsw.FullError):  # SQLite's own text for it can be "not an error"
        return BackupFailed("backup failed, nothing written: the destination's disk is full", op="backup",
                            path=dest, hint="free space there, or back up to another disk")
    return BackupFailed(f"backup failed, nothing written: {type(e).__name__}: {e}", op="backup",
                        path=dest, hint="disk full? check the destination folder")


def backup_to(src: Any, dest: str, EventLog: Any, as_is: bool = False) -> VerifyResult:  # noqa: N803 (the class)
    """Copy the log behind ``src`` (an open ``EventLog``, whose class opens the copy to check it)
    to ``dest``; returns the copy's VerifyResult. A copy that does not verify raises BackupFailed
    (nothing left at ``dest``), unless ``as_is``: then it is kept all the same (a damaged log
    copied for a closer look, every row as it is) and the result says what is wrong with it."""
    dest = os.path.abspath(os.path.expanduser(dest))
    folder = os.path.dirname(dest)
    if not os.path.isdir(folder):
        raise StoreError("the backup folder does not exist; nothing written", op="backup", path=dest,
                         hint="create it first")
    refused = refusal(src.path, dest)
    if refused:
        raise StoreError(refused[0], op="backup", path=dest, hint=refused[1])
    remove_stale_partials(folder, os.path.basename(dest))
    tmp = os.path.join(folder, f".{os.path.basename(dest)}.{os.getpid()}.partial")
    held = -1
    try:  # locked before it has the name the clean-up looks for: never seen unheld while we live
        held = os.open(tmp + ".new", os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        fcntl.flock(held, fcntl.LOCK_EX)
        os.rename(tmp + ".new", tmp)
    except OSError as e:
        if held >= 0:
            os.close(held)
        try:
            os.unlink(tmp + ".new")
        except OSError:
            pass
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
            raise _failed(e, dest) from e
        with EventLog(tmp, create=False, readonly=True) as copy:
            res = copy.verify(use_anchor=False)
            seq, h = copy.head()
            if res.ok and seq and sqlrows.hash_at(src.db, seq) != h:   # the log changed under the copy
                same, same_hash = agreed(src.db, copy.db, seq)
                res = VerifyResult(False, same, same_hash.hex(), res.count,
                                   same + 1, f"seq {same + 1} of the copy differs from the log "
                                   f"(the two agree up to seq {same})", "events")
        if not res.ok and not as_is:
            raise BackupFailed(f"the copy does not verify, nothing kept: {res.problem}", op="backup", path=dest,
                             hint="run `fleetwatch verify` on the log itself; `fleetwatch backup --as-is PATH` "
                                  "keeps a copy of it as it is")
        anchor.write_once(tmp, seq, h)
        place(anchor.path_of(tmp), anchor.path_of(dest))
        try:
            place(tmp, dest)
        except BaseException:
            os.unlink(anchor.path_of(dest))  # ours, placed a moment ago
            raise
        return res
    except BaseException:
        _remove_partial(tmp)
        raise
    finally:
        os.close(held)


__all__ = ["backup_to", "refusal", "remove_stale_partials"]
