"""Source polls under a deadline the loop enforces: no source can stop the tick.

Each source polls in its own worker thread (one per source object, started on first use, kept
for the source's life). A tick hands every idle worker its poll and waits for those results, at
most ``wait`` seconds in all (None: up to each source's deadline, as ``--once`` and tests want);
a poll still running from an earlier tick is not waited for again.

Per source, after the wait:
- the poll finished: its result;
- it has run longer than its deadline (the source's ``timeout`` + ``GRACE``): one failed result
  "timed out after Ns" (``error_class`` "deadline") every tick until the poll returns, so the
  fold records one ``source.failed`` and the source's agents keep their last class; the stuck
  worker is never started again meanwhile (a hung NFS read holds one thread, not the loop);
- it is still within its deadline (slow, not stuck): the previous result again, or, before the
  first one, ``pending`` (the name goes into ``Snapshot.failed`` without a result: nothing is
  classified or closed from it and no event is written).
A file source that missed a partial tick's paths while busy gets a full poll next time. A poll
that ends after its tick stopped waiting calls ``on_done`` (the service sets the Waker's event):
its result is taken by a tick right away, not an interval later.
Exceptions out of ``poll`` are a failed result ("internal error: TypeError"), logged once per
poll with the traceback.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from projections.observations import SourceResult
from watcher.config import parse_duration

log = logging.getLogger("fleetwatch.watcher")

IDLE_EXIT = 30.0  # a worker idle this long ends its thread (the next submit starts one again)
GRACE = 1.0   # beyond the source's own timeout (a command kills its group at the timeout itself)


def deadline_of(source: Any) -> float:
    spec = getattr(source, "spec", None)
    try:
        return parse_duration(getattr(spec, "timeout", "10s")) + GRACE
    except Exception:
        return 10.0 + GRACE


class _Worker:
    """One source's poll thread; ``submit`` then ``wait``; ``busy`` while a poll runs."""

    def __init__(self, source: Any, poll_one: Any):
        self.source = source
        self.poll_one = poll_one  # (source, now, full, changed) -> SourceResult: the loop's dispatch
        self.deadline = deadline_of(source)
        self.done = threading.Event()
        self.done.set()
        self.go = threading.Event()
        self.job: tuple[float, bool, set[str] | None] | None = None
        self.result: SourceResult | None = None  # of the poll that finished, not yet taken
        self.last: SourceResult | None = None    # the last result handed to a tick
        self.started = 0.0                       # monotonic start of the running poll
        self.needs_full = False
        self.waited = False                      # a tick is waiting for this poll right now
        self.on_done: Any = None                 # called when a poll ends after its tick stopped waiting
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None  # started by submit, ends after IDLE_EXIT idle

    @property
    def busy(self) -> bool:
        return not self.done.is_set()

    def submit(self, now: float, full: bool, changed: set[str] | None, mono: float) -> None:
        if self.needs_full:
            full, changed, self.needs_full = True, None, False
        self.job = (now, full, changed)
        self.started = mono
        self.done.clear()
        with self._lock:
            self.go.set()
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=f"source:{self.source.name}", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        s = self.source
        while True:
            if not self.go.wait(IDLE_EXIT):
                with self._lock:  # idle (a watcher dropped without close): the thread ends
                    if not self.go.is_set():
                        self.thread = None
                        return
                continue
            self.go.clear()
            job = self.job
            if job is None:  # closed
                return
            now, full, changed = job
            try:
                res = self.poll_one(s, now, full, changed)
            except Exception as e:  # a source bug must not stop the loop
                log.exception("source %s crashed", s.name)
                res = SourceResult(name=s.name, kind=s.kind, ok=False, error=f"internal error: {type(e).__name__}",
                                   error_class="internal")
            self.result = res
            self.done.set()
            if not self.waited and self.on_done is not None:
                try:
                    self.on_done()  # a late result: let the loop take it now, not an interval later
                except Exception:
                    log.exception("source %s: on_done failed", s.name)

    def take(self) -> SourceResult | None:
        res, self.result = self.result, None
        if res is not None:
            self.last = res
        return res

    def close(self) -> None:
        self.job = None
        self.go.set()


class Polls:
    """The workers of the current sources (a reload's new source objects get new workers)."""

    def __init__(self, poll_one: Any) -> None:
        self.poll_one = poll_one
        self.clock = time.monotonic  # for the deadlines (tests step it by hand)
        self.on_done: Any = None     # e.g. the Waker's event.set: a poll that ends late wakes the loop
        self._workers: dict[int, _Worker] = {}

    def worker(self, source: Any) -> _Worker:
        w = self._workers.get(id(source))
        if w is None or w.source is not source:
            w = self._workers[id(source)] = _Worker(source, self.poll_one)
        w.on_done = self.on_done
        return w

    def busy(self, source: Any) -> bool:
        w = self._workers.get(id(source))
        return w is not None and w.source is source and w.busy

    def poll(self, sources: list[Any], now: float, full: bool, changed: set[str] | None,
             wait: float | None, cancel: threading.Event | None = None) -> tuple[list[SourceResult], list[str]]:
        """(results in source order, names of sources still pending without any result).
        ``cancel`` set (a stop request) ends the wait early: unfinished polls count as slow."""
        live = {id(s) for s in sources}
        for k in [k for k in self._workers if k not in live]:
            self._workers.pop(k).close()
        workers = [self.worker(s) for s in sources]
        fresh = []
        for w in workers:
            if not w.busy:
                w.take()  # a poll that finished after the last tick's wait: the freshest view
                w.waited = True
                w.submit(now, full, changed, self.clock())
                fresh.append(w)
            elif changed:
                w.needs_full = True  # these paths go unseen by this busy poll: look everywhere next
        t0 = time.monotonic()
        for w in fresh:  # a poll still running from an earlier tick is not waited for again
            left = w.started + w.deadline - self.clock()
            end = t0 + (left if wait is None else min(left, wait))
            while not w.done.is_set() and not (cancel is not None and cancel.is_set()):
                rest = end - time.monotonic()
                if rest <= 0:
                    break
                w.done.wait(rest if cancel is None else min(rest, 0.1))
        for w in fresh:
            w.waited = False
        results: list[SourceResult] = []
        pending: list[str] = []
        mono = self.clock()
        for w in workers:
            s = w.source
            res = None if w.busy else w.take()
            if res is None and w.busy and mono - w.started >= w.deadline:
                res = SourceResult(name=s.name, kind=s.kind, ok=False, error_class="deadline",
                                   error=f"timed out after {w.deadline:g}s (the poll is still running)")
            elif res is None:
                res = w.last  # slow, not stuck: the last view stands
            if res is None:
                pending.append(s.name)
            else:
                results.append(res)
        return results, pending

    def close(self) -> None:
        for w in self._workers.values():
            w.close()
        self._workers.clear()
