"""The immutable event log: one SQLite file (apsw), append-only, hash-chained.

Invariants
- ``seq`` is contiguous from 1; every append is one ``BEGIN IMMEDIATE`` transaction (one fsync
  with ``durability = "full"``), all or nothing.
- ``id`` is unique: re-appending an event whose id exists is a no-op returning the existing seq.
- ``version`` counts events per subject from 1; UNIQUE(subject, version). An append stating an
  expected version that differs raises :class:`VersionConflict`.
- ``hash`` = sha256(previous hash || canonical bytes of this row); the genesis hash is 32 zero bytes.
- Triggers refuse UPDATE and DELETE on ``events``. Projection snapshots live in ``snapshots``
  (mutable, derived) and are written in the same transaction as the events they cover.
- Readers never hold a read transaction between calls (WAL checkpoints must not stall).
"""
from __future__ import annotations

import hashlib
import os
import stat
import time as _time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import apsw
import msgspec

from events.errors import AppendFailed, ChainBroken, SchemaError, StoreError, VersionConflict
from events.types import Unknown, _E, _decoders, data_dict, decode_data, encode_data, tag_of

APPLICATION_ID = 0x46574C47  # "FWLG"
SCHEMA_VERSION = 1
GENESIS = b"\x00" * 32
BUSY_TIMEOUT_MS = 5000

_SCHEMA_V1 = """
CREATE TABLE events (
  seq     INTEGER PRIMARY KEY,
  id      TEXT    NOT NULL UNIQUE,
  time    TEXT    NOT NULL,
  type    TEXT    NOT NULL,
  subject TEXT    NOT NULL,
  version INTEGER NOT NULL,
  data    BLOB    NOT NULL,
  hash    BLOB    NOT NULL,
  UNIQUE (subject, version)
);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; UPDATE is refused'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; DELETE is refused'); END;
CREATE TABLE snapshots (
  name TEXT PRIMARY KEY,
  seq  INTEGER NOT NULL,
  data BLOB NOT NULL
);
"""
# Migrations from version N to N+1, applied in one transaction. Index = from-version.
_MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1}

_canon = msgspec.json.Encoder()


def iso(ts: float | datetime) -> str:
    """UTC ISO-8601 with milliseconds and ``Z``."""
    if isinstance(ts, datetime):
        ts = ts.timestamp()
    ms = int(round(ts * 1000))
    s, ms = divmod(ms, 1000)
    return _time.strftime("%Y-%m-%dT%H:%M:%S", _time.gmtime(s)) + f".{ms:03d}Z"


def parse_iso(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()


def row_hash(prev: bytes, seq: int, id_: str, time_: str, type_: str, subject: str, version: int,
             data: bytes) -> bytes:
    head = _canon.encode((seq, id_, time_, type_, subject, version))
    return hashlib.sha256(prev + head + b"\n" + data).digest()


def _new_ids(n: int) -> list[str]:
    """``n`` fresh ids (32 hex chars, as uuid4().hex): wall-clock ms + 52 random bits per batch +
    the index in the batch. Unique, and increasing within a batch, so the UNIQUE(id) index is
    appended to rather than written at random places."""
    pre = f"{int(_time.time() * 1000) & 0xFFFFFFFFFFF:011x}{os.urandom(7).hex()[:13]}"
    return [f"{pre}{i:08x}" for i in range(n)]


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


class VerifyResult(msgspec.Struct, frozen=True):
    ok: bool
    head_seq: int
    head_hash: str
    count: int
    bad_seq: int | None = None
    problem: str = ""


def _check_path(path: str, create: bool) -> None:
    if os.path.isdir(path):
        raise StoreError("the event log path is a directory", op="open", path=path,
                         hint="point --db / [store] path at a file, e.g. events.db")
    if os.path.exists(path):
        try:
            st = os.stat(path)
        except OSError as e:
            raise StoreError(f"cannot stat the event log: {e.strerror}", op="open", path=path) from e
        if not stat.S_ISREG(st.st_mode):
            raise StoreError("the event log path is not a regular file", op="open", path=path)
        if st.st_size:
            try:
                with open(path, "rb") as f:
                    magic = f.read(16)
            except OSError as e:
                raise StoreError(f"cannot read the event log: {e.strerror}", op="open", path=path,
                                 hint="check the file's owner and mode (fleetwatch makes it 0600)") from e
            if magic != b"SQLite format 3\x00":
                raise StoreError("not an SQLite database", op="open", path=path,
                                 hint="--db must name a fleetwatch event log or a new file")
        if not os.access(path, os.R_OK | os.W_OK):
            raise StoreError("the event log is not readable and writable by this user", op="open",
                             path=path, hint="check the file's owner and mode")
        return
    anc = os.path.dirname(path)
    while not os.path.exists(anc):
        anc = os.path.dirname(anc)
    if not os.path.isdir(anc):
        raise StoreError(f"the event log path is unusable: {anc} is not a directory", op="open", path=path,
                         hint="point --db / [store] path at a file in a folder")
    if not create:
        raise StoreError("no event log here yet", op="open", path=path,
                         hint="start the watcher (`fleetwatch run`) or pass --db")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        if not os.path.isfile(path):
            raise StoreError("cannot create the event log: a parent is not a directory", op="create",
                             path=path, hint="choose a writable path with --db or [store] path") from None
    except OSError as e:
        raise StoreError(f"cannot create the event log: {e.strerror or e}", op="create", path=path,
                         hint="choose a writable path with --db or [store] path") from e


class EventLog:
    """One connection to the log. Not thread-safe: use one EventLog per thread."""

    def __init__(self, path: str, *, durability: str = "full", create: bool = True):
        self.path = os.path.abspath(os.path.expanduser(path))
        existed = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        _check_path(self.path, create)
        self.db: apsw.Connection | None = None
        try:
            if existed:  # refuse foreign / newer files through a read-only connection: nothing touched
                probe = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
                try:
                    probe.setbusytimeout(BUSY_TIMEOUT_MS)
                    self._classify(probe)
                finally:
                    probe.close()
            self.db = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE)
            self.db.setbusytimeout(BUSY_TIMEOUT_MS)
            self._migrate()
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        except (SchemaError, StoreError):
            self._close_quietly()
            raise
        except apsw.Error as e:
            self._close_quietly()
            raise StoreError(f"cannot open the event log: {type(e).__name__}: {e}", op="open", path=self.path,
                             hint="is it a fleetwatch events.db?") from e
        self._versions: dict[str, int] = {}
        self._complete = False  # True: _versions has every subject of the log
        self._known_head = -1

    def _close_quietly(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except apsw.Error:
                pass

    # ---- schema ---------------------------------------------------------------------------
    def _classify(self, conn: apsw.Connection) -> int:
        """The schema version of the file behind ``conn`` (0 = empty, to be created); raises
        SchemaError for another application's database or a newer fleetwatch schema."""
        app = conn.execute("PRAGMA application_id").fetchall()[0][0]
        ver = conn.execute("PRAGMA user_version").fetchall()[0][0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchall()[0][0]
        if app == 0 and tables == 0:
            return 0
        if app != APPLICATION_ID:
            raise SchemaError("not a fleetwatch event log (another application's SQLite database)",
                              op="open", path=self.path, hint="pass --db with a new file name; this file was not touched")
        if ver > SCHEMA_VERSION:
            raise SchemaError(f"the log has schema version {ver}, newer than this fleetwatch ({SCHEMA_VERSION})",
                              op="open", path=self.path, hint="upgrade fleetwatch; the file was not touched")
        return ver

    def _migrate(self) -> None:
        """Bring an older schema up to SCHEMA_VERSION in one transaction (re-checked under the
        write lock, so two processes opening a new file at once do not both create it)."""
        db = self.db
        if self._classify(db) >= SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            ver = self._classify(db)
            for v in range(ver, SCHEMA_VERSION):
                db.execute(_MIGRATIONS[v])
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException as e:
            db.execute("ROLLBACK")
            if isinstance(e, apsw.Error):
                raise SchemaError(f"schema migration failed, nothing changed: {type(e).__name__}: {e}",
                                  op="migrate", path=self.path, hint="report this; the file was not touched") from e
            raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
                    "SELECT subject, max(version) FROM events WHERE seq > ? GROUP BY subject",
                    (self._known_head,)):
                self._versions[subj] = ver
        self._known_head = head

    def _known_ids(self, items: list[Any]) -> dict[str, int]:
        """{id: seq} for the batch's explicit ids that are already stored."""
        ids = [p.id for p in items if type(p) is Pending and p.id is not None]
        found: dict[str, int] = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            found.update(self.db.execute(
                f"SELECT id, seq FROM events WHERE id IN ({','.join('?' * len(part))})", part))
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
            ids = _new_ids(len(items))
            out: list[int] = []
            rows: list[tuple] = []
            evs: list[Any] = []
            local: dict[str, int] = {}
            versions = self._versions
            canon, sha, enc = _canon.encode, hashlib.sha256, encode_data
            for i, p in enumerate(items):
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
                id_ = ids[i] if pid is None else pid
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
             subject: str | None = None, limit: int | None = None, chunk: int = 5000,
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
                f"SELECT seq, id, time, type, subject, version, data, hash FROM events "
                f"WHERE seq > ?{where} ORDER BY seq LIMIT ?", (since, *args, n)).fetchall()
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
        want = set(types) if types else None
        left = limit
        canon, sha, Rec = _canon.encode, hashlib.sha256, Recorded
        decs, slow = _decoders, decode_data
        expect = since + 1
        while left is None or left > 0:
            rows = self.db.execute(
                "SELECT seq, id, time, type, subject, version, data, hash FROM events "
                "WHERE seq > ? ORDER BY seq LIMIT ?", (since, chunk)).fetchall()
            seq = expect
            try:
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
        """Walk the chain: contiguity, hash links, decodable data. First problem wins."""
        prev, expect, count, since = GENESIS, 1, 0, 0
        while True:
            rows = self.db.execute(
                "SELECT seq, id, time, type, subject, version, data, hash FROM events "
                "WHERE seq > ? ORDER BY seq LIMIT ?", (since, chunk)).fetchall()
            for seq, id_, t, ty, su, ve, da, h in rows:
                if seq != expect:
                    return VerifyResult(False, expect - 1, prev.hex(), count, expect,
                                        f"seq {expect} is missing (next row is {seq})")
                if type(da) is not bytes:
                    return VerifyResult(False, seq - 1, prev.hex(), count, seq,
                                        f"seq {seq}: data is {type(da).__name__}, not a blob (row altered)")
                if row_hash(prev, seq, id_, t, ty, su, ve, da) != h:
                    return VerifyResult(False, seq - 1, prev.hex(), count, seq,
                                        f"seq {seq}: hash mismatch (row altered or chain broken)")
                prev, expect, count = h, expect + 1, count + 1
            if len(rows) < chunk:
                break
            since = rows[-1][0]
        head_seq = expect - 1
        if expect_head is not None:
            es, eh = expect_head
            if head_seq < es:
                return VerifyResult(False, head_seq, prev.hex(), count, head_seq + 1,
                                    f"log ends at seq {head_seq}, expected head {es} (truncated tail)")
            if head_seq >= es:
                r = self.db.execute("SELECT hash FROM events WHERE seq=?", (es,)).fetchall()
                if not r or not isinstance(r[0][0], bytes) or r[0][0].hex() != eh.lower():
                    return VerifyResult(False, head_seq, prev.hex(), count, es,
                                        f"seq {es}: hash differs from the expected head")
        return VerifyResult(True, head_seq, prev.hex(), count)


__all__ = ["EventLog", "Pending", "Recorded", "VerifyResult", "iso", "parse_iso", "Unknown", "_E"]
