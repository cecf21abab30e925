"""Finding the last N events of a type or subject without scanning the log.

``tail --type T`` / ``--subject S`` want the last N matches. A backward scan of the table costs
the distance to the N-th match: fine for common matches, a full scan of millions of rows for a
rare or absent type. Here:
- types: ``event_types`` (type, block) lists the blocks of ``1 << BLOCK_SHIFT`` seqs where each
  type occurs; only those blocks are read, newest first. An absent type is one look-up.
- subject prefix: the ``UNIQUE (subject, version)`` index; version grows with seq within a
  subject, so a subject's last N events are its last N versions. The distinct subjects under the
  prefix are found by skipping through the index (one probe each); past ``MAX_SUBJECTS`` of them
  the matches are dense and a bounded backward scan of the table finds them first.
Every strategy returns exactly the seqs a full scan would (tests/events/test_log_integrity.py compares).
"""
from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import apsw

from events import sqlrows
from events.schema import BLOCK_SHIFT, GIVEN_ID

MAX_SUBJECTS = 64
SCAN_FIRST = 20_000  # rows a dense filter may scan backwards before the index strategy is used


def _range(subject: str) -> tuple[str, str]:
    return subject, subject + "\U0010ffff"


def _subjects(db: apsw.Connection, subject: str, most: int) -> list[str] | None:
    """The distinct subjects starting with ``subject``, or None if there are more than ``most``."""
    lo, hi = _range(subject)
    out: list[str] = []
    q = "SELECT subject FROM events WHERE subject >= ? AND subject < ? ORDER BY subject LIMIT 1"
    cur = lo
    while True:
        r = sqlrows.str_column(db, q, (cur, hi))
        if not r:
            return out
        s = r[0]
        out.append(s)
        if len(out) > most:
            return None
        cur = s + "\x00"  # the next subject after s


def filters(types: Sequence[str] | None, subject: str | None, exact: bool = False) -> tuple[str, tuple[str, ...]]:
    """The ``AND …`` clauses (and their bindings) of a type filter (any of ``types``) and a
    ``subject`` prefix (with ``exact``: that subject only)."""
    where, args = "", cast(tuple[str, ...], ())
    if types:
        where += f" AND type IN ({','.join('?' * len(types))})"
        args += tuple(types)
    if subject and exact:
        where += " AND subject = ?"
        args += (subject,)
    elif subject:
        where += " AND subject >= ? AND subject < ?"
        args += _range(subject)
    return where, args


def _scan(db: apsw.Connection, n: int, types: Sequence[str] | None, subject: str | None,
          rows: int, exact: bool = False) -> list[int] | None:
    """Backward scan of the last ``rows`` rows; the seqs if n matches were found there, else None."""
    where, args = filters(types, subject, exact)
    top = sqlrows.one_int(db, "SELECT coalesce(max(seq), 0) FROM events")
    floor = max(0, top - rows)
    got = sqlrows.int_column(db, f"SELECT seq FROM events NOT INDEXED WHERE seq > ?{where} ORDER BY seq DESC LIMIT ?",
                         (floor, *args, n))
    return got if len(got) >= n or floor == 0 else None


def _by_blocks(db: apsw.Connection, n: int, types: Sequence[str], subject: str | None) -> list[int]:
    tq = ",".join("?" * len(types))
    where, args = f" AND type IN ({tq})", tuple(types)
    if subject:
        where += " AND subject >= ? AND subject < ?"
        args += _range(subject)
    got: list[int] = []
    for b in sqlrows.int_column(db, f"SELECT DISTINCT block FROM event_types WHERE type IN ({tq}) ORDER BY block DESC",
                            tuple(types)):
        lo = b << BLOCK_SHIFT
        got += sqlrows.int_column(
            db, f"SELECT seq FROM events NOT INDEXED WHERE seq >= ? AND seq < ?{where} ORDER BY seq DESC LIMIT ?",
            (lo, lo + (1 << BLOCK_SHIFT), *args, n - len(got)))
        if len(got) >= n:
            break
    return got[::-1]


SQL_MAX_LIMIT = 2 ** 63 - 1   # LIMIT takes a signed 64-bit integer (tail -n 99999999999999999999)


def last_seqs(db: apsw.Connection, n: int, types: Sequence[str] | None = None,
              subject: str | None = None, exact: bool = False) -> list[int]:
    """The seqs of the last ``n`` events matching ``types`` (any of) and the ``subject`` prefix
    (with ``exact``: that subject only), ascending. ``n`` beyond SQLite's 64-bit LIMIT means all."""
    if n <= 0:
        return []
    n = min(n, SQL_MAX_LIMIT)
    if not types and not subject:
        return sqlrows.int_column(db, "SELECT seq FROM events ORDER BY seq DESC LIMIT ?", (n,))[::-1]
    got = _scan(db, n, types, subject, min(SCAN_FIRST, 64 * n), exact)
    if got is not None:
        return got[::-1]
    subs = ([subject] if exact else _subjects(db, subject, MAX_SUBJECTS)) if subject else None
    runs: list[list[int]] = []
    if subs is not None:  # few subjects under the prefix: each one's last versions
        tw, ta = "", cast(tuple[str, ...], ())
        if types:
            tw, ta = f" AND type IN ({','.join('?' * len(types))})", tuple(types)
        for s in subs:
            runs.append(sqlrows.int_column(
                db, f"SELECT seq FROM events WHERE subject = ?{tw} ORDER BY subject DESC, version DESC LIMIT ?",
                (s, *ta, n)))
    elif types:  # only the blocks that hold one of the types, newest first
        try:
            return _by_blocks(db, n, types, subject)
        except apsw.SQLError:  # a read-only log of an older schema: no event_types yet
            return (_scan(db, n, types, subject, 1 << 62) or [])[::-1]
    else:  # many subjects, none of them recent enough: the whole backward scan
        return (_scan(db, n, None, subject, 1 << 62) or [])[::-1]
    return sorted(heapq.nlargest(n, (s for run in runs for s in run)))


def follow(data_version: Callable[[], int], read: Callable[[int], Iterator[Any]], since: int,
           types: Sequence[str] | None, subject: str | None, poll: float, stop: Callable[[], bool],
           same_file: Callable[[], None] = lambda: None) -> Iterator[Any]:
    """``EventLog.follow``: the records ``read(since)`` yields, filtered, each time ``data_version()``
    moved; between polls a sleep of ``poll`` s, after ``same_file()`` (it raises when the file at
    the log's path is no longer the one followed: a deleted or replaced log never moves again)."""
    last_dv = None
    while not stop():
        dv = data_version()
        if dv != last_dv:
            last_dv = dv
            for rec in read(since):
                since = rec.seq
                if types and rec.type not in types:
                    continue
                if subject and not rec.subject.startswith(subject):
                    continue
                yield rec
        else:
            same_file()
            time.sleep(poll)


def known_ids(db: apsw.Connection, ids: list[str]) -> dict[str, int]:
    """{id: seq} for the given ids that are already stored: through the partial index (ids not
    of the generated form) and, for an id of the generated form, the row at the seq it names."""
    found: dict[str, int] = {}
    if not ids:
        return found
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        found.update(sqlrows.str_int_rows(
            db, f"SELECT id, seq FROM events WHERE id IN ({','.join('?' * len(part))}) AND {GIVEN_ID}", part))
    for id_ in ids:
        if id_ not in found and len(id_) == 32:
            try:
                seq = int(id_[16:], 16)
            except ValueError:
                continue
            if seq < 1 << 63 and sqlrows.exists(db, "SELECT 1 FROM events WHERE seq=? AND id=?", (seq, id_)):
                found[id_] = seq
    return found


__all__ = ["MAX_SUBJECTS", "filters", "follow", "known_ids", "last_seqs"]
