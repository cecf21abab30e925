"""The hash chain of the event log: canonical row bytes, the row hash, times, and ``verify``.

Invariants
- ``hash(row) = sha256(prev_hash || canonical_header || b"\\n" || data)`` where the canonical
  header is the msgspec-JSON array ``[seq, id, time, type, subject, version]``; the genesis
  ``prev_hash`` is 32 zero bytes. The format is the same in every schema version.
- ``verify`` reads in chunks (no read transaction held between chunks) and reports the first
  problem only: a gap in ``seq``, a non-blob ``data`` or a hash mismatch.
"""
from __future__ import annotations

import hashlib

import apsw
import msgspec

from events.timefmt import iso, parse_iso  # noqa: F401  (re-exported)

GENESIS = b"\x00" * 32
ROW_COLUMNS = "seq, id, time, type, subject, version, data, hash"

_canon = msgspec.json.Encoder()
def row_hash(prev: bytes, seq: int, id_: str, time_: str, type_: str, subject: str, version: int,
             data: bytes) -> bytes:
    """The chain hash of one row (see the module docstring)."""
    head = _canon.encode((seq, id_, time_, type_, subject, version))
    return hashlib.sha256(prev + head + b"\n" + data).digest()


class VerifyResult(msgspec.Struct, frozen=True):
    ok: bool
    head_seq: int
    head_hash: str
    count: int
    bad_seq: int | None = None
    problem: str = ""


def verify(db: apsw.Connection, expect_head: tuple[int, str] | None = None, chunk: int = 20000) -> VerifyResult:
    """Walk the chain of the log behind ``db``: contiguity, hash links, blob data. First problem wins.
    ``expect_head=(seq, hex)`` also requires that row ``seq`` exists with that hash (a truncated
    tail or a rewritten history is caught even when the remaining chain is consistent)."""
    prev, expect, count, since = GENESIS, 1, 0, 0
    canon, sha = _canon.encode, hashlib.sha256
    while True:
        rows = db.execute(f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                          (since, chunk)).fetchall()
        for seq, id_, t, ty, su, ve, da, h in rows:
            if seq != expect:
                return VerifyResult(False, expect - 1, prev.hex(), count, expect,
                                    f"seq {expect} is missing (next row is {seq})")
            if type(da) is not bytes:
                return VerifyResult(False, seq - 1, prev.hex(), count, seq,
                                    f"seq {seq}: data is {type(da).__name__}, not a blob (row altered)")
            try:  # == row_hash(...), inlined
                ok = sha(prev + canon((seq, id_, t, ty, su, ve)) + b"\n" + da).digest() == h
            except TypeError:  # a column of the wrong type: altered
                ok = False
            if not ok:
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
        r = db.execute("SELECT hash FROM events WHERE seq=?", (es,)).fetchall()
        if not r or not isinstance(r[0][0], bytes) or r[0][0].hex() != eh.lower():
            return VerifyResult(False, head_seq, prev.hex(), count, es,
                                f"seq {es}: hash differs from the expected head")
    return VerifyResult(True, head_seq, prev.hex(), count)


__all__ = ["GENESIS", "ROW_COLUMNS", "VerifyResult", "iso", "parse_iso", "row_hash", "verify"]
