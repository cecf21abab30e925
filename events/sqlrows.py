"""The typed adapter between apsw and events/: every row the log's code reads comes through here.

apsw types each value it returns as ``int | float | str | bytes | None`` and a cursor's rows as
``Any``; the log's schema (events/schema.py) fixes each column's type. Each function below is one
shape of query result, its column types stated once for the whole result: one call per query, never
one per row (the hot paths still unpack plain tuples). Statements whose rows are not read
(``BEGIN``, ``INSERT``, ``PRAGMA x=y``) call apsw directly, checked against apsw's own stubs.
tests/repo/test_static.py checks that no other module of events/ reads rows from apsw.

What the types promise: a file written by fleetwatch. SQLite does not enforce declared types (the
tables are not STRICT), so a file edited by hand can hold text where a blob belongs. The readers
that must survive such a file check at run time where it matters: a row's ``data`` and ``hash``
(``chain.verify``, ``read``: :class:`~events.records.Damaged`), a snapshot's columns
(``chain.snapshot_problem``), the hash compared with an anchor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import apsw

if TYPE_CHECKING:
    from apsw import Bindings

# seq, id, time, type, subject, version, data, hash (chain.ROW_COLUMNS)
EventRow = tuple[int, str, str, str, str, int, bytes, bytes]
# seq, time, type, data / seq, id, time, type, data (events/replay.py: what the folds read)
FoldRow = tuple[int, str, str, bytes]
FoldRowWithId = tuple[int, str, str, str, bytes]
# name, seq, data, head, digest of `snapshots` (head and digest NULL: written before schema v3)
SnapshotRow = tuple[str, int, bytes, bytes | None, bytes | None]
# type, name, sql of sqlite_master (an autoindex has no sql)
MasterRow = tuple[str, str, str | None]


def event_rows(db: apsw.Connection, sql: str, args: Bindings | None = None) -> list[EventRow]:
    """Rows of ``SELECT {ROW_COLUMNS} ...``."""
    return cast("list[EventRow]", db.execute(sql, args).fetchall())


def fold_rows(db: apsw.Connection, sql: str, args: Bindings) -> list[FoldRow]:
    """Rows of ``SELECT seq, time, type, data ...``."""
    return cast("list[FoldRow]", db.execute(sql, args).fetchall())


def fold_rows_with_id(db: apsw.Connection, sql: str, args: Bindings) -> list[FoldRowWithId]:
    """Rows of ``SELECT seq, id, time, type, data ...``."""
    return cast("list[FoldRowWithId]", db.execute(sql, args).fetchall())


def snapshot_rows(db: apsw.Connection, names: tuple[str, ...] | None = None) -> list[SnapshotRow]:
    """Every stored snapshot (with ``names``: only those): (name, seq, data, head, digest)."""
    sql = "SELECT name, seq, data, head, digest FROM snapshots"
    if names is None:
        return cast("list[SnapshotRow]", db.execute(sql).fetchall())
    sql += f" WHERE name IN ({','.join('?' * len(names))})"
    return cast("list[SnapshotRow]", db.execute(sql, names).fetchall())


def master_rows(db: apsw.Connection, sql: str) -> list[MasterRow]:
    """Rows of ``SELECT type, name, sql FROM sqlite_master ...``."""
    return cast("list[MasterRow]", db.execute(sql).fetchall())


def str_int_rows(db: apsw.Connection, sql: str, args: Bindings | None = None) -> list[tuple[str, int]]:
    """Rows of two columns, text then integer: (subject, max(version)), (id, seq), (type, block)."""
    return cast("list[tuple[str, int]]", db.execute(sql, args).fetchall())


def int_column(db: apsw.Connection, sql: str, args: Bindings | None = None) -> list[int]:
    """The first column of every row, an integer one (``seq``, ``block``)."""
    return [r[0] for r in cast("list[tuple[int]]", db.execute(sql, args).fetchall())]


def str_column(db: apsw.Connection, sql: str, args: Bindings | None = None) -> list[str]:
    """The first column of every row, a text one (``name``, ``subject``)."""
    return [r[0] for r in cast("list[tuple[str]]", db.execute(sql, args).fetchall())]


def int_triples(db: apsw.Connection, sql: str, args: Bindings | None = None) -> list[tuple[int, int, int]]:
    """Rows of three integer columns."""
    return cast("list[tuple[int, int, int]]", db.execute(sql, args).fetchall())


def one_int(db: apsw.Connection, sql: str, args: Bindings | None = None) -> int:
    """The integer of a query that always returns one row (a PRAGMA, ``count(*)``, ``coalesce(max(…), 0)``)."""
    return cast(int, db.execute(sql, args).fetchall()[0][0])


def max_int(db: apsw.Connection, sql: str, args: Bindings | None = None) -> int | None:
    """The one value of ``SELECT max(…) …``: None over no rows."""
    return cast("int | None", db.execute(sql, args).fetchall()[0][0])


def hash_at(db: apsw.Connection, seq: int) -> bytes | None:
    """The chain hash of row ``seq``, None if there is no such row."""
    r = db.execute("SELECT hash FROM events WHERE seq=?", (seq,)).fetchall()
    return cast(bytes, r[0][0]) if r else None


def head(db: apsw.Connection) -> tuple[int, bytes] | None:
    """(seq, hash) of the last row, None for an empty log."""
    r = db.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchall()
    return cast("tuple[int, bytes]", r[0]) if r else None


def exists(db: apsw.Connection, sql: str, args: Bindings | None = None) -> bool:
    """Whether the query returns a row."""
    return bool(db.execute(sql, args).fetchall())


__all__ = ["EventRow", "MasterRow", "SnapshotRow", "event_rows", "exists", "hash_at", "head", "int_column", "int_triples",
           "max_int", "master_rows", "one_int", "snapshot_rows", "str_column", "str_int_rows"]
