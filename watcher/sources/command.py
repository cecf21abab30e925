"""Bounded child processes: ``run_bounded`` (and its short form ``run_argv``) and the ``command``
source built on it.

Invariants
- No shell; stdin is /dev/null (or the caller's bytes, from a file); the child runs in its own session (``start_new_session``), so its
  whole process group can be killed: on timeout, on the output cap, and after it exits (helpers
  it left behind holding our pipe are killed too, so a ``sh -c 'sleep 120 & echo []'`` leaves
  nothing running and does not hold the poll until the timeout). ``CommandSource.close`` kills
  a group still running (the watcher stopping mid-poll leaves no child behind).
- stdout is read incrementally and never beyond ``max_bytes``: at ``max_bytes + 1`` bytes the
  group is killed and the result is "output too large" (RSS stays ~``max_bytes``, whatever the
  child prints: ``yes`` or 1 GB).
- stderr is never returned, logged or stored: at most its first 4 KiB are scanned in memory for a
  few fixed phrases (``KNOWN_STDERR``, e.g. tmux's "no server running"); only the phrase found
  travels on. Results carry a typed :class:`RunError` class and the exit code instead of text.
- Never raises: every failure is a value.
"""
from __future__ import annotations

import enum
import os
import selectors
import signal
import subprocess
import threading
import time
from typing import Any, NamedTuple

import msgspec

from projections.observations import AgentObs, RowObs, SourceResult
from watcher.config import Source, expand, parse_duration
from watcher.sources import NO_FILES
from watcher.sources.parse import _Goal, ParseError, agent_from_obj, clamp_activity, decode_json

MAX_OUTPUT = 16 * 1024 * 1024   # a command's stdout cap unless its source sets max_bytes
STDERR_SCAN = 4096              # bytes of stderr looked at (for KNOWN_STDERR), the rest dropped
EXIT_GRACE = 0.5                # after the child exits, this long for the pipe's last bytes
KNOWN_STDERR = ("no server running", "error connecting", "permission denied", "no such file or directory")
_CHUNK = 65536


class RunError(str, enum.Enum):
    """Why a run gave no usable output (``SourceResult.error_class``, ``source.failed``)."""

    TIMEOUT = "timeout"
    TOO_LARGE = "too-large"
    EXIT = "exit-status"
    SIGNAL = "signal"
    NOT_FOUND = "not-found"
    CANNOT_RUN = "cannot-run"
    BAD_OUTPUT = "bad-output"


class RunResult(NamedTuple):
    out: bytes | None               # stdout when the run succeeded
    error: str | None = None        # short, content-free ("exit status 3", "timed out after 2s")
    error_class: RunError | None = None
    exit_code: int | None = None


class Running:
    """The process groups one source has running, so that ``close()`` (the watcher stopping,
    a reload) kills them too: a group leaves this set under its lock before its leader is
    reaped, so a kill from here can never hit a reused process group id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pgids: set[int] = set()

    def kill(self) -> None:
        with self.lock:
            for g in self.pgids:
                _kill_group(g)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int) -> bool:
    """True once the child has exited, without reaping it (its pid, hence its process group id,
    stays reserved until we reap: killing the group afterwards cannot hit a stranger)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _known(err: bytes) -> str:
    low = err.decode("utf-8", "replace").lower()
    return next((k for k in KNOWN_STDERR if k in low), "")


def _stdin(data: bytes | None):
    """The child's standard input: /dev/null, or an unlinked temporary file holding ``data`` (a
    file, not a pipe: a child that never reads it cannot make us block writing it)."""
    if data is None:
        return subprocess.DEVNULL
    import tempfile

    f = tempfile.TemporaryFile(prefix="fleetwatch-stdin-")
    f.write(data)
    f.seek(0)
    return f


def run_bounded(argv: list[str], timeout: float, max_bytes: int = MAX_OUTPUT, *, cwd: str | None = None,
                running: Running | None = None, stdin: bytes | None = None) -> RunResult:
    """Run ``argv`` (see the module invariants) in ``cwd`` (None: ours), ``stdin`` its input (None:
    /dev/null). Success: ``RunResult(stdout)``; a non-zero exit keeps its stdout too (the DoD
    checker compares it)."""
    try:
        inp = _stdin(stdin)
    except OSError as e:
        return RunResult(None, f"cannot run {argv[0] if argv else ''}: {e.strerror or type(e).__name__}",
                         RunError.CANNOT_RUN)
    try:
        p = subprocess.Popen(argv, stdin=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True, close_fds=True, cwd=cwd)
    except FileNotFoundError:
        return RunResult(None, f"command not found: {argv[0] if argv else ''}", RunError.NOT_FOUND)
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        name = getattr(e, "strerror", None) or type(e).__name__
        return RunResult(None, f"cannot run {argv[0] if argv else ''}: {name}", RunError.CANNOT_RUN)
    finally:
        if stdin is not None:
            inp.close()   # the child holds its own copy
    if running is not None:
        with running.lock:
            running.pgids.add(p.pid)
    out = bytearray()
    err = bytearray()
    cause: RunError | None = None
    deadline = time.monotonic() + timeout
    exit_seen: float | None = None
    sel = selectors.DefaultSelector()
    try:
        assert p.stdout is not None and p.stderr is not None
        for f in (p.stdout, p.stderr):
            os.set_blocking(f.fileno(), False)
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                cause = RunError.TIMEOUT
                break
            if exit_seen is None and _exited(p.pid):
                exit_seen = now
            if exit_seen is not None and now - exit_seen >= EXIT_GRACE:
                break  # exited; whoever still holds the pipe is killed below
            wait = min(deadline - now, 0.05 if exit_seen is None else EXIT_GRACE)
            for key, _ in sel.select(wait):
                try:
                    chunk = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.fileobj is p.stdout:
                    out += chunk
                    if len(out) > max_bytes:
                        cause = RunError.TOO_LARGE
                        break
                elif len(err) < STDERR_SCAN:
                    err += chunk[:STDERR_SCAN - len(err)]
            if cause is not None:
                break
        if cause is None:  # the pipes closed: let the child finish exiting (before the deadline)
            pause = 0.001
            while not _exited(p.pid):
                if time.monotonic() >= deadline:
                    cause = RunError.TIMEOUT
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
    finally:
        sel.close()
        _kill_group(p.pid)   # the child is not reaped yet: its pgid cannot have been reused
        if running is not None:
            with running.lock:
                running.pgids.discard(p.pid)
        p.stdout.close()     # type: ignore[union-attr]
        p.stderr.close()     # type: ignore[union-attr]
        code: int | None
        try:
            code = p.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL was sent to the group
            code = None
    if cause is RunError.TIMEOUT:
        return RunResult(None, f"timed out after {timeout:g}s", cause)
    if cause is RunError.TOO_LARGE:
        return RunResult(None, f"output too large (more than {max_bytes} bytes)", cause)
    if code is not None and code < 0:
        return RunResult(None, f"killed by signal {-code}", RunError.SIGNAL, code)
    if code:
        hint = _known(bytes(err))
        return RunResult(bytes(out), f"exit status {code}" + (f" ({hint})" if hint else ""), RunError.EXIT, code)
    return RunResult(bytes(out), None, None, code)


def run_argv(argv: list[str], timeout: float, max_bytes: int = MAX_OUTPUT) -> tuple[bytes | None, str | None]:
    """(stdout, None) on success, (None, short content-free error) otherwise. Never raises."""
    r = run_bounded(argv, timeout, max_bytes)
    return r.out, r.error


_OUT_OF_RANGE = object()   # a NaN, an Infinity or a float beyond the double range, in a tolerant decode
_RANGE_WHY = "out-of-range number (NaN, Infinity, 1e400)"
_AGENT_KEYS = tuple(_Goal.__struct_fields__)     # the keys agent_from_obj reads
_SWARM_KEYS = ("group", "child", "status", "label")


def _float_or_marker(text: str) -> object:
    f = float(text)
    return f if f - f == 0.0 else _OUT_OF_RANGE


def _tolerant(raw: bytes) -> list | None:
    """The command's output decoded by the standard library with every out-of-range number
    (which the fast decoder refuses for the whole document) as ``_OUT_OF_RANGE``; None when
    that is not the cause (it is not JSON, or not a list, or holds no such number)."""
    import json

    marks: list[object] = []

    def mark(_: str) -> object:
        marks.append(_OUT_OF_RANGE)
        return _OUT_OF_RANGE

    def num(text: str) -> object:
        v = _float_or_marker(text)
        if v is _OUT_OF_RANGE:
            marks.append(v)
        return v

    try:
        doc = json.loads(raw.removeprefix(b"\xef\xbb\xbf"), parse_constant=mark, parse_float=num)
        if not marks or not isinstance(doc, list):
            return None
        # what the fast decoder refuses besides such numbers (a lone surrogate "\\ud800", ...)
        # stays a bad document: every other value must encode as the fast path would have it
        msgspec.json.encode(doc, enc_hook=lambda _: None)
    except (ValueError, RecursionError, TypeError, msgspec.EncodeError):   # UnicodeError is a ValueError
        return None
    return doc


def _holds_out_of_range(v: object) -> bool:
    todo = [v]
    while todo:
        x = todo.pop()
        if x is _OUT_OF_RANGE:
            return True
        if isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return False


def _bad_key(item: object, keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` whose value holds an out-of-range number (None: none does)."""
    if not isinstance(item, dict):
        return None
    return next((k for k in keys if k in item and _holds_out_of_range(item[k])), None)


class CommandSource:
    """``kind = "command"``: an argv printing a JSON array of agents (or swarm rows). Polls on
    full resync ticks only; between them (inotify wake-ups) the last result is reused."""

    kind = "command"
    partial = False                  # (the Source protocol, watcher/sources/__init__.py: reads no files)
    cache = NO_FILES
    delta: tuple[Any, Any, Any] | None = None

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.argv = [expand(a) for a in spec.argv or []]
        self.timeout = parse_duration(spec.timeout)
        self.max_bytes = spec.max_bytes or MAX_OUTPUT
        self.entity = spec.entity or "agent"
        self.last: SourceResult | None = None
        self.running = Running()

    def _bad(self, why: str) -> SourceResult:
        return SourceResult(name=self.name, kind=self.kind, ok=False, error=f"bad output: {why}",
                            error_class=RunError.BAD_OUTPUT.value)

    def parse(self, raw: bytes) -> SourceResult:
        try:
            doc = decode_json(raw)
        except ParseError as e:
            # one item's 1e400 or NaN fails the fast decoder for the whole array: decode again,
            # tolerantly, so that only the items holding such a number (in a key read) are bad
            doc = _tolerant(raw)
            if doc is None:
                return self._bad(e.reason)
        if not isinstance(doc, list):
            return self._bad("not a JSON array")
        if self.entity == "swarm":
            rows = []
            for item in doc:
                if _bad_key(item, _SWARM_KEYS) is not None:
                    continue  # like a row without a group or child: not one that can be kept
                if isinstance(item, dict) and isinstance(item.get("group"), str) and isinstance(item.get("child"), str):
                    rows.append(RowObs(entity="swarm", source=self.name, key=(item["group"], item["child"]),
                                       row={k: item.get(k) for k in ("group", "child", "status", "label")}))
            return SourceResult(name=self.name, kind=self.kind, rows=rows)
        agents: list[AgentObs] = []
        for item in doc:
            obs = self._agent(item)
            if obs.agent == "?":
                continue  # an item without an id cannot be tracked
            agents.append(obs)
        return SourceResult(name=self.name, kind=self.kind, agents=agents)

    def _agent(self, item: object) -> AgentObs:
        """One item -> its observation; an item the parser cannot take (a number out of range in
        a key it reads) is that agent's MAL_LANZADO with the reason, never the whole source's."""
        key = _bad_key(item, _AGENT_KEYS)
        if key is None:
            try:
                return agent_from_obj(item, source=self.name, fallback_id=None)
            except Exception as e:   # a value the parser did not foresee: this item's, as a file's is
                why = f"an item that cannot be read ({type(e).__name__})"
        else:
            why = f"{key}: {_RANGE_WHY}"
        d = item if isinstance(item, dict) else {}
        aid = next((v.strip()[:200] for k in ("agent", "name") if isinstance(v := d.get(k), str) and v.strip()), "?")
        return AgentObs(agent=aid, source=self.name, error=why)

    def poll(self, now: float, full: bool = True) -> SourceResult:
        if not full and self.last is not None:
            return self.last
        r = run_bounded(self.argv, self.timeout, self.max_bytes, running=self.running)
        if r.error is not None:
            res = SourceResult(name=self.name, kind=self.kind, ok=False, error=r.error,
                               error_class=r.error_class.value if r.error_class else "", exit_code=r.exit_code)
        else:
            res = clamp_activity(self.parse(r.out or b""), now)  # no activity after this poll
        self.last = res
        return res

    def close(self) -> None:
        """Kill what is still running (the watcher stops or reloads mid-poll)."""
        self.running.kill()
