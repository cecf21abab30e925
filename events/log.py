"""The immutable event log: one SQLite file (apsw), append-only, hash-chained.

Invariants
- ``seq`` is contiguous from 1; every append is one ``BEGIN IMMEDIATE`` transaction (one fsync
  with ``durability = "full"``), all or nothing.
- ``id`` is unique: re-appending an event whose id exists is a no-op returning the existing seq.
  Generated ids are ``<16 hex per connection><seq as 16 hex>`` (unique by construction, so they
  need no index entry); every other id is in the UNIQUE partial index (events/schema.py).
- ``version`` counts events per subject from 1; UNIQUE(subject, version). An append stating an
  expected version that differs raises :class:`VersionConflict`.
- ``hash`` = sha256(previous hash || canonical bytes of this row) (events/chain.py).
- Triggers refuse UPDATE and DELETE on ``events``. Projection snapshots live in ``snapshots``
  (mutable, derived) and are written in the same transaction as the events they cover.
- Readers never hold a read transaction between calls (WAL checkpoints must not stall).
- WAL: SQLite's automatic checkpoint runs every WAL_AUTOCHECKPOINT pages (a passive checkpoint
  by the committing connection; 4× SQLite's default, as every commit dirties the table and the
  (subject, version) index); ``checkpoint()`` runs one on demand. The WAL file is cut back to
  JOURNAL_SIZE_LIMIT after a checkpoint, so it stays bounded while no reader pins it.
"""
from __future__ import annotations

import hashlib
import os
import time as _time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import apsw
import msgspec

from events import schema
from events.chain import GENESIS, ROW_COLUMNS, VerifyResult, _canon, iso, parse_iso, row_hash
from events.chain import verify as _verify
from events.errors import AppendFailed, ChainBroken, SchemaError, StoreError, VersionConflict
from events.schema import APPLICATION_ID, SCHEMA_VERSION  # noqa: F401  (re-exported)
from events.types import Unknown, _E, _decoders, data_dict, decode_data, encode_data  # noqa: F401  (Unknown, _E re-exported)

BUSY_TIMEOUT_MS = 5000
WAL_AUTOCHECKPOINT = 4000  # pages (16 MiB of 4 KiB pages; SQLite's default is 1000)
JOURNAL_SIZE_LIMIT = 32 << 20  # bytes the WAL file keeps after a checkpoint resets it
READ_CHUNK = 2000  # rows per read query: big enough to amortise the query, small enough for the cache


class Pending(msgspec.Struct, frozen=True):
    """An event to append. ``id`` makes it idempotent; ``expected_version`` guards the subject."""

    event: Any
    id: str | None = None
    expected_version: int | None = None
    subject: str | None = None  # override of event.subject


class Recorded(msgspec.Struct, frozen=True):
    seq: int
    id: str
    time: str
    type: str
    subject: str
    version: int
    event: Any  # an events.types Struct, or Unknown
    data: bytes
    hash: bytes

    def to_json(self) -> dict[str, Any]:
        """The contract's JSON shape (`tail --json`, `export`)."""
        return {"seq": self.seq, "id": self.id, "time": self.time, "type": self.type,
                "subject": self.subject, "version": self.version, "data": data_dict(self.data)}



class EventLog:
    """One connection to the log. Not thread-safe: use one EventLog per thread."""

    def __init__(self, path: str, *, durability: str = "full", create: bool = True):
        self.path = os.path.abspath(os.path.expanduser(path))
        existed = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        schema.check_path(self.path, create)
        self.db: apsw.Connection | None = None
        try:
            if existed:  # refuse foreign / newer files through a read-only connection: nothing touched
                probe = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
                try:
                    probe.setbusytimeout(BUSY_TIMEOUT_MS)
                    schema.classify(probe, self.path)
                finally:
                    probe.close()
            self.db = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE)
            self.db.setbusytimeout(BUSY_TIMEOUT_MS)
            schema.migrate(self.db, self.path)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
            self.db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        except (SchemaError, StoreError):
            self._close_quietly()
            raise
        except apsw.Error as e:
            self._close_quietly()
            raise StoreError(f"cannot open the event log: {type(e).__name__}: {e}", op="open", path=self.path,
                             hint="is it a fleetwatch events.db?") from e
        self._id_prefix = os.urandom(8).hex()
        self._versions: dict[str, int] = {}
        self._complete = False  # True: _versions has every subject of the log
        self._known_head = -1

    def _close_quietly(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except apsw.Error:
                pass

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def checkpoint(self) -> None:
        """A passive WAL checkpoint now (never waits for readers; what a reader pins stays for
        the next one). Cheap when the WAL is already checkpointed."""
        try:
            self.db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except apsw.Error:
            pass  # busy or I/O: SQLite's automatic checkpoint stays in charge

    # ---- append ---------------------------------------------------------------------------
    def head(self) -> tuple[int, bytes]:
        rows = self.db.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchall()
        return (rows[0][0], rows[0][1]) if rows else (0, GENESIS)

    def _version(self, subject: str) -> int:
        v = self._versions.get(subject)
        if v is None and self._complete:
            return 0  # the cache holds every subject: a miss is a new subject
        if v is None:
            r = self.db.execute("SELECT max(version) FROM events WHERE subject=?", (subject,)).fetchall()
            v = r[0][0] or 0
            self._versions[subject] = v
        return v

    def _sync_versions(self, head: int) -> None:
        """Keep the subject-version cache true: fold in rows other writers appended."""
        if self._known_head == head:
            return
        if self._known_head < 0 or head - self._known_head > 10_000:
            self._versions.clear()
            self._complete = head == 0  # an empty log: every subject is new
        else:
            for subj, ver in self.db.execute(
                    "SELECT subject, max(version) FROM events NOT INDEXED WHERE seq > ? GROUP BY subject",
                    (self._known_head,)):
                self._versions[subj] = ver
        self._known_head = head

    def _known_ids(self, items: list[Any]) -> dict[str, int]:
        """{id: seq} for the batch's explicit ids that are already stored: through the partial
        index (ids not of the generated form) and, for an id of the generated form, the row at
        the seq it names."""
        ids = [p.id for p in items if type(p) is Pending and p.id is not None]
        found: dict[str, int] = {}
        if not ids:
            return found
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            found.update(self.db.execute(
                f"SELECT id, seq FROM events WHERE id IN ({','.join('?' * len(part))}) AND {schema.GIVEN_ID}",
                part))
        for id_ in ids:
            if id_ not in found and len(id_) == 32:
                try:
                    seq = int(id_[16:], 16)
                except ValueError:
                    continue
                if seq < 1 << 63 and self.db.execute("SELECT 1 FROM events WHERE seq=? AND id=?",
                                                     (seq, id_)).fetchall():
                    found[id_] = seq
        return found

    def append(self, events: Iterable[Any], now: float | datetime,
               snapshot: Callable[[list[Recorded]], dict[str, bytes]] | None = None) -> list[int]:
        """Append a batch in one transaction; returns the seqs (existing seq for a known id).

        ``events`` are event Structs or :class:`Pending`. ``snapshot`` (optional) is called
        inside the transaction with the new records and returns projection snapshots to store
        at the batch's last seq, so events and snapshots commit together.
        """
        when = iso(now)
        items = events if isinstance(events, list) else list(events)
        if not items and snapshot is None:
            return []
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
        except apsw.Error as e:
            raise AppendFailed(f"cannot start a write transaction: {e}", op="append", path=self.path,
                               hint="another process holds the log's write lock too long") from e
        try:
            seq, prev = self.head()
            self._sync_versions(seq)
            if len(items) >= 1000 and not self._complete:  # one index scan beats a query per subject
                self._versions = dict(db.execute("SELECT subject, max(version) FROM events GROUP BY subject"))
                self._complete = True
            known = self._known_ids(items)
            out: list[int] = []
            rows: list[tuple] = []
            evs: list[Any] = []
            local: dict[str, int] = {}
            versions = self._versions
            pre = self._id_prefix
            canon, sha, enc = _canon.encode, hashlib.sha256, encode_data
            for p in items:
                if type(p) is Pending:
                    ev, pid, expected = p.event, p.id, p.expected_version
                    if pid is not None:
                        had = known.get(pid)
                        if had is not None:
                            out.append(had)
                            continue
                    subject = p.subject or ev.subject
                else:
                    ev, pid, expected = p, None, None
                    subject = ev.subject
                cur = local.get(subject)
                if cur is None:
                    cur = versions.get(subject)
                    if cur is None:
                        cur = self._version(subject)
                if expected is not None and expected != cur:
                    raise VersionConflict(
                        f"subject {subject} is at version {cur}, expected {expected}",
                        subject=subject, expected=expected, actual=cur, op="append", path=self.path)
                version = cur + 1
                local[subject] = version
                seq += 1
                id_ = f"{pre}{seq:016x}" if pid is None else pid
                type_ = ev.__struct_config__.tag
                data = enc(ev)
                # == row_hash(prev, seq, id_, when, type_, subject, version, data), inlined
                prev = sha(prev + canon((seq, id_, when, type_, subject, version)) + b"\n" + data).digest()
                rows.append((seq, id_, when, type_, subject, version, data, prev))
                out.append(seq)
                if pid is not None:
                    known[pid] = seq
                if snapshot is not None:
                    evs.append(ev)
            if rows:
                db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", rows)
            if snapshot is not None:
                snaps = snapshot([Recorded(*r[:6], ev, r[6], r[7]) for r, ev in zip(rows, evs)])
                if snaps:
                    db.executemany(
                        "INSERT INTO snapshots(name, seq, data) VALUES (?,?,?) ON CONFLICT(name) "
                        "DO UPDATE SET seq=excluded.seq, data=excluded.data",
                        [(k, seq, v) for k, v in snaps.items()])
            db.execute("COMMIT")
        except BaseException as e:
            try:
                db.execute("ROLLBACK")
            except apsw.Error:
                pass
            self._versions.clear()
            self._complete = False
            self._known_head = -1
            if isinstance(e, apsw.Error):
                raise AppendFailed(f"append failed, nothing written: {type(e).__name__}: {e}",
                                   op="append", path=self.path,
                                   hint="disk full or I/O error? the batch is kept and retried") from e
            raise
        versions.update(local)
        self._known_head = seq
        return out

    # ---- snapshots ------------------------------------------------------------------------
    def snapshots(self) -> dict[str, tuple[int, bytes]]:
        return {n: (s, d) for n, s, d in self.db.execute("SELECT name, seq, data FROM snapshots")}

    def put_snapshots(self, seq: int, snaps: dict[str, bytes]) -> None:
        """Store snapshots covering ``seq`` outside an append (e.g. after a rebuild)."""
        with self.db:
            self.db.executemany(
                "INSERT INTO snapshots(name, seq, data) VALUES (?,?,?) ON CONFLICT(name) "
                "DO UPDATE SET seq=excluded.seq, data=excluded.data",
                [(k, seq, v) for k, v in snaps.items()])

    # ---- read -----------------------------------------------------------------------------
    def read(self, since: int = 0, *, types: Sequence[str] | None = None,
             subject: str | None = None, limit: int | None = None, chunk: int = READ_CHUNK,
             decode: bool = True, verify: bool = False) -> Iterator[Recorded]:
        """Events with seq > ``since`` in order; ``subject`` is a prefix. Reads in chunks, so no
        read transaction stays open while the caller works.

        ``verify=True`` also checks contiguity and the hash chain of every row from ``since``
        on (filtered-out rows included) and raises :class:`ChainBroken` at the first bad seq,
        before yielding it: a replay that trusts nothing it has not checked."""
        if verify:
            yield from self._read_verified(since, types, subject, limit, chunk, decode)
            return
        where, args = self._filters(types, subject)
        left = limit
        decs, slow, Rec = _decoders, decode_data, Recorded
        while True:
            n = chunk if left is None else min(chunk, left)
            if n <= 0:
                return
            rows = self.db.execute(
                f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ?{where} ORDER BY seq LIMIT ?",
                (since, *args, n)).fetchall()
            for seq, id_, t, ty, su, ve, da, h in rows:
                if decode:
                    d = decs.get(ty)
                    ev = d.decode(da) if d is not None else slow(ty, da)
                else:
                    ev = None
                yield Rec(seq, id_, t, ty, su, ve, ev, da, h)
            if len(rows) < n:
                return
            since = rows[-1][0]
            if left is not None:
                left -= len(rows)

    def _read_verified(self, since: int, types: Sequence[str] | None, subject: str | None,
                       limit: int | None, chunk: int, decode: bool) -> Iterator[Recorded]:
        if since <= 0:
            since, prev = 0, GENESIS
        else:
            r = self.db.execute("SELECT hash FROM events WHERE seq=?", (since,)).fetchall()
            if not r:
                raise ChainBroken(f"seq {since} is missing", seq=since, op="read", path=self.path)
            prev = r[0][0]
        want = frozenset(types) if types else None
        left = limit
        plain = want is None and not subject and left is None and decode  # the replay fast path
        canon, sha, Rec = _canon.encode, hashlib.sha256, Recorded
        decs, slow = _decoders, decode_data
        expect = since + 1
        q = f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
        while True:
            rows = self.db.execute(q, (since, chunk)).fetchall()
            seq = expect
            try:
                if plain:
                    for seq, id_, t, ty, su, ve, da, h in rows:
                        if seq != expect or sha(prev + canon((seq, id_, t, ty, su, ve)) + b"\n" + da).digest() != h:
                            break
                        prev = h
                        expect += 1
                        d = decs.get(ty)
                        yield Rec(seq, id_, t, ty, su, ve, d.decode(da) if d is not None else slow(ty, da), da, h)
                    else:
                        seq = None
                else:
                    for seq, id_, t, ty, su, ve, da, h in rows:
                        if seq != expect or sha(prev + canon((seq, id_, t, ty, su, ve)) + b"\n" + da).digest() != h:
                            break
                        prev = h
                        expect += 1
                        if want is not None and ty not in want or subject and not su.startswith(subject):
                            continue
                        if decode:
                            d = decs.get(ty)
                            ev = d.decode(da) if d is not None else slow(ty, da)
                        else:
                            ev = None
                        yield Rec(seq, id_, t, ty, su, ve, ev, da, h)
                        if left is not None:
                            left -= 1
                            if left <= 0:
                                return
                    else:
                        seq = None
            except TypeError:  # a column of the wrong type (e.g. data stored as text): altered
                pass
            if seq is not None:
                if seq != expect:
                    raise ChainBroken(f"seq {expect} is missing (next row is {seq})", seq=expect,
                                      op="read", path=self.path, hint="run `fleetwatch verify`")
                raise ChainBroken(f"seq {seq}: hash mismatch (row altered or chain broken)", seq=seq,
                                  op="read", path=self.path, hint="run `fleetwatch verify`")
            if len(rows) < chunk:
                return
            since = rows[-1][0]

    def last(self, n: int, *, types: Sequence[str] | None = None, subject: str | None = None) -> list[Recorded]:
        """The last ``n`` matching events, oldest first."""
        if n <= 0:
            return []
        return list(self.read(self.start_of_last(n, types=types, subject=subject),
                              types=types, subject=subject, limit=n))

    def start_of_last(self, n: int, *, types: Sequence[str] | None = None, subject: str | None = None) -> int:
        """The ``since`` from which ``read`` yields the last ``n`` matching events (0 if fewer)."""
        if n <= 0:
            return self.head()[0]
        where, args = self._filters(types, subject)
        rows = self.db.execute(
            f"SELECT seq FROM events WHERE seq > 0{where} ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (*args, n - 1)).fetchall()
        return rows[0][0] - 1 if rows else 0

    @staticmethod
    def _filters(types: Sequence[str] | None, subject: str | None) -> tuple[str, tuple]:
        where, args = "", ()
        if types:
            where += f" AND type IN ({','.join('?' * len(types))})"
            args += tuple(types)
        if subject:
            where += " AND subject >= ? AND subject < ?"
            args += (subject, subject + "\U0010ffff")
        return where, args

    def data_version(self) -> int:
        return self.db.execute("PRAGMA data_version").fetchall()[0][0]

    def follow(self, since: int = 0, *, types: Sequence[str] | None = None, subject: str | None = None,
               poll: float = 0.05, stop: Callable[[], bool] = lambda: False) -> Iterator[Recorded]:
        """Yield events after ``since``, then wait for new ones (``PRAGMA data_version`` polled
        every ``poll`` s; a read only when it moved, so an idle follower costs ~nothing)."""
        last_dv = None
        while not stop():
            dv = self.data_version()
            if dv != last_dv:
                last_dv = dv
                for rec in self.read(since):
                    since = rec.seq
                    if types and rec.type not in types:
                        continue
                    if subject and not rec.subject.startswith(subject):
                        continue
                    yield rec
            else:
                _time.sleep(poll)

    # ---- verify ---------------------------------------------------------------------------
    def verify(self, expect_head: tuple[int, str] | None = None, chunk: int = 20000) -> VerifyResult:
        """Walk the chain: contiguity, hash links, blob data. First problem wins (events/chain.py)."""
        return _verify(self.db, expect_head, chunk)


__all__ = ["APPLICATION_ID", "BUSY_TIMEOUT_MS", "GENESIS", "SCHEMA_VERSION", "EventLog", "Pending", "Recorded",
           "Unknown", "VerifyResult", "_E", "iso", "parse_iso", "row_hash"]
