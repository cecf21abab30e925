"""Typed errors of the event log. Each carries the operation, the path and a hint.

Only the CLI turns them into messages and exit codes; nobody branches on their text.
"""
from __future__ import annotations


class FleetwatchError(Exception):
    """Base: ``op`` (what was being done), ``path`` (file involved), ``hint`` (what to do)."""

    exit_code = 1

    def __init__(self, message: str, *, op: str = "", path: str | None = None, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.op = op
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        s = self.message
        if self.path:
            s = f"{s} ({self.path})"
        return s


class StoreError(FleetwatchError):
    """The log file cannot be used as asked (directory, unwritable, not SQLite, foreign DB)."""

    exit_code = 2


class SchemaError(StoreError):
    """The database is a newer fleetwatch schema or not a fleetwatch database."""


class WriterLocked(FleetwatchError):
    """Another `fleetwatch run` holds the log."""

    exit_code = 3

    def __init__(self, message: str, *, pid: int | None = None, **kw):
        super().__init__(message, **kw)
        self.pid = pid


class VersionConflict(FleetwatchError):
    """An append stated an expected subject version and found another (optimistic concurrency)."""

    def __init__(self, message: str, *, subject: str, expected: int, actual: int, **kw):
        super().__init__(message, **kw)
        self.subject = subject
        self.expected = expected
        self.actual = actual


class ChainBroken(FleetwatchError):
    """A verified read met a row that breaks contiguity or the hash chain at ``seq``."""

    def __init__(self, message: str, *, seq: int, **kw):
        super().__init__(message, **kw)
        self.seq = seq


class AppendFailed(FleetwatchError):
    """The append did not commit (disk full, I/O error, busy past the timeout). Nothing was written."""


def append_hint(e: Exception) -> str:
    """The hint of an :class:`AppendFailed` from SQLite's error ``e``: a read-only log (this user may
    not write the file or its folder), else disk full or I/O: a command is not retried."""
    if type(e).__name__ == "ReadOnlyError":
        return "the log or its folder is not writable by this user: check their owner and mode"
    # not "the batch is kept and retried": true of the watcher (which says so itself), not of a command
    return "disk full or I/O error? free space or check the disk, then run the command again"


def open_hint(e: Exception) -> str:
    """The hint of a StoreError from SQLite's error ``e`` while opening the log: a damaged file
    (cut short, overwritten) is not "some other file", and a full disk is neither."""
    name = type(e).__name__
    if name in ("CorruptError", "NotADBError"):
        return "the file is damaged (cut short or overwritten?): restore it from a backup; it was not changed"
    if name in ("IOError", "FullError"):
        return "disk full or I/O error? SQLite needs room beside the log for its -wal/-shm files: free space"
    if name in ("BusyError", "LockedError"):
        return ("another process keeps the log locked (an sqlite3 shell in a transaction or with "
                "locking_mode=EXCLUSIVE?): end it and run the command again")
    if name == "CantOpenError":
        return "check the owner and mode of the file and of its folder"
    return "is it a fleetwatch events.db?"


class ConfigError(FleetwatchError):
    """The config is invalid: ``key`` names the offending key."""

    exit_code = 2

    def __init__(self, message: str, *, key: str = "", **kw):
        super().__init__(message, **kw)
        self.key = key


class GuardsMissing(StoreError):
    """The append-only guards of the log (triggers, unique indexes) are missing or were edited:
    ``problems`` lists each one. The watcher refuses to write to such a log."""

    def __init__(self, message: str, *, problems: list[str] | tuple[str, ...] = (), **kw):
        super().__init__(message, **kw)
        self.problems = list(problems)


class LogReplaced(FleetwatchError):
    """The file at the log's path is gone or is another file than the one this process opened
    (deleted, moved away, replaced). Nothing more is appended; exit 1 so systemd restarts the
    watcher onto the file now at the path."""

    def __init__(self, message: str, *, gone: bool = False, **kw):
        super().__init__(message, **kw)
        self.gone = gone


class BackupFailed(FleetwatchError):
    """`backup` could not make a verified copy; nothing was left at the destination."""
