"""The hub room's own tables (created by this code, never a schema migration of the log).

- ``fw_position`` in a host's log file: where its forwarder is, per (stream, host): the last
  seq the stream acknowledged, and the chain it belongs to (a recreated log is a new chain and
  starts again from seq 1). Written in its own small transaction; a stale position only means
  re-publishing rows the stream deduplicates (``Nats-Msg-Id``) or the hub ignores (known id).
- ``hub_origin`` in the hub's log file: every host row exactly as the host stored it, keyed by
  (host, chain, seq), with the hub seq of its hub event. Written inside the hub's append
  transaction, so a hub event and its origin commit together. :func:`verify_hosts` walks each
  host's chain from it and reports gaps per host.
"""
from __future__ import annotations

import hashlib
from typing import Any, cast
from urllib.parse import quote

import apsw
import msgspec

from events import sqlrows
from events.chain import GENESIS, _canon, row_hash

POSITION_DDL = ("CREATE TABLE IF NOT EXISTS fw_position (stream TEXT NOT NULL, host TEXT NOT NULL, "
                "chain TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (stream, host)) WITHOUT ROWID")
ORIGIN_DDL = ("CREATE TABLE IF NOT EXISTS hub_origin (host TEXT NOT NULL, chain TEXT NOT NULL, seq INTEGER NOT NULL, "
              "hub_seq INTEGER NOT NULL, id TEXT NOT NULL, time TEXT NOT NULL, type TEXT NOT NULL, "
              "subject TEXT NOT NULL, version INTEGER NOT NULL, data BLOB NOT NULL, hash BLOB NOT NULL, "
              "PRIMARY KEY (host, chain, seq)) WITHOUT ROWID")

# the row shapes read from hub_origin, stated once per query as in events/sqlrows.py (the table is
# not STRICT: a file edited by hand can hold other types, which verify_hosts reports as a bad row)
# seq, id, time, type, subject, version, data, hash, hub_seq, id of the hub event (NULL: missing)
OriginRow = tuple[int, str, str, str, str, int, bytes, bytes, int, str | None]


def read_position(db: apsw.Connection, stream: str, host: str) -> tuple[str, int]:
    """(chain, last acked seq); ("", 0) when this host never forwarded to this stream."""
    db.execute(POSITION_DDL)
    r = sqlrows.str_int_rows(db, "SELECT chain, seq FROM fw_position WHERE stream=? AND host=?", (stream, host))
    return (r[0][0], r[0][1]) if r else ("", 0)


def write_position(db: apsw.Connection, stream: str, host: str, chain: str, seq: int) -> None:
    """Record (chain, seq) as where this host's forwarder is: on the same chain only forward (a
    stopped forwarder's thread that outlived ``stop`` — still awaiting acks from a NATS that went
    away — once wrote its older position over its successor's); another chain replaces it."""
    with db:
        db.execute("INSERT INTO fw_position VALUES (?,?,?,?) ON CONFLICT(stream, host) DO UPDATE SET "
                   "chain=excluded.chain, seq=excluded.seq "
                   "WHERE excluded.chain <> fw_position.chain OR excluded.seq > fw_position.seq",
                   (stream, host, chain, seq))


def chain_id(db: apsw.Connection) -> str:
    """The log's chain id: the hex of seq 1's hash, first 16 digits ("" while the log is empty)."""
    r = db.execute("SELECT hash FROM events WHERE seq=1").fetchall()
    return r[0][0][:8].hex() if r and isinstance(r[0][0], bytes) else ""


def has_origin(db: apsw.Connection) -> bool:
    return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='hub_origin'").fetchall())


def insert_origins(db: apsw.Connection, rows: list[tuple]) -> None:
    """``rows``: (host, chain, seq, hub_seq, id, time, type, subject, version, data, hash); inside
    the caller's transaction. A (host, chain, seq) already stored keeps its first row."""
    db.executemany("INSERT OR IGNORE INTO hub_origin VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)


def held_hash(db: apsw.Connection, host: str, chain: str, seq: int) -> bytes | None:
    """The hash of the row stored for (host, chain, seq), or None (the hub creates hub_origin
    before it receives anything: no look-up of the table first, this runs twice per message)."""
    r = db.execute("SELECT hash FROM hub_origin WHERE host=? AND chain=? AND seq=?", (host, chain, seq)).fetchall()
    return cast(bytes, r[0][0]) if r else None


def tips(db: apsw.Connection, last: dict[tuple[str, str], int]) -> dict[tuple[str, str], bytes]:
    """(host, chain) -> the hash of its row at ``last[(host, chain)]`` (what the next row links to)."""
    out = {}
    for (h, c), s in last.items():
        got = held_hash(db, h, c, s)
        if got is not None:
            out[(h, c)] = got
    return out


def link_problem(o: Any, prev: bytes | None, held: bytes | None) -> str:
    """Why a received host row cannot be that host's row (empty: it can). ``prev``: the hash
    stored (or accepted) for seq - 1 (None: unknown, a gap: the link cannot be checked; seq 1
    links to the genesis); ``held``: the hash already stored for this very seq."""
    if held is not None:
        return "" if held == o.hash else "conflict"
    if o.seq == 1:
        prev = GENESIS
    if prev is None:
        return ""
    try:
        h = row_hash(prev, o.seq, o.id, o.time, o.type, o.subject, o.version, o.data)
    except (TypeError, ValueError):
        return "chain"
    if h != o.hash or (o.seq == 1 and h[:8].hex() != o.chain):
        return "chain"
    return ""


def chains_by_recency(db: apsw.Connection) -> dict[str, list[str]]:
    """host -> its chains, the one whose row the hub stored last at the end."""
    if not has_origin(db):
        return {}
    out: dict[str, list[str]] = {}
    for h, c in db.execute("SELECT host, chain FROM hub_origin GROUP BY host, chain ORDER BY max(hub_seq)"):
        out.setdefault(h, []).append(c)
    return out


def last_seqs(db: apsw.Connection) -> dict[tuple[str, str], int]:
    if not has_origin(db):
        return {}
    return {(h, c): s for h, c, s in db.execute("SELECT host, chain, max(seq) FROM hub_origin GROUP BY host, chain")}


class HostChain(msgspec.Struct):
    """One host chain as the hub holds it. ``gaps``: [first, last] seq ranges never received
    (a gap at the start means the hub never saw seq 1). ``bad_seq``: the first row whose hash
    does not follow from the previous one, or whose hub event is missing or differs."""

    host: str
    chain: str
    first: int
    last: int
    count: int
    gaps: list[list[int]] = []
    bad_seq: int | None = None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.bad_seq is None and not self.gaps


def verify_hosts(db: apsw.Connection, chunk: int = 20000) -> list[HostChain]:
    """Every host chain in ``hub_origin``: contiguity, hash links (from the genesis at seq 1,
    from the row after a gap otherwise), the chain id, and the hub event each row became."""
    out: list[HostChain] = []
    if not has_origin(db):
        return out
    canon, sha = _canon.encode, hashlib.sha256
    pairs = cast("list[tuple[str, str]]",
                 db.execute("SELECT DISTINCT host, chain FROM hub_origin ORDER BY host, chain").fetchall())
    for host, chain in pairs:
        hc = HostChain(host, chain, 0, 0, 0)
        prev: bytes | None = GENESIS
        expect, since = 1, 0
        while True:
            rows = cast("list[OriginRow]", db.execute(
                "SELECT o.seq, o.id, o.time, o.type, o.subject, o.version, o.data, o.hash, o.hub_seq, e.id "
                "FROM hub_origin o LEFT JOIN events e ON e.seq = o.hub_seq "
                "WHERE o.host=? AND o.chain=? AND o.seq > ? ORDER BY o.seq LIMIT ?", (host, chain, since, chunk)).fetchall())
            for seq, id_, t, ty, su, ve, da, h, _hub_seq, hub_id in rows:
                if hc.count == 0:
                    hc.first = seq
                if seq != expect:
                    hc.gaps.append([expect, seq - 1])
                    prev = None  # the link into this row cannot be checked
                try:
                    ok = prev is None or sha(prev + canon((seq, id_, t, ty, su, ve)) + b"\n" + da).digest() == h
                except TypeError:
                    ok = False
                if ok and seq == 1 and h[:8].hex() != chain:
                    ok = False
                if hc.bad_seq is None and not ok:
                    hc.bad_seq, hc.problem = seq, f"{host} seq {seq}: hash mismatch (row altered or chain broken)"
                elif hc.bad_seq is None and hub_id != f"{host}/{chain}/{quote(id_, safe='')}":
                    hc.bad_seq, hc.problem = seq, f"{host} seq {seq}: its hub event is missing or differs"
                prev, expect = h, seq + 1
                hc.count += 1
                hc.last = seq
            if len(rows) < chunk:
                break
            since = rows[-1][0]
        out.append(hc)
    return out


def said_gaps(db: apsw.Connection, chains: list[HostChain]) -> None:
    """Add to ``chains`` every hole a ``host.gap`` event named that ``hub_origin`` still lacks: a
    hole at a chain's end (rows the stream never delivered, nothing after them) is no gap between
    stored rows, and verify must fail on it all the same."""
    by = {(c.host, c.chain): c for c in chains}
    for (raw,) in db.execute("SELECT data FROM events WHERE type = 'host.gap'").fetchall():
        try:
            g = msgspec.json.decode(raw if isinstance(raw, (bytes, str)) else b"")
            host, chain, first, last = g["host"], g["chain"], int(g["first"]), int(g["last"])
        except (msgspec.DecodeError, KeyError, TypeError, ValueError):
            continue
        if not (isinstance(host, str) and isinstance(chain, str) and 0 < first <= last):
            continue
        held = sqlrows.one_int(db, "SELECT count(*) FROM hub_origin WHERE host=? AND chain=? AND seq BETWEEN ? AND ?",
                               (host, chain, first, last))
        c = by.get((host, chain))
        if c is None:
            c = by[(host, chain)] = HostChain(host, chain, 0, 0, 0)
            chains.append(c)
        if held < last - first + 1 and not any(a <= first and last <= b for a, b in c.gaps):
            c.gaps.append([first, last])
            c.gaps.sort()


def host_report(db: apsw.Connection) -> tuple[list[HostChain], list[str], bool]:
    """For `fleetwatch verify` on a hub's log: (chains, one line per host chain, all intact; the
    holes ``host.gap`` events named count as gaps). A log without ``hub_origin`` (a host's own
    log) gives ([], [], True)."""
    chains = verify_hosts(db)
    if chains:
        said_gaps(db, chains)
    lines = []
    for c in chains:
        gaps = ", ".join(f"{a}..{b}" if a != b else str(a) for a, b in c.gaps[:10])
        more = f" (+{len(c.gaps) - 10} more)" if len(c.gaps) > 10 else ""
        state = "ok" if c.ok else ("BROKEN" if c.bad_seq is not None else "GAPS")
        line = f"host {c.host} chain {c.chain}: {state}, {c.count} events, seq {c.first}..{c.last}"
        if c.gaps:
            line += f", missing {gaps}{more}"
        if c.bad_seq is not None:
            line += f"; {c.problem}"
        lines.append(line)
    return chains, lines, all(c.ok for c in chains)
