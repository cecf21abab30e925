"""A big first poll read in two processes: a forked child reads and parses the files after
``split_at`` while this process reads the first ones (GlobSource._first_poll, watcher/sources/files.py).
Kept because it pays: the first tick at 50,000 agents takes ~13 % less wall time with it (docs/bench.md).

Why a process: under the GIL a second thread gains nothing. ``fork`` rather than a fresh
interpreter: the child has every module imported already (a fresh ``python -m`` costs more in
imports than it saves at 10,000 files).

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
  this process's own part). It comes in frames of ``FRAME`` files, each length-prefixed and
  decoded as a whole; past either bound, or if it dies, sends a frame that does not decode or
  more files than it was given, it is killed and reaped and this process reads every file the
  child did not answer for itself (one warning). So a bad child costs time, never a wrong or
  missing observation; what it answered before it went bad is used.
- Used only when there are at least FORK_MIN files, two CPUs to run on and ``os.fork``.
- The child runs Python after a fork of a process with threads (inotify's, the deliveries'):
  it takes no lock of theirs (no logging, no imports, no SQLite); should one of the C
  libraries' locks still be held at the fork, the child hangs and the bound above applies.
  (Python 3.12+ flags every such fork with a DeprecationWarning, hidden by default.)

This process files each of its own files as it reads it (``iter_split``) and drains the child's
frames every ``DRAIN`` files, decoding each whole one (msgspec builds the (stat, observation)
pairs in C): the child never waits on a full pipe, and its answer is mostly decoded by the time
this process's part is done.

Why the split is not half and half (``SHARE``): this process does more than read its part (the
filing of every file, the decoding of the child's), and both read slower than one process alone
while the child lives (the machine is shared, and each page either writes first is copied after
the fork); docs/bench.md has the figures.
"""
from __future__ import annotations

import fcntl
import logging
import os
import signal
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple

import msgspec

from watcher.runtime.child import cores, fork_child, readable, write_all

log = logging.getLogger("fleetwatch.sources")

FORK_MIN = 2000            # files: below, one process (a fork and its decode cost more than they save)
MAX_OUT = 256 << 20        # bytes of the child's answer
WAIT_MIN_S = 10.0          # s the child may take at least after this process's part
SHARE = 0.4                # of the files read here (see the module's docstring), the rest by the child
FRAME = 256                # files per frame of the child's answer
DRAIN = 128                # files read here between two drains of the child's answer
PIPE_SIZE = 1 << 20        # bytes asked of the pipe (F_SETPIPE_SZ)


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


def split_at(n: int) -> int:
    """How many of ``n`` paths this process reads itself (the first ones); the child the rest."""
    return int(n * SHARE)


def _child(w: int, paths: list[str], read_one: Callable[[str], Read]) -> None:
    """In the forked child (``fork_child``): read ``paths``, writing the answer to ``w`` as it
    goes, one frame per ``FRAME`` paths (:func:`_frame`): per path ``((mode, ino, size, mtime_ns,
    mtime), observation)``, or ``(None, None)`` for one to look at the careful way (decoded there
    straight into :data:`Read` pairs, :class:`_Frames`)."""
    out = []
    for p in paths:
        try:
            st, obs = read_one(p)
        except Exception:
            st = obs = None
        out.append(_NONE if st is None else ((st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mtime), obs))
        if len(out) == FRAME:
            write_all(w, _frame(out))
            out = []
    if out:
        write_all(w, _frame(out))


def _frame(items: list[Any]) -> bytes:
    """A frame: the msgpack array of ``items``, after its length (4 bytes, big-endian)."""
    try:
        data = msgspec.msgpack.encode(items)
    except Exception:  # one observation that does not encode (a steps doc's huge int): that one here
        data = msgspec.msgpack.encode([_or_none(x) for x in items])
    return len(data).to_bytes(4, "big") + data


_NONE = (None, None)


def _or_none(x: Any) -> Any:
    try:
        msgspec.msgpack.encode(x)
        return x
    except Exception:
        return _NONE


class _Frames:
    """This process's end of the child's answer: drained while this process reads its own part
    (``drain``: a pipe holds 64 KiB, ~170 files' answers, and a child that finds it full waits),
    each whole frame decoded at once (msgspec builds the :class:`St` and the pairs in C) into
    ``ready``. ``bad`` says why the answer stopped being usable ("" while it is): past
    ``MAX_OUT`` bytes, a frame that does not decode as ``obs_type``, more pairs than asked for,
    the end before all of them (the child died), or late. What it decoded before stays good:
    the child is a fork of this code, each pair the read of its path."""

    def __init__(self, r: int, obs_type: type, n: int):
        self.r, self.want = r, n
        self.dec = msgspec.msgpack.Decoder(list[tuple[St | None, obs_type | None]])  # type: ignore[valid-type]
        self.buf = bytearray()
        self.size = 0
        self.got = 0           # pairs decoded so far
        self.ready: list[Read] = []
        self.bad = ""
        self.ended = False
        os.set_blocking(r, False)

    def drain(self) -> None:
        """Take what the pipe holds now, without waiting."""
        while not self.bad and not self.ended:
            try:
                b = os.read(self.r, 1 << 20)
            except BlockingIOError:
                return
            self._take(b)

    def wait(self, end: float) -> bool:
        """Block (until the monotonic ``end``) for more of the answer; False when it is over: all
        pairs came, or it went bad (``bad``)."""
        while not self.bad and self.got < self.want:
            if self.ended:
                self.bad = f"it ended after {self.got} of {self.want} files"
            elif not readable(self.r, end):
                self.bad = f"no answer within the time, {self.got} of {self.want} files in"
            else:
                before = self.got
                self.drain()
                if self.got > before:
                    return True
        return False

    def pairs(self, end: float) -> Iterator[Read]:
        """The pairs decoded so far, then the rest as their frames come, until all ``want`` came,
        the monotonic ``end`` passed or the answer went bad (``bad``): ``got`` pairs in all."""
        while True:
            ready, self.ready = self.ready, []
            yield from ready
            if not self.wait(end) and not self.ready:
                return

    def _take(self, b: bytes) -> None:
        if not b:
            self.ended = True
            return
        self.size += len(b)
        if self.size > MAX_OUT:
            self.bad = f"more than {MAX_OUT} bytes"
            return
        buf = self.buf
        buf += b
        at = 0
        while len(buf) - at >= 4:
            n = int.from_bytes(buf[at:at + 4], "big")
            if len(buf) - at - 4 < n:
                break
            try:
                items = self.dec.decode(memoryview(buf)[at + 4:at + 4 + n])
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.bad = "a frame that does not decode"
                return
            if self.got + len(items) > self.want:
                self.bad = "more files than asked for"
                return
            self.got += len(items)
            self.ready += items
            at += 4 + n
        del buf[:at]


def _reap(pid: int) -> None:
    """Kill (if it still runs) and reap the child."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def iter_split(paths: list[str], read_one: Callable[[str], Read], obs_type: type) -> Generator[Read, None, None]:
    """``map(read_one, paths)``, the paths after ``split_at`` read by a forked child (see the
    module's docstring): the same answers in the same order, up to the stat's type (:class:`St`
    for the child's). This process's part is read as it is consumed (so what the caller does with
    each, the first poll's cache entry, runs while the child still reads), draining the child's
    answer every ``DRAIN`` files; then the child's pairs are given as their frames come. Those the
    child did not answer in time (or at all) are read here. Closing it early (or an error in this
    process's reads) kills and reaps the child. Below ``FORK_MIN`` files (``usable``), or where
    there is no fork: one process, the same reads."""
    k = split_at(len(paths))
    mine, theirs = paths[:k], paths[k:]
    child = fork_child(lambda w: _child(w, theirs, read_one), "first poll in one process", log) \
        if usable(len(paths)) else None
    if child is None:
        yield from map(read_one, paths)
        return
    pid, r = child
    t = time.monotonic()
    try:
        _grow_pipe(r)
        frames = _Frames(r, obs_type, len(theirs))
        drain = DRAIN
        for p in mine:
            yield read_one(p)
            drain -= 1
            if not drain:
                frames.drain()
                drain = DRAIN
        yield from frames.pairs(time.monotonic() + max(WAIT_MIN_S, 4 * (time.monotonic() - t)))
    except BaseException:  # an error here, or the caller closed us: kill and reap
        os.close(r)
        _reap(pid)
        raise
    os.close(r)
    _reap(pid)
    if frames.bad:  # every pair it decoded was given (``pairs``): the child answered for the first ``got``
        log.warning("first poll: the second process gave no usable answer for %d of its %d files (%s); "
                    "those were read here", len(theirs) - frames.got, len(theirs), frames.bad)
        yield from map(read_one, theirs[frames.got:])


def _grow_pipe(r: int) -> None:
    """A bigger pipe where the system allows one (Linux: up to ``pipe-max-size``, 1 MiB by
    default): fewer times the child finds it full between two drains."""
    cmd = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only (Python 3.10+)
    if cmd is not None:
        try:
            fcntl.fcntl(r, cmd, PIPE_SIZE)
        except OSError:
            pass
