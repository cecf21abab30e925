"""The immutable event log: one SQLite file (apsw), append-only, hash-chained.

Invariants
- ``seq`` is contiguous from 1; every append is one ``BEGIN IMMEDIATE`` transaction (one fsync
  with ``durability = "full"``), all or nothing, on from the head (``_tail``: known while no commit moved the file).
- ``id`` is unique: re-appending an event whose id exists is a no-op returning the existing seq.
  Generated ids are ``<16 hex per connection><seq as 16 hex>`` (unique by construction, so they
  need no index entry); every other id is in the UNIQUE partial index (events/schema.py).
- ``version`` counts events per subject from 1; UNIQUE(subject, version). An append stating an
  expected version that differs raises :class:`VersionConflict`.
- ``hash`` = sha256(previous hash || canonical bytes of this row) (events/chain.py).
- Triggers refuse UPDATE, DELETE and any INSERT that is not the next seq with a new subject
  version and id (so INSERT OR REPLACE / UPSERT cannot delete a row); ``guard_problems`` finds a
  dropped or edited guard. ``append``'s own INSERTs meet them too.
- Projection snapshots (``snapshots``, derived) are written in the events' transaction with the
  chain hash at their seq and a digest: ``snapshots()`` returns only those that check.
- Every writer connection writes the head it committed to ``<log>.head`` (events/anchor.py) after
  each commit, so ``verify`` catches a cut tail without being told the head. The watcher
  (``lock=True``) holds the file's ``flock`` (events/lock.py) and checks at every commit that the
  file at its path is still the one it opened (:class:`LogReplaced` otherwise, nothing written).
- Readers (``readonly=True``) open the file read-only: a read-only copy can be read and verified.
  A damaged row (``data`` not a blob, or not decodable) is never a crash: ``read`` skips it and
  notes it in ``damaged`` (or yields it with ``event`` = :class:`Damaged` when asked).
- Readers hold no read transaction between calls. WAL: checkpoints every WAL_AUTOCHECKPOINT pages
  (the watcher's run off its ticks: runtime/checkpoint.py) or ``checkpoint()``; cut back to
  JOURNAL_SIZE_LIMIT after one (bounded while no reader pins it).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

import apsw

from events import anchor, query, schema, sqlrows
from events.chain import GENESIS, ROW_COLUMNS, VerifyResult, iso, parse_iso, read_verified, row_hash
from events.chain import chain_rows, snapshot_digest, snapshot_problem
from events.chain import verify as _verify
from events.errors import AppendFailed, GuardsMissing, StoreError, VersionConflict, append_hint, open_hint
from events.records import Damaged, Pending, Recorded, _problem, _writable, check_time, damaged_json  # noqa: F401
from events.lock import WriterLock, check_identity
from events.schema import APPLICATION_ID, BLOCK_SHIFT, SCHEMA_VERSION  # noqa: F401  (re-exported)
from events.types import Unknown, _E, _decoders, _encoder, decode_data, encode_data, tag_of  # noqa: F401  (Unknown, _E re-exported)

BUSY_TIMEOUT_MS = 5000
WAL_AUTOCHECKPOINT = 4000  # pages (16 MiB of 4 KiB pages; SQLite's default is 1000)
JOURNAL_SIZE_LIMIT = 32 << 20  # bytes the WAL file keeps after a checkpoint resets it
READ_CHUNK = 2000  # rows per read query: big enough to amortise the query, small enough for the cache
DATA_VERSION = hasattr(apsw.Connection, "data_version")  # apsw >= 3.47; older: append reads its head each time


class EventLog:
    """One connection to the log. Not thread-safe: use one EventLog per thread."""

    def __init__(self, path: str, *, durability: str = "full", create: bool = True, readonly: bool = False,
                 lock: bool = False, parents: bool = True):
        """Open (``create``: make) the log at ``path``. ``readonly``: a read-only connection, no
        migration, nothing written (also chosen when the file is not writable and ``create`` is
        off). ``lock``: hold the writer lock of the file for the connection's lifetime
        (:class:`WriterLocked` if another process holds it). ``parents``: create missing folders."""
        self.given = os.path.abspath(os.path.expanduser(path))  # the name identity is checked against
        self.path = os.path.realpath(self.given)                # symlinks resolved: one file, one WAL, one lock
        if not create and not readonly and os.path.exists(self.path) and not _writable(self.path):
            readonly = True
        self.readonly = readonly
        existed = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        schema.check_path(self.path, create and not readonly, readonly=readonly, parents=parents)
        self.db: apsw.Connection  # open until close(); its rows are read through events/sqlrows.py
        self._lock: WriterLock | None = None
        self.damaged: dict[int, str] = {}          # seq -> problem, of rows read() skipped
        self.snapshot_problems: dict[str, str] = {}  # name -> why, of snapshots() refused
        try:
            if existed and not readonly:  # refuse foreign / newer files through a read-only connection:
                # nothing touched (a reader's own connection is read-only: it classifies the file below)
                probe = schema.open_readonly(self.path)
                try:
                    probe.setbusytimeout(BUSY_TIMEOUT_MS)
                    self.schema_version = schema.classify(probe, self.path)
                finally:
                    probe.close()
            if readonly:
                self.db = schema.open_readonly(self.path)
                self.db.setbusytimeout(BUSY_TIMEOUT_MS)
                self.schema_version = schema.classify(self.db, self.path)
                if self.schema_version == 0:  # created, not yet initialised: read as an empty log
                    self.db.close()
                    self.db = apsw.Connection(":memory:")
                    schema.migrate(self.db, self.path)
                    self.schema_version = schema.SCHEMA_VERSION
            else:
                if lock:
                    self._lock = WriterLock(self.path).acquire()
                self.db = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE)
                self.db.setbusytimeout(BUSY_TIMEOUT_MS)
                schema.migrate(self.db, self.path)
                self.schema_version = schema.SCHEMA_VERSION
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
                self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
                self.db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
                if lock:
                    self.check_guards()  # the watcher never writes to a log whose guards were removed
        except BaseException as e:
            self._close_quietly()
            if isinstance(e, apsw.Error):
                raise StoreError(f"cannot open the event log: {type(e).__name__}: {e}", op="open", path=self.path,
                                 hint=open_hint(e)) from e
            raise
        st = os.fstat(cast(int, self._lock.fd)) if self._lock is not None else os.stat(self.path)
        self.identity = (st.st_dev, st.st_ino)
        self._anchor = None if readonly else anchor.HeadFile(self.path, lambda: self.db)  # keep_if_lost
        self._cur = self.db.cursor()  # append's BEGIN, INSERTs and COMMIT (one cursor, not one a call)
        self._id_prefix = os.urandom(8).hex()
        self._versions: dict[str, int] = {}
        self._complete = False  # True: _versions has every subject of the log
        self._known_head = -1
        self._blocks: set[tuple[str, int]] = set()  # (type, block) pairs known to be in event_types
        self._committed: tuple[int, bytes, int] | None = None  # (seq, hash, data version) of its last commit: _tail

    def _close_quietly(self) -> None:
        if hasattr(self, "db"):
            try:
                self.db.close()
            except apsw.Error:
                pass
        if self._lock is not None:
            self._lock.release()

    def close(self) -> None:
        """Close the connection, then (the watcher) drop the lock and the head file's descriptor.
        If the file at the path is no longer this log, the ``-wal``/``-shm``/``.head`` left at the
        path are this log's: they are set aside so they never meet the next file there."""
        lost = False
        if self._lock is not None:  # the file at our own (resolved) name: gone or another one?
            try:
                st = os.stat(self.path)
                lost = (st.st_dev, st.st_ino) != self.identity
            except OSError:
                lost = True
        if lost:  # commits still in the WAL go into the file we have open (moved: kept there)
            self.checkpoint("TRUNCATE")
        try:
            self.db.close()
        finally:
            if self._anchor is not None:
                self._anchor.close()
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            if lost:
                schema.set_aside_orphans(self.path)

    # ---- identity, guards, anchor -------------------------------------------------------------
    def check_identity(self) -> None:
        """:class:`LogReplaced` when the file at the log's path is not the one opened (events/lock.py)."""
        check_identity(self.given, self.identity)

    def guard_problems(self) -> list[str]:
        """The append-only guards that are missing or differ from the ones fleetwatch created."""
        if self.schema_version < schema.SCHEMA_VERSION:
            return []  # a read-only old log: its guards are the old ones, checked after migration
        return schema.guard_problems(self.db)

    def check_guards(self) -> None:
        """Raise :class:`GuardsMissing` (the fix in the hint) unless every guard is in place."""
        problems = self.guard_problems()
        if problems:
            raise GuardsMissing("the event log's append-only guards were removed or changed: "
                                + "; ".join(problems), problems=problems, op="open", path=self.path,
                                hint="put them back and check the rows: `fleetwatch verify --restore-guards`")

    def restore_guards(self) -> None:
        schema.restore_guards(self.db)
    def anchor(self) -> tuple[int, str] | None:
        """The head (seq, hex hash) recorded in ``<log>.head`` by the last writer, or None."""
        return anchor.read(self.path)

    def head_label(self) -> str:
        """``SEQ:HASH8`` of the current head, as carried in push bodies ("log head 1234:9f2c1a2b")."""
        seq, h = self.head()
        return anchor.label(seq, h)

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_autocheckpoint(self, pages: int) -> None:  # WAL pages that make a commit checkpoint itself
        self.db.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")

    def checkpoint(self, mode: str = "PASSIVE") -> None:
        """A WAL checkpoint now (PASSIVE never waits for readers: what one pins stays for the next)."""
        try:
            self.db.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        except apsw.Error:
            pass  # busy or I/O: SQLite's automatic checkpoint stays in charge

    # ---- append ---------------------------------------------------------------------------
    def head(self) -> tuple[int, bytes]:
        return sqlrows.head(self.db) or (0, GENESIS)

    def _tail(self) -> tuple[int, bytes]:
        """The head inside append's transaction: the one this connection committed last while the
        file's data version (``SQLITE_FCNTL_DATA_VERSION``: moved by every commit, any connection's,
        seen at ``BEGIN IMMEDIATE`` under the write lock; not by a rollback) is the one it left, else read."""
        last = self._committed
        if last is not None and last[2] == self.db.data_version():
            return last[0], last[1]
        return self.head()

    def _version(self, subject: str) -> int:
        v = self._versions.get(subject)
        if v is None and self._complete:
            return 0  # the cache holds every subject: a miss is a new subject
        if v is None:
            v = sqlrows.max_int(self.db, "SELECT max(version) FROM events WHERE subject=?", (subject,)) or 0
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
            self._versions.update(sqlrows.str_int_rows(
                self.db, "SELECT subject, max(version) FROM events NOT INDEXED WHERE seq > ? GROUP BY subject",
                (self._known_head,)))
        self._known_head = head

    def append(self, events: Iterable[Any], now: float | datetime,
               snapshot: Callable[[list[Recorded]], dict[str, bytes]] | None = None) -> list[int]:
        """Append a batch in one transaction; returns the seqs (existing seq for a known id).

        ``events`` are event Structs or :class:`Pending` (whose ``time``, when set, is that event's
        time instead of ``now``: the hub's copy of a host event keeps the host's). ``snapshot`` (optional) is called
        inside the transaction with the new records and returns projection snapshots to store
        at the batch's last seq, so events and snapshots commit together."""
        # Speed (issue 19): with durability full each step after the fsync runs cache-cold (2-3x its
        # CPU), so after COMMIT only the data version and the anchor's pwrite are left: the caches
        # are set before it (the except clears them all); one kept cursor (db.execute makes one a call).
        when = iso(now)
        items = events if isinstance(events, list) else list(events)
        if not items and snapshot is None:
            return []
        if self._lock is not None:
            self.check_identity()  # never append to a file that is no longer the log at our path
        db, cur = self.db, self._cur
        try:
            cur.execute("BEGIN IMMEDIATE")
        except apsw.Error as e:
            raise AppendFailed(f"cannot start a write transaction: {e}", op="append", path=self.path,
                               hint="another process holds the log's write lock too long") from e
        try:
            seq, prev = self._tail()
            if seq != self._known_head:
                self._sync_versions(seq)
            if len(items) >= 1000 and not self._complete:  # one index scan beats a query per subject
                self._versions = dict(sqlrows.str_int_rows(db, "SELECT subject, max(version) FROM events GROUP BY subject"))
                self._complete = True
            known: dict[str, int] = {}  # given ids already stored: looked up at the first given id
            looked = False
            out: list[int] = []
            heads: list[tuple[int, str, str, str, str, int]] = []  # (seq, id, time, type, subject, version)
            evs: list[Any] = []
            local: dict[str, int] = {}
            versions = self._versions
            pre = self._id_prefix
            for p in items:
                at = when
                if type(p) is Pending:
                    ev, pid, expected = p.event, p.id, p.expected_version
                    if p.time is not None:
                        at = iso(p.time)
                    if pid is not None:
                        if not looked:  # the batch's given ids, in one look-up
                            known, looked = query.known_ids(db, [q.id for q in items if type(q) is Pending and q.id]), True
                        had = known.get(pid)
                        if had is not None:
                            out.append(had)
                            continue
                    subject = p.subject or ev.subject
                else:
                    ev, pid, expected = p, None, None
                    subject = ev.subject
                cur_v = local.get(subject)
                if cur_v is None:
                    cur_v = versions.get(subject)
                    if cur_v is None:
                        cur_v = self._version(subject)
                if expected is not None and expected != cur_v:
                    raise VersionConflict(
                        f"subject {subject} is at version {cur_v}, expected {expected}",
                        subject=subject, expected=expected, actual=cur_v, op="append", path=self.path)
                version = cur_v + 1
                local[subject] = version
                seq += 1
                heads.append((seq, f"{pre}{seq:016x}" if pid is None else pid, at, tag_of(ev), subject, version))
                evs.append(ev)
                out.append(seq)
                if pid is not None:
                    known[pid] = seq
            rows = chain_rows(prev, heads, evs)
            if rows:
                prev = rows[-1][7]
                cur.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", rows)
                h = heads[0]  # (type, block) pairs; one row: no set comprehension (a frame in 3.11)
                blocks = {(h[3], h[0] >> BLOCK_SHIFT)} if len(heads) == 1 else {(h[3], h[0] >> BLOCK_SHIFT) for h in heads}
                blocks -= self._blocks  # usually empty
                if blocks:
                    cur.executemany("INSERT OR IGNORE INTO event_types VALUES (?,?)", blocks)
                    if len(self._blocks) > 50_000:
                        self._blocks.clear()
                    self._blocks |= blocks
            recs = [Recorded(s, i, t, ty, su, v, ev, d, h)  # unpacked: half the cost of a slice
                    for (s, i, t, ty, su, v, d, h), ev in zip(rows, evs)] if snapshot else []
            if snapshot is not None:
                snaps = snapshot(recs)
                if snaps:
                    self._store_snapshots(seq, prev, snaps)
            versions.update(local)
            self._known_head = seq
            anc = self._anchor if rows else None
            line = anchor.line(seq, prev) if anc is not None else b""
            cur.execute("COMMIT")
        except BaseException as e:
            try:
                db.execute("ROLLBACK")
            except apsw.Error:
                pass
            self._versions.clear()
            self._complete = False
            self._known_head = -1
            self._committed = None
            self._blocks.clear()  # pairs of this batch were added before COMMIT
            if isinstance(e, apsw.Error):
                raise AppendFailed(f"append failed, nothing written: {type(e).__name__}: {e}",
                                   op="append", path=self.path,
                                   hint=append_hint(e)) from e
            raise
        if DATA_VERSION:
            self._committed = (seq, prev, db.data_version())  # after COMMIT: the version that commit left
        if anc is not None:
            anc.write_line(line)
        return out

    # ---- snapshots ------------------------------------------------------------------------
    def _store_snapshots(self, seq: int, head: bytes, snaps: dict[str, bytes]) -> None:
        dig = snapshot_digest
        self.db.executemany(
            "INSERT INTO snapshots(name, seq, data, head, digest) VALUES (?,?,?,?,?) ON CONFLICT(name) "
            "DO UPDATE SET seq=excluded.seq, data=excluded.data, head=excluded.head, digest=excluded.digest",
            [(k, seq, v, head, dig(k, seq, head, v)) for k, v in snaps.items()])

    def snapshots(self, names: Iterable[str] | None = None) -> dict[str, tuple[int, bytes]]:
        """The stored snapshots that check against the chain: {name: (seq, data)}. One whose
        digest does not match its bytes, or whose seq is not in the log with the hash it was
        bound to, is left out (its reason in ``snapshot_problems``): callers replay instead.
        ``names``: only those (a reader that shows a few projections reads and hashes no others)."""
        self.snapshot_problems = {}
        if self.schema_version < 3:
            return {}  # unbound snapshots of an old log (read-only): never trusted
        out: dict[str, tuple[int, bytes]] = {}
        for name, seq, data, head, digest in sqlrows.snapshot_rows(self.db, None if names is None else tuple(names)):
            why = snapshot_problem(self.db, name, seq, data, head, digest)
            if why:
                self.snapshot_problems[str(name)] = why
            else:
                out[name] = (seq, data)
        return out

    def put_snapshots(self, seq: int, snaps: dict[str, bytes]) -> None:
        """Store snapshots covering ``seq`` outside an append (e.g. after a rebuild)."""
        with self.db:
            self._store_snapshots(seq, sqlrows.hash_at(self.db, seq) or GENESIS, snaps)

    # ---- read -----------------------------------------------------------------------------
    def read(self, since: int = 0, *, types: Sequence[str] | None = None,
             subject: str | None = None, limit: int | None = None, chunk: int = READ_CHUNK,
             decode: bool = True, verify: bool = False, damaged: str = "skip") -> Iterator[Recorded]:
        """Events with seq > ``since`` in order; ``subject`` is a prefix. Reads in chunks, so no
        read transaction stays open while the caller works (a rowid range scan: forward reads
        never take an index and sort).

        A row that does not decode is not a crash: ``damaged="skip"`` leaves it out and notes
        ``self.damaged[seq] = problem``; ``"yield"`` yields it with ``event=Damaged(problem)``.

        ``verify=True`` also checks contiguity and the hash chain of every row from ``since``
        on (filtered-out rows included) and raises :class:`ChainBroken` at the first bad seq,
        before yielding it: a replay that trusts nothing it has not checked."""
        if verify:  # the generator itself, not one more around it: a replay yields every row through here
            return read_verified(self.db, self.path, since, types, subject, limit, chunk, decode, Recorded)
        return self._read(since, types, subject, limit, chunk, decode, damaged == "yield",
                          f"SELECT {ROW_COLUMNS} FROM events NOT INDEXED WHERE seq > ?")

    def _read(self, since: int, types: Sequence[str] | None, subject: str | None, limit: int | None,
              chunk: int, decode: bool, yield_damaged: bool, select: str) -> Iterator[Recorded]:
        where, args = query.filters(types, subject)
        left = limit
        decs, slow, Rec = _decoders, decode_data, Recorded
        last_t = None  # the last time checked: the events of one append share it
        while True:
            n = chunk if left is None else min(chunk, left)
            if n <= 0:
                return
            rows = sqlrows.event_rows(self.db, f"{select}{where} ORDER BY seq LIMIT ?", (since, *args, n))
            for seq, id_, t, ty, su, ve, da, h in rows:
                if decode:
                    try:
                        if type(da) is not bytes:
                            raise TypeError
                        d = decs.get(ty)
                        ev: Any = d.decode(da) if d is not None else slow(ty, da)
                        if t != last_t:  # a time the folds cannot parse: damaged too (found: run crashed)
                            check_time(t)
                            last_t = t
                    except Exception as e:  # a damaged row: reported by seq, never a traceback
                        why = _problem(da, e)
                        if not yield_damaged:
                            self.damaged[seq] = why
                            continue
                        ev = Damaged(why)
                else:
                    ev = None
                yield Rec(seq, id_, t, ty, su, ve, ev, da, h)
            if len(rows) < n:
                return
            since = rows[-1][0]
            if left is not None:
                left -= len(rows)

    def last(self, n: int, *, types: Sequence[str] | None = None, subject: str | None = None,
             exact: bool = False, damaged: str = "skip") -> list[Recorded]:
        """The last ``n`` matching events, oldest first (``exact``: ``subject`` is a whole subject,
        not a prefix). Found through the type and subject indexes (events/query.py), so a rare or
        absent type costs index look-ups, not a scan."""
        seqs = query.last_seqs(self.db, n, types, subject, exact)
        if not seqs:
            return []
        out: list[Recorded] = []
        for i in range(0, len(seqs), 500):
            part = seqs[i:i + 500]
            out += self._read(0, None, None, None, len(part), True, damaged == "yield",
                              f"SELECT {ROW_COLUMNS} FROM events WHERE seq IN ({','.join(map(str, part))}) "
                              f"AND seq > ?")
        return out

    def start_of_last(self, n: int, *, types: Sequence[str] | None = None, subject: str | None = None) -> int:
        """The ``since`` from which ``read`` yields the last ``n`` matching events (0 if fewer)."""
        if n <= 0:
            return self.head()[0]
        seqs = query.last_seqs(self.db, n, types, subject)
        return seqs[0] - 1 if len(seqs) >= n else 0

    def data_version(self) -> int:
        return sqlrows.one_int(self.db, "PRAGMA data_version")

    def follow(self, since: int = 0, *, types: Sequence[str] | None = None, subject: str | None = None,
               poll: float = 0.05, stop: Callable[[], bool] = lambda: False,
               yield_damaged: bool = False) -> Iterator[Recorded]:
        """Yield events after ``since``, then wait for new ones (``PRAGMA data_version`` polled
        every ``poll`` s; a read only when it moved, so an idle follower costs ~nothing; one stat a
        poll: :class:`LogReplaced` once the file at the path is not this one, deleted or replaced)."""
        return query.follow(self.data_version, lambda s: self.read(s, damaged="yield" if yield_damaged else "skip"),
                            since, types, subject, poll, stop, self.check_identity)

    # ---- verify ---------------------------------------------------------------------------
    def verify(self, expect_head: tuple[int, str] | None = None, chunk: int = 20000, *,
               use_anchor: bool = True) -> VerifyResult:
        """Walk the chain (contiguity, hash links, blob data), then the caller's head, the head
        anchor ``<log>.head`` (unless ``use_anchor`` is off), the guards and every snapshot's
        binding. First problem wins (events/chain.py)."""
        return _verify(self.db, expect_head, chunk, anchor=self.anchor() if use_anchor else None,
                       anchor_name=os.path.basename(anchor.path_of(self.path)),
                       guard_problems=self.guard_problems(), check_snapshots=self.schema_version >= 3,
                       block_shift=BLOCK_SHIFT if self.schema_version >= 3 else 0)

    def backup(self, dest: str, as_is: bool = False) -> VerifyResult:
        """A consistent copy at ``dest`` through SQLite's online backup API (one read transaction:
        every commit up to a point, WAL included), written to a temporary file beside ``dest``,
        verified, given its own head anchor, then renamed into place (mode 0600). ``dest`` must not
        exist. Raises StoreError (nothing left) when the copy does not verify, unless ``as_is``."""
        from events.backup import backup_to  # only `backup` needs it: not loaded by every reader
        return backup_to(self, dest, type(self), as_is)


__all__ = ["APPLICATION_ID", "BUSY_TIMEOUT_MS", "GENESIS", "SCHEMA_VERSION", "Damaged", "EventLog", "Pending", "Recorded",
           "Unknown", "VerifyResult", "_E", "damaged_json", "iso", "parse_iso", "row_hash"]
