"""The worker threads of the DoD judges (checker, verifier): jobs in, ``(key, result)`` out.

Invariants
- ``run(*job)`` never runs in the tick's thread; a job's key is its first two fields
  ``(agent, claim seq)``, and every job put comes back exactly once from :meth:`Pool.finished`,
  with ``None`` as its result when ``run`` raised (a bug, logged; the judge may ask again).
- ``stop`` sets the stop flag, kills what the process ledger says runs (before and after joining,
  for a process started meanwhile) and waits at most ``timeout`` seconds in all.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from projections.text import safe
from watcher.runtime import checkgroups
from watcher.sources.command import Running

log = logging.getLogger("fleetwatch")


def ledgered(folder: str) -> Running:
    """A process registry whose groups are also written to ``folder``, after killing what a
    watcher killed -9 left running there."""
    checkgroups.reap(folder)
    running = Running()
    running.pgids = checkgroups.Ledger(folder)
    return running


class Pool:
    def __init__(self, name: str, n: int, run: Callable[..., Any], what: str,
                 logger: logging.Logger = log) -> None:
        self.run, self.what, self.log = run, what, logger
        self.jobs: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def put(self, job: tuple) -> None:
        self.jobs.put(job)

    def finished(self) -> Iterator[tuple[tuple[str, int], Any]]:
        """The ``(key, result)`` of every job finished since the last call."""
        while True:
            try:
                yield self.done.get_nowait()
            except queue.Empty:
                return

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                job = self.jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            if self._stop.is_set():
                break
            key = (job[0], job[1])
            try:
                self.done.put((key, self.run(*job)))
            except Exception:
                self.log.exception("%s for %s failed to run", self.what, safe(job[0]))
                self.done.put((key, None))

    def stop(self, running: Running, timeout: float = 2.0) -> None:
        self._stop.set()
        running.kill()
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        running.kill()
