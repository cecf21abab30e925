"""The replay read: events after a seq as the projections' folds read them.

A fold reads four fields of a record: ``seq``, ``time``, ``type`` and ``event`` (the runs fold
also its ``id``, a run's stamp); never ``subject``, ``version``, ``data`` or ``hash``. A replay
(``rebuild``, the watcher's start-up ``catch_up``) reads every row of the log, and the fetch of
the columns no fold reads is a third of its read: on bench_rebuild's 1M-event log, the row fetch
of every column took 0.61 s of CPU, of ``seq, time, type, data`` 0.42 s (eleventh session).

So :func:`replay` selects only those columns and yields :class:`Folded` records (or
:class:`FoldedWithId` with ``ids``): Structs that *have* no ``subject`` or ``hash``, so a fold
that began reading one fails loudly (AttributeError) instead of reading a blank.
``tests/test_replay_lean_records.py`` folds every event type through both reads and compares
every projection's encoded state. A projection whose fold reads ``rec.id`` says so with
``READS_ID = True`` (watcher.runtime.state.Projections asks for the ids then).

Everything else is ``EventLog.read``'s: rows in seq order in chunks (no read transaction held
between them), ``types`` filters, and a damaged row (``data`` not a blob, not decodable, or a
time the folds cannot parse) is skipped and noted in ``log.damaged`` by seq, never a crash.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from events import query, sqlrows
from events.records import _problem, check_time
from events.types import _decoders, decode_data

if TYPE_CHECKING:
    from events.log import EventLog

CHUNK = 2000   # rows per query, as EventLog.read's READ_CHUNK


class Folded(msgspec.Struct, frozen=True):
    """A record as a fold reads it."""

    seq: int
    time: str
    type: str
    event: Any


class FoldedWithId(msgspec.Struct, frozen=True):
    """A record as a fold that reads ``id`` reads it."""

    seq: int
    id: str
    time: str
    type: str
    event: Any


def replay(log: EventLog, since: int = 0, *, types: Sequence[str] | None = None, chunk: int = CHUNK,
           ids: bool = False) -> Iterator[Folded | FoldedWithId]:
    """The events with seq > ``since`` in order (``types``: only those), as :class:`Folded`
    (``ids``: :class:`FoldedWithId`); damaged rows skipped and noted in ``log.damaged``."""
    where, args = query.filters(types, None)
    cols = "seq, id, time, type, data" if ids else "seq, time, type, data"
    sql = f"SELECT {cols} FROM events NOT INDEXED WHERE seq > ?{where} ORDER BY seq LIMIT ?"
    return _with_ids(log, sql, since, args, chunk) if ids else _plain(log, sql, since, args, chunk)


# _plain and _with_ids are twins on purpose: one loop for both (a fifth column NULL when no id is
# read, a branch a row) cost 0.05 s of CPU a 1M-event replay, 5 % of the read (eleventh session).
def _plain(log: EventLog, sql: str, since: int, args: tuple, chunk: int) -> Iterator[Folded]:
    decs, slow, Rec, damaged = _decoders, decode_data, Folded, log.damaged
    last_t = None  # the last time checked: the events of one append share it
    while True:
        rows = sqlrows.fold_rows(log.db, sql, (since, *args, chunk))
        for seq, t, ty, da in rows:
            try:
                if type(da) is not bytes:
                    raise TypeError
                d = decs.get(ty)
                ev: Any = d.decode(da) if d is not None else slow(ty, da)
                if t != last_t:
                    check_time(t)
                    last_t = t
            except Exception as e:  # a damaged row: reported by seq, never a traceback
                damaged[seq] = _problem(da, e)
                continue
            yield Rec(seq, t, ty, ev)
        if len(rows) < chunk:
            return
        since = rows[-1][0]


def _with_ids(log: EventLog, sql: str, since: int, args: tuple, chunk: int) -> Iterator[FoldedWithId]:
    decs, slow, Rec, damaged = _decoders, decode_data, FoldedWithId, log.damaged
    last_t = None
    while True:
        rows = sqlrows.fold_rows_with_id(log.db, sql, (since, *args, chunk))
        for seq, id_, t, ty, da in rows:
            try:
                if type(da) is not bytes:
                    raise TypeError
                d = decs.get(ty)
                ev: Any = d.decode(da) if d is not None else slow(ty, da)
                if t != last_t:
                    check_time(t)
                    last_t = t
            except Exception as e:
                damaged[seq] = _problem(da, e)
                continue
            yield Rec(seq, id_, t, ty, ev)
        if len(rows) < chunk:
            return
        since = rows[-1][0]
