"""A big first poll read in two processes: a forked child reads and parses the second half of
the files while this process reads the first (GlobSource._first_poll, watcher/sources/files.py).

Why: the first poll of 10,000 agents is ~0.3 s of open/fstat/read/parse, most of the watcher's
first tick; under the GIL a second thread gains nothing (measured), a second process halves it.
``fork`` rather than a fresh interpreter: the child has every module imported already (a fresh
``python -m`` costs ~60-100 ms of imports, a third of what it saves at 10,000 files).

Invariants:
- The child runs the very code this process would (``read_one``: read_new's checks on the open
  descriptor, the same parser) and sends back, per path, what that read found: the stat's fields
  and the observation, or nothing (an open that failed: a gone file, a FIFO, a folder), which this
  process then looks at the careful way itself, as it would have anyway.
- The child touches nothing shared: before its first read it resets the stop signals to their
  defaults and closes every descriptor but its pipe (the log, its lock, sockets), so a child
  stuck on a hung file system holds no lock of the watcher's; it writes only to its pipe, logs
  nothing and ends with ``os._exit``.
- Its answer is bounded: at most ``MAX_OUT`` bytes within ``wait_s`` (at least WAIT_MIN_S, or 4x
  this process's own half); past either, or if it dies, fails to decode or answers for another
  number of files, it is killed and reaped and this process reads its half itself (one warning).
  So a bad child costs time, never a wrong or missing observation.
- Used only when there are at least FORK_MIN files, two CPUs to run on and ``os.fork``.
- The child runs Python after a fork of a process with threads (inotify's, the deliveries'):
  it takes no lock of theirs (no logging, no imports, no SQLite); should one of the C
  libraries' locks still be held at the fork, the child hangs and the bound above applies.
  (Python 3.12+ flags every such fork with a DeprecationWarning, hidden by default.)

This process files each of its own half as it reads it (``iter_split``), so that work runs
while the child still reads; then it collects the child's answer, decoded by msgspec straight
into the (stat, observation) pairs.

Measured at 10,000 agents (2 cores): this process's half 122-199 ms, the same as without the
fork; the child's answer 1.9 MB, collected in ~6 ms and decoded in ~19 ms (sixth session: 5-10
ms once decoded into the pairs in C; the first poll's wait for the child went 17-54 ms -> 10-39
ms with the filing moved into it; observe, A/B against the tree before, best of 4: 160 -> 129 ms).
"""
from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import msgspec

from watcher.runtime.child import cores, fork_child, read_capped, write_all

log = logging.getLogger("fleetwatch.sources")

FORK_MIN = 2000            # files: below, one process (a fork and its decode cost more than they save)
MAX_OUT = 256 << 20        # bytes of the child's answer
WAIT_MIN_S = 10.0          # s the child may take at least after this process's half


class St(NamedTuple):
    """The fields of a stat the first poll uses (the cache key, the kind, the mtime)."""
    st_mode: int
    st_ino: int
    st_size: int
    st_mtime_ns: int
    st_mtime: float


Read = tuple[Any, Any]   # (St or os.stat_result, observation), or (None, None): look the careful way


def usable(n: int) -> bool:
    """Whether ``n`` files are worth a second process here."""
    return n >= FORK_MIN and hasattr(os, "fork") and cores() >= 2


def _child(w: int, paths: list[str], read_one: Callable[[str], Read]) -> None:
    """In the forked child (``fork_child``): read ``paths``, write the answer to ``w``: one
    ``((mode, ino, size, mtime_ns, mtime), observation)`` a path, ``(None, None)`` for one to
    look at the careful way (decoded here straight into :data:`Read` pairs, :func:`_decode`)."""
    out = []
    for p in paths:
        try:
            st, obs = read_one(p)
        except Exception:
            st = obs = None
        out.append(_NONE if st is None else ((st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mtime), obs))
    try:
        data = msgspec.msgpack.encode(out)
    except Exception:  # one observation that does not encode (a steps doc's huge int): that one here
        data = msgspec.msgpack.encode([_or_none(x) for x in out])
    write_all(w, data)


_NONE = (None, None)


def _or_none(x: Any) -> Any:
    try:
        msgspec.msgpack.encode(x)
        return x
    except Exception:
        return _NONE


def _collect(pid: int, r: int, wait_s: float) -> bytes | None:
    """The child's whole answer, or None (late, too large, or it died); the child is reaped."""
    try:
        data = read_capped(r, MAX_OUT, wait_s)
    finally:
        os.close(r)
        if data is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
    if data is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    return data


def iter_split(paths: list[str], read_one: Callable[[str], Read], obs_type: type) -> Iterator[Read]:
    """``map(read_one, paths)``, the second half read by a forked child (see the module's
    docstring): the same answers in the same order, up to the stat's type (:class:`St` for the
    child's). The first half is read here as it is consumed (so what the caller does with each,
    the first poll's cache entry, runs while the child still reads), then the child's answer is
    collected. Closing it early (or an error in this process's reads) kills and reaps the child.
    Below ``FORK_MIN`` files (``usable``), or where there is no fork: one process, the same reads."""
    half = len(paths) // 2
    mine, theirs = paths[:half], paths[half:]
    child = fork_child(lambda w: _child(w, theirs, read_one), "first poll in one process", log) \
        if usable(len(paths)) else None
    if child is None:
        yield from map(read_one, paths)
        return
    pid, r = child
    t = time.monotonic()
    try:
        for p in mine:
            yield read_one(p)
    except BaseException:  # an error here, or the caller closed us: kill and reap
        _collect(pid, r, 0.0)
        raise
    data = _collect(pid, r, max(WAIT_MIN_S, 4 * (time.monotonic() - t)))
    rest = _decode(data, obs_type, len(theirs))
    if rest is None:
        log.warning("first poll: the second process gave no usable answer; its %d files were read here",
                    len(theirs))
        rest = map(read_one, theirs)
    yield from rest


def _decode(data: bytes | None, obs_type: type, n: int) -> list[Read] | None:
    """The child's answer as :data:`Read` pairs (msgspec builds the :class:`St` and the pairs in
    C), or None: no answer, one that does not decode as ``obs_type``, or not ``n`` of them."""
    if data is None:
        return None
    try:
        items = msgspec.msgpack.decode(data, type=list[tuple[St | None, obs_type | None]])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(items) != n:
        return None
    return items
