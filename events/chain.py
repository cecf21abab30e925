"""The hash chain of the event log: canonical row bytes, the row hash, times, and ``verify``.

Invariants
- ``hash(row) = sha256(prev_hash || canonical_header || b"\\n" || data)`` where the canonical
  header is the msgspec-JSON array ``[seq, id, time, type, subject, version]``; the genesis
  ``prev_hash`` is 32 zero bytes. The format is the same in every schema version.
- ``verify`` reads in chunks (no read transaction held between chunks) and reports the first
  problem only, in this order: a gap in ``seq``, a non-blob ``data`` or a hash mismatch (naming
  the seq); the head the caller expects, then the head anchor (``<log>.head``): a cut tail; the
  append-only guards (naming the table); every stored snapshot's binding (naming the table and
  the snapshot).
- A snapshot is bound to the chain by :func:`snapshot_digest` over its name, seq, the chain hash
  at that seq and its bytes; :func:`snapshot_problem` says why one is not to be trusted.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import apsw
import msgspec

from events import sqlrows
from events.anchor import problem as anchor_problem
from events.errors import ChainBroken
from events.timefmt import iso, parse_iso  # noqa: F401  (re-exported)
from events.types import _decoders, _encoder, decode_data

GENESIS = b"\x00" * 32
ROW_COLUMNS = "seq, id, time, type, subject, version, data, hash"

_canon = msgspec.json.Encoder()


def row_hash(prev: bytes, seq: int, id_: str, time_: str, type_: str, subject: str, version: int,
             data: bytes) -> bytes:
    """The chain hash of one row (see the module docstring)."""
    head = _canon.encode((seq, id_, time_, type_, subject, version))
    return hashlib.sha256(prev + head + b"\n" + data).digest()


def chain_rows(prev: bytes, heads: list[tuple[int, str, str, str, str, int]],
               events: list[Any]) -> list[tuple[int, str, str, str, str, int, bytes, bytes]]:
    """The rows to insert: each header (seq, id, time, type, subject, version) with its event's
    ``data`` (events/types.py ``encode_data``) and chain hash, chained from ``prev``. The headers and
    the events are each encoded in one call (``encode_lines``: compact JSON has no newline or
    carriage return of its own, so the headers split with their newline kept, the preimage's
    separator, and the events at theirs): the same bytes as one ``encode`` a row, in less time
    (``h + (d, hash)`` builds the row: cheaper than ``(*h, d, hash)``)."""
    sha = hashlib.sha256
    if len(heads) == 1:  # a batch of one (the watcher's usual commit): no list, no split
        h, d = heads[0], _encoder.encode(events[0])
        return [h + (d, sha(prev + _canon.encode(h) + b"\n" + d).digest())]
    canon = _canon.encode_lines(heads).splitlines(keepends=True)  # header + b"\n", one a row
    data = _encoder.encode_lines(events).split(b"\n")
    if len(canon) != len(heads) or len(data) != len(heads) + 1:  # never for JSON (a line each; the events'
        canon = [_canon.encode(h) + b"\n" for h in heads]     # split leaves an empty tail): a guard
        data = [_encoder.encode(e) for e in events]
    rows = []
    for h, c, d in zip(heads, canon, data):  # == row_hash(prev, *h, d), inlined
        prev = sha(prev + c + d).digest()
        rows.append(h + (d, prev))
    return rows


class VerifyResult(msgspec.Struct, frozen=True):
    ok: bool
    head_seq: int
    head_hash: str
    count: int
    bad_seq: int | None = None
    problem: str = ""
    table: str = ""      # where a problem that is not a row is: "events", "snapshots", "events.db.head"
    anchor: str = ""     # the head anchor compared ("SEQ:HASH"), "" when the log has none
    snapshots: int = 0   # stored snapshots checked


def snapshot_digest(name: str, seq: int, head: bytes, data: bytes) -> bytes:
    """What binds a stored snapshot to the chain: sha256 over its name, the seq it covers, the
    chain hash of that row and its bytes (hashed where they are, not copied after the prefix)."""
    h = hashlib.sha256(b"fleetwatch-snapshot\n%s\n%d\n%s\n" % (str(name).encode(), seq, head))
    h.update(data)
    return h.digest()


def snapshot_problem(db: apsw.Connection, name: str, seq: object, data: object, head: object, digest: object) -> str:
    """Why a stored snapshot row is not to be trusted ("" if it checks against the chain). Its
    columns are checked here, whatever sqlrows.SnapshotRow says (a file edited by hand)."""
    if head is None or digest is None:
        return "not bound to the chain (no head/digest: written before schema v3, or removed)"
    if not (type(seq) is int and type(data) is bytes and type(head) is bytes and type(digest) is bytes):
        return "a column has the wrong type (altered)"
    if snapshot_digest(name, seq, head, data) != digest:
        return f"digest does not match its bytes (altered), seq {seq}"
    if seq == 0:
        return "" if head == GENESIS else "bound to seq 0 with a non-genesis hash"
    at = sqlrows.hash_at(db, seq)
    if at is None:
        return f"covers seq {seq}, beyond the log's head"
    if at != head:
        return f"bound to another chain hash at seq {seq} (the log or the snapshot was replaced)"
    return ""


def read_verified(db: apsw.Connection, path: str, since: int, types: Sequence[str] | None, subject: str | None,
                  limit: int | None, chunk: int, decode: bool, Rec: Any) -> Iterator[Any]:
    """``EventLog.read(verify=True)``: rows after ``since`` whose contiguity and chain check,
    filtered; raises :class:`ChainBroken` at the first bad seq, before yielding it."""
    if since <= 0:
        since, prev = 0, GENESIS
    else:
        at = sqlrows.hash_at(db, since)
        if at is None:
            raise ChainBroken(f"seq {since} is missing", seq=since, op="read", path=path)
        prev = at
    want = frozenset(types) if types else None
    left = limit
    plain = want is None and not subject and left is None and decode  # the replay fast path
    canon, sha = _canon.encode, hashlib.sha256
    decs, slow = _decoders, decode_data
    expect = since + 1
    q = f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
    while True:
        rows = sqlrows.event_rows(db, q, (since, chunk))
        seq: int | None = expect
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
                                  op="read", path=path, hint="run `fleetwatch verify`")
            raise ChainBroken(f"seq {seq}: hash mismatch (row altered or chain broken)", seq=seq,
                              op="read", path=path, hint="run `fleetwatch verify`")
        if len(rows) < chunk:
            return
        since = rows[-1][0]

def verify(db: apsw.Connection, expect_head: tuple[int, str] | None = None, chunk: int = 20000, *,
           anchor: tuple[int, str] | None = None, anchor_name: str = "the head file",
           guard_problems: Sequence[str] = (), check_snapshots: bool = False, block_shift: int = 0) -> VerifyResult:
    """Walk the chain of the log behind ``db``: contiguity, hash links, blob data. First problem wins.
    ``expect_head=(seq, hex)`` (the caller's) and ``anchor`` (the head file's) each require that row
    ``seq`` exists with that hash: a truncated tail or a rewritten history is caught even when the
    remaining chain is consistent. Then ``guard_problems`` (found by the caller), with
    ``block_shift`` that ``event_types`` lists every (type, block) of the log (else ``tail --type``
    would miss events), and with ``check_snapshots`` every snapshot's binding."""
    prev, expect, count, since = GENESIS, 1, 0, 0
    canon, sha = _canon.encode, hashlib.sha256
    pairs: set[tuple[str, int]] = set()  # (type, block) of every row, for event_types
    add, bs = pairs.add, block_shift or 62  # no blocks to check: one pair per type, tiny
    while True:
        rows = sqlrows.event_rows(db, f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                              (since, chunk))
        for seq, id_, t, ty, su, ve, da, h in rows:
            add((ty, seq >> bs))
            if seq != expect:
                return VerifyResult(False, expect - 1, prev.hex(), count, expect,
                                    f"seq {expect} is missing (next row is {seq})", "events")
            if type(da) is not bytes:
                return VerifyResult(False, seq - 1, prev.hex(), count, seq,
                                    f"seq {seq}: data is {type(da).__name__}, not a blob (row altered)", "events")
            try:  # == row_hash(...), inlined
                ok = sha(prev + canon((seq, id_, t, ty, su, ve)) + b"\n" + da).digest() == h
            except TypeError:  # a column of the wrong type: altered
                ok = False
            if not ok:
                return VerifyResult(False, seq - 1, prev.hex(), count, seq,
                                    f"seq {seq}: hash mismatch (row altered or chain broken)", "events")
            prev, expect, count = h, expect + 1, count + 1
        if len(rows) < chunk:
            break
        since = rows[-1][0]
    head_seq, head_hex = expect - 1, prev.hex()
    label = f"{anchor[0]}:{anchor[1]}" if anchor is not None and anchor[0] >= 0 else ""

    def bad(bad_seq: int | None, problem: str, table: str) -> VerifyResult:
        return VerifyResult(False, head_seq, head_hex, count, bad_seq, problem, table, label)

    low = sqlrows.max_int(db, "SELECT min(seq) FROM events WHERE seq < 1")  # the walk starts at 1: never sees them
    if low is not None:
        return bad(low, f"seq {low}: a row before seq 1 (not part of the chain: inserted by hand)", "events")

    for want, who in ((expect_head, "the expected head"), (anchor, anchor_name)):
        if want is None:
            continue
        cut = anchor_problem(db, head_seq, want, who)
        if cut is not None:
            return bad(cut[0], cut[1], who if cut[0] is None else "events")
    if guard_problems:
        return bad(None, "append-only guards: " + "; ".join(guard_problems), "events")
    if block_shift:
        miss = sorted(pairs - set(sqlrows.str_int_rows(db, "SELECT type, block FROM event_types")), key=repr)[:1]
        if miss:
            return bad(None, f"type {miss[0][0]!r} in block {miss[0][1]} is not listed (tail --type would miss "
                             "it; `fleetwatch verify --restore-guards` relists)", "event_types")
    n_snap = 0
    if check_snapshots:
        for name, seq, data, at_seq, digest in sqlrows.snapshot_rows(db):
            why = snapshot_problem(db, name, seq, data, at_seq, digest)
            if why:
                return bad(None, f"snapshot {name!r}: {why}", "snapshots")
            n_snap += 1
    return VerifyResult(True, head_seq, head_hex, count, table="", anchor=label, snapshots=n_snap)


__all__ = ["GENESIS", "ROW_COLUMNS", "VerifyResult", "chain_rows", "iso", "parse_iso", "read_verified", "row_hash",
           "snapshot_digest", "snapshot_problem", "verify"]
