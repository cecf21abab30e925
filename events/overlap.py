"""A big batch's COMMIT in a short-lived thread while the caller works on the batch's records.

``EventLog.append(..., during=f)``: ``f(records)`` is the caller's work on the rows it appends —
the watcher folds them into its projections. For a batch of at least ``ROWS`` rows the COMMIT
(SQLite writing the WAL and, with durability full, its fsync) runs in a thread of its own while
``f`` runs here: apsw releases the GIL for every call into SQLite, so the two overlap on two
cores. A first tick at 50,000 agents: its commit stage ~600 -> ~550 ms (the COMMIT is ~40-50 ms
of it; at 10,000 agents 6-7 ms), sixteenth session, A/B in one tree. Below ``ROWS`` a thread's
start and hand-over cost more than they hide: ``f`` runs before the COMMIT, in the transaction.

Invariants:
- ``f`` runs exactly once per append that reaches its COMMIT, and never touches the log's
  connection (the thread holds it until it is joined; apsw would raise ThreadingViolation).
- ``commit_during`` returns or raises only once both are over: the thread is always joined.
- A failed COMMIT wins: its exception is raised (append rolls back and raises AppendFailed,
  nothing written), so what ``f`` did must be dropped by the caller — as for every AppendFailed.
- ``f`` raising with the COMMIT done: the batch IS committed (with ``ROWS`` or more rows) and
  ``f``'s exception propagates; below ``ROWS`` it ran inside the transaction, which rolls back.
  Either way the append's caches are cleared and its next call reads the head afresh.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

ROWS = 1000  # rows from which the COMMIT runs beside ``during`` (a thread's start + hand-over: ~0.1 ms)


def commit_during(cur: Any, during: Callable[[list[Any]], Any] | None, recs: list[Any], rows: int) -> None:
    """``cur.execute("COMMIT")`` and ``during(recs)``: side by side from ``ROWS`` rows, else
    ``during`` first (inside the transaction), then the COMMIT."""
    failed: list[BaseException] = []

    def commit() -> None:
        try:
            cur.execute("COMMIT")
        except BaseException as e:  # handed to the caller's thread below
            failed.append(e)

    t: threading.Thread | None = None
    if during is not None and rows >= ROWS:
        t = threading.Thread(target=commit, name="fleetwatch-commit")
        try:
            t.start()
        except RuntimeError:  # no thread to be had (a process or memory limit): one after the other
            t = None
    if during is None or t is None:
        if during is not None:
            during(recs)
        cur.execute("COMMIT")
        return
    try:
        during(recs)
    finally:
        t.join()
        if failed:
            raise failed[0]
