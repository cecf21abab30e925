"""`rebuild` in two processes: the projections are independent folds over one log, so a worker
process folds one group of them while this process folds the others. Kept because it pays: the
rebuild of 1M events takes ~40 % less wall time on two cores than in one process (docs/bench.md).

- This process reads every row up to the head it found at the start (``upto``) but those of the
  types only the worker's projections fold (``worker_only``), and the worker reports the damaged
  rows among its own: together they skip and report the same damaged rows as the one-process
  replay, and the last seq is the later of the two sides' (every row either side did not read is
  one the other did). It folds the projections not in ``WORKER``, the worker the others: a split
  chosen to even the two halves' CPU time (docs/bench.md has the figures). Both read through
  ``events.replay`` (only the columns the folds read).
- The worker (``python -m watcher.runtime.rebuild_par PATH UPTO NAMES``) opens the log read-only,
  reads only the event types its group folds, up to ``upto`` (a damaged row skipped as here), and
  writes one msgpack document to stdout: its encoded states (the snapshot bytes this process
  would encode), the chain hash of row ``upto``, the rows it skipped as damaged and its last seq.
- Trust: row ``upto`` must carry the same chain hash here (the chain binds every row before it:
  the same log, the same prefix). Anything else — the worker failing, killed, hung (it gets twice
  this process's own folding time, at least WAIT_MIN_S), flooding (over MAX_OUT bytes), its
  output unreadable, another hash — and this process folds the worker's group itself, reading
  every row: the answer is always the one-process replay's, only slower.
- An orphan stops: the worker is told this process's pid and ends (exit 1, nothing written)
  as soon as its parent is another one — this process killed (``kill -9`` a `rebuild`: its
  worker would otherwise fold on for seconds, a core's worth, for nobody), checked at its start
  and every ORPHAN_CHECK batches (one ``getppid`` each).
Which projections go where is ``WORKER``; :func:`rebuild` decides when (not for ``--check``,
which compares at each snapshot's seq, nor for a log under ``MIN_EVENTS``, nor on one core:
then it is ``watcher.runtime.state.rebuild``, one process).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from itertools import takewhile
from typing import Any

import msgspec

from events import sqlrows
from events.log import EventLog
from events.replay import replay_batches
from watcher.runtime.child import cores, read_capped

WORKER = ("report", "fleet", "dod", "runs", "missions", "fanout", "plans")   # ~half the fold CPU (notify and swarms here)
MIN_EVENTS = 200_000                          # below this a second interpreter's start-up (~0.1 s) is not worth it
MAX_OUT = 256 << 20                           # bytes of worker output taken (its states: ~1 MB at 1M events, ~40 MB at 50k agents)
WAIT_MIN_S = 30.0                             # the worker may take twice this process's own folding, or this
BATCH = 100                                   # records per fold batch (fold_group: small enough for the L2 cache)
CHUNK = 2000                                  # rows per read query (fold_group's docstring)
ORPHAN_CHECK = 16                             # the worker looks at its parent every this many batches


class Orphaned(Exception):
    """The worker's parent is gone: nobody will read its answer."""


class Result(msgspec.Struct):
    states: dict[str, bytes]
    upto_hash: bytes = b""          # the chain hash of row ``upto`` in the worker's file (b"": none)
    damaged: dict[int, str] = {}    # the rows it read and skipped (seq -> problem), as log.damaged
    seq: int = 0                    # the last row it folded


def worthwhile(log: EventLog) -> bool:
    return cores() >= 2 and log.head()[0] >= MIN_EVENTS


def rebuild(log: EventLog, check: bool = False, store: bool = True, parallel: bool = True) -> tuple[Any, Any]:
    """``watcher.runtime.state.rebuild`` (same arguments, same answer), with half the folds in a
    second process when ``parallel`` and it pays (see the module docstring)."""
    from watcher.runtime import state

    if check or not parallel or not worthwhile(log):
        return state.rebuild(log, check=check, store=store)
    p, encoded = rebuild_parallel(log)
    if store:
        log.put_snapshots(p.seq, encoded)
    return p, None


def fold_group(log: EventLog, names: tuple[str, ...], upto: int, types: bool,
               parent: int | None = None, exclude: tuple[str, ...] = ()) -> Any:
    """Projections of ``names`` folded over the rows up to ``upto``. ``types``: read only the
    event types those projections fold (the worker); else every row but those of ``exclude``.
    ``parent`` (the worker): :class:`Orphaned` is raised once this process's parent is no longer
    that pid.

    Folded in batches of BATCH records, small enough to stay in a core's L2 cache while each fold
    walks the batch; read CHUNK rows a query (docs/bench.md: why these sizes)."""
    from projections.base import registry
    from watcher.runtime.state import Projections, gc_paused

    p = Projections(registry(names))
    wanted = None
    if types:
        sets = [m.TYPES for m in p.mods.values()]
        wanted = None if any(s is None for s in sets) else sorted(set().union(*(s for s in sets if s is not None)))
    with gc_paused():
        n = 0
        for batch in replay_batches(log, 0, types=wanted, chunk=CHUNK, ids=p.reads_id, size=BATCH,
                                    exclude=() if types else exclude):
            n += 1
            if parent is not None and n % ORPHAN_CHECK == 0 and os.getppid() != parent:
                raise Orphaned(parent)
            if batch[-1].seq > upto:   # rows appended since upto: not ours (one check a batch, not a row)
                p.fold_many(list(takewhile(lambda r: r.seq <= upto, batch)))
                break
            p.fold_many(batch)
    return p


def start_worker(path: str, upto: int, python: str = sys.executable) -> subprocess.Popen | None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)}
    try:
        return subprocess.Popen([python, "-m", "watcher.runtime.rebuild_par", path, str(upto), ",".join(WORKER),
                                 str(os.getpid())],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    except OSError:
        return None


def worker_result(proc: subprocess.Popen | None, timeout: float = 3600.0) -> Result | None:
    """The worker's document, or None if it failed in any way (the caller folds its group):
    it exited non-zero, wrote something else, wrote more than MAX_OUT bytes (killed), or did not
    finish within ``timeout`` s (killed)."""
    if proc is None or proc.stdout is None:
        return None
    out = None
    try:
        out = read_capped(proc.stdout.fileno(), MAX_OUT, timeout)   # a hung or flooding worker: None
    finally:
        if out is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
    if out is None or proc.returncode != 0:
        return None
    try:
        return msgspec.msgpack.decode(out, type=Result)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def rebuild_parallel(log: EventLog, python: str = sys.executable) -> tuple[Any, dict[str, bytes]]:
    """(every projection replayed from seq 1, their encoded states): the worker's group folded
    in a second process when it answers for the same log, else here."""
    from projections.base import decode_state, registry
    from watcher.runtime.state import Projections

    upto = log.head()[0]
    proc = start_worker(log.path, upto, python)
    mods = registry()
    local = tuple(n for n in mods if n not in WORKER)
    t0 = time.monotonic()
    mine = fold_group(log, local, upto, types=False, exclude=worker_only(mods) if proc is not None else ())
    got = worker_result(proc, timeout=max(WAIT_MIN_S, 2 * (time.monotonic() - t0)))  # its half, at most twice ours
    p = Projections()
    p.seq = mine.seq
    encoded = mine.encoded()
    if got is not None and set(got.states) == set(WORKER) and got.upto_hash == row_hash_at(log, upto):
        for n in WORKER:
            p.states[n] = decode_state(p.mods[n], got.states[n])
        encoded.update(got.states)
        p.seq = max(p.seq, got.seq)
        damaged = {**got.damaged, **log.damaged}   # every row read by one of the two, in seq order
    else:  # the worker did not answer (or not for this log): its group is folded here, from every row
        theirs = fold_group(log, WORKER, upto, types=False)
        p.states.update(theirs.states)
        encoded.update(theirs.encoded())
        p.seq = max(p.seq, theirs.seq)
        damaged = dict(log.damaged)
    log.damaged.clear()
    log.damaged.update(sorted(damaged.items()))
    for n in local:
        p.states[n] = mine.states[n]
    return p, {n: encoded[n] for n in p.mods}


def worker_only(mods: dict[str, Any]) -> tuple[str, ...]:
    """The event types only the worker's projections fold: the rows this process need not read
    while the worker answers (it reads them, and reports the damaged ones among them). Empty when
    a projection here folds every type."""
    here = [m.TYPES for n, m in mods.items() if n not in WORKER]
    if any(t is None for t in here):
        return ()
    theirs: list[Any] = [m.TYPES or () for n, m in mods.items() if n in WORKER]
    return tuple(sorted(set[str]().union(*theirs) - set[str]().union(*(t for t in here if t is not None))))


def row_hash_at(log: EventLog, seq: int) -> bytes:
    """The stored chain hash of row ``seq`` (b"" if there is none)."""
    return sqlrows.hash_at(log.db, seq) or b""


def main(argv: list[str]) -> int:
    """The worker: ``PATH UPTO NAMES [PARENT_PID]``; exit 1 with nothing written when orphaned."""
    path, upto, names = argv[0], int(argv[1]), tuple(argv[2].split(","))
    parent = int(argv[3]) if len(argv) > 3 else None
    if parent is not None and os.getppid() != parent:
        return 1
    log = EventLog(path, create=False, readonly=True)
    try:
        p = fold_group(log, names, upto, types=True, parent=parent)
        res = Result(states=p.encoded(), upto_hash=row_hash_at(log, upto), damaged=dict(log.damaged), seq=p.seq)
    except Orphaned:
        return 1
    finally:
        log.close()
    sys.stdout.buffer.write(msgspec.msgpack.encode(res))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
