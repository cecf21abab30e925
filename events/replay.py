"""The replay read: events after a seq as the projections' folds read them.

A fold reads four fields of a record: ``seq``, ``time``, ``type`` and ``event`` (the runs fold
also its ``id``, a run's stamp); never ``subject``, ``version``, ``data`` or ``hash``. A replay
(``rebuild``, the watcher's start-up ``catch_up``) reads every row of the log, and the fetch of
the columns no fold reads is a third of its read (docs/bench.md).

So :func:`replay` selects only those columns and yields :class:`Folded` records (or
:class:`FoldedWithId` with ``ids``): Structs that *have* no ``subject`` or ``hash``, so a fold
that began reading one fails loudly (AttributeError) instead of reading a blank.
``tests/watcher/runtime/test_replay_lean_records.py`` folds every event type through both reads and compares
every projection's encoded state. A projection whose fold reads ``rec.id`` says so with
``READS_ID = True`` (watcher.runtime.state.Projections asks for the ids then).

Everything else is ``EventLog.read``'s: rows in seq order in chunks (no read transaction held
between them), ``types`` filters, and a damaged row (``data`` not a blob, not decodable, or a
time the folds cannot parse) is skipped and noted in ``log.damaged`` by seq, never a crash.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import msgspec

from events import query, sqlrows
from events.records import _problem, check_time
from events.types import _decoders, decode_data

if TYPE_CHECKING:
    from events.log import EventLog

CHUNK = 2000   # rows per query, as EventLog.read's READ_CHUNK
BATCH = 100    # records per list of replay_batches (rebuild_par.BATCH)


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
           ids: bool = False, exclude: Sequence[str] = ()) -> Iterator[Folded | FoldedWithId]:
    """The events with seq > ``since`` in order (``types``: only those; ``exclude``: not those),
    as :class:`Folded` (``ids``: :class:`FoldedWithId`); damaged rows skipped and noted in
    ``log.damaged``. (:func:`replay_batches`, one record at a time.)"""
    return chain.from_iterable(replay_batches(log, since, types=types, chunk=chunk, ids=ids, exclude=exclude))


def replay_batches(log: EventLog, since: int = 0, *, types: Sequence[str] | None = None, chunk: int = CHUNK,
                   ids: bool = False, exclude: Sequence[str] = (), size: int = BATCH) -> Iterator[list[Any]]:
    """:func:`replay`'s records in lists of up to ``size`` (a fold's batch), each decoded just
    before it is handed over (a batch of ~100 records stays in the core's cache while each fold
    walks it; rebuild_par.fold_group). A list a step, not a record: a generator's step and
    ``islice`` a record cost more. ``exclude``:
    rows of those types are not read at all (rebuild_par: this process reads no row only the
    worker's projections fold)."""
    where, args = query.filters(types, None)
    if exclude:
        where += f" AND type NOT IN ({','.join('?' * len(exclude))})"
        args += tuple(exclude)
    cols = "seq, id, time, type, data" if ids else "seq, time, type, data"
    sql = f"SELECT {cols} FROM events NOT INDEXED WHERE seq > ?{where} ORDER BY seq LIMIT ?"
    return (_with_ids if ids else _plain)(log, sql, since, args, chunk, max(1, size))


# _plain and _with_ids are twins on purpose: one loop for both (a fifth column NULL when no id is
# read, a branch a row) costs a measurable part of the read (docs/bench.md).
def _plain(log: EventLog, sql: str, since: int, args: tuple, chunk: int, size: int) -> Iterator[list[Folded]]:
    decs, slow, Rec, damaged = _decoders, decode_data, Folded, log.damaged
    last_t = None  # the last time checked: the events of one append share it
    while True:
        rows = sqlrows.fold_rows(log.db, sql, (since, *args, chunk))
        for i in range(0, len(rows), size):
            out: list[Folded] = []
            add = out.append
            for seq, t, ty, da in rows[i:i + size] if size < len(rows) else rows:
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
                add(Rec(seq, t, ty, ev))
            if out:
                yield out
        if len(rows) < chunk:
            return
        since = rows[-1][0]


def _with_ids(log: EventLog, sql: str, since: int, args: tuple, chunk: int, size: int) -> Iterator[list[FoldedWithId]]:
    decs, slow, Rec, damaged = _decoders, decode_data, FoldedWithId, log.damaged
    last_t = None
    while True:
        rows = sqlrows.fold_rows_with_id(log.db, sql, (since, *args, chunk))
        for i in range(0, len(rows), size):
            out: list[FoldedWithId] = []
            add = out.append
            for seq, id_, t, ty, da in rows[i:i + size] if size < len(rows) else rows:
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
                add(Rec(seq, id_, t, ty, ev))
            if out:
                yield out
        if len(rows) < chunk:
            return
        since = rows[-1][0]
