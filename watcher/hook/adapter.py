"""``fleetwatch hook``: one Claude Code hook payload on stdin -> that agent's goal.json.

The fast path of the console script (see ``watcher/entry.py``): standard library only, no
typer/rich/apsw/msgspec, so start-to-exit stays far under 100 ms. It never breaks the agent:
``run_hook`` always returns 0 and reports its own errors as one line on stderr.

Invariants:
- Only the hook-owned keys change: ``state``, ``last_activity``, ``hook_event``, ``ended``,
  ``ended_at``, ``stop_error`` (see ``HOOK_KEYS``). Every other key (above all ``dod`` and
  ``dod_contract``) is written back exactly as read, in the same order.
- Read-modify-write happens under ``fcntl.flock`` on the sidecar ``goal.json.lock``; the new
  content goes to a temporary file in the same folder, is fsynced and renamed over goal.json, so
  readers see the old or the new file, never a torn one, and concurrent hooks lose no update.
- A goal.json that cannot be parsed (or is not a JSON object) is left untouched.
- Waiting for the lock is bounded (``LOCK_TIMEOUT``): the agent's turn is never blocked for long.

``decide`` (payload -> Decision) and ``apply`` (document, decision, now -> new document) are pure;
``resolve_agent`` and ``update_goal`` do the I/O.
"""
from __future__ import annotations

import enum
import fcntl
import json
import os
import sys
import time

HOOK_KEYS = ("state", "last_activity", "hook_event", "ended", "ended_at", "stop_error")
DEFAULT_GOALS_DIR = "~/.fleet/agents"
LOCK_TIMEOUT = 2.0  # seconds; past it the hook gives up (stderr line, exit 0)

BUSY_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure"})
ACTIVITY_EVENTS = frozenset({"SubagentStart", "SubagentStop", "PreCompact", "PostCompact"})
WAITING_NOTIFICATIONS = frozenset({"permission_prompt", "elicitation_dialog"})
FINISHED_TASK_STATUSES = frozenset({"completed", "complete", "done", "failed", "killed", "stopped", "cancelled", "canceled", "exited"})


class Reason(enum.Enum):
    """Why a payload leads (or does not lead) to a change of goal.json."""

    WORKING = "agent activity: busy"
    PERMISSION = "agent waits for a permission or an answer"
    NOISE = "notification that says nothing about the state"
    STOPPED = "turn finished: idle"
    BACKGROUND = "turn finished but background tasks still run: busy"
    STOP_FAILURE = "turn ended by an API error: idle, error kind kept"
    SUBAGENT = "subagent or compaction activity: last_activity only"
    SESSION_END = "session ended: the agent leaves the fleet"
    UNKNOWN_EVENT = "event not mapped: no change"


class Decision:
    """What one payload means: ``state`` to set (None = keep), ``write`` (False = touch nothing)."""

    __slots__ = ("event", "reason", "state", "write", "stop_error", "ended")

    def __init__(self, event: str, reason: Reason, state: str | None = None, *, write: bool = True,
                 stop_error: str | None = None, ended: bool = False):
        self.event, self.reason, self.state, self.write = event, reason, state, write
        self.stop_error, self.ended = stop_error, ended

    def __repr__(self) -> str:  # for test failure messages
        return f"Decision({self.event!r}, {self.reason.name}, state={self.state!r}, write={self.write})"


class HookError(Exception):
    """An error of the hook itself: reported as one stderr line, exit status still 0."""


# ---------------------------------------------------------------- pure core

def _background_running(payload: dict) -> bool:
    tasks = payload.get("background_tasks")
    if not isinstance(tasks, list):
        return False
    for t in tasks:
        status = t.get("status") if isinstance(t, dict) else None
        if not isinstance(status, str) or status.lower() not in FINISHED_TASK_STATUSES:
            return True  # listed and not known to be finished: still running
    return False


def _notification_kind(payload: dict) -> str:
    kind = payload.get("notification_type")
    if isinstance(kind, str) and kind:
        return kind
    msg = payload.get("message")  # older Claude Code versions send only the message text
    if isinstance(msg, str):
        if msg.startswith("Claude needs your permission"):
            return "permission_prompt"
        if msg.startswith("Claude is waiting for your input"):
            return "idle_prompt"
    return ""


def decide(payload: dict) -> Decision:
    """The mapping table of docs/readme/hook.md, as a function of the payload alone."""
    event = payload.get("hook_event_name")
    event = event if isinstance(event, str) else ""
    if event in BUSY_EVENTS:
        return Decision(event, Reason.WORKING, "busy")
    if event == "PermissionRequest":
        return Decision(event, Reason.PERMISSION, "waiting")
    if event == "Notification":
        if _notification_kind(payload) in WAITING_NOTIFICATIONS:
            return Decision(event, Reason.PERMISSION, "waiting")
        return Decision(event, Reason.NOISE, write=False)
    if event == "Stop":
        if _background_running(payload):
            return Decision(event, Reason.BACKGROUND, "busy")
        return Decision(event, Reason.STOPPED, "idle")
    if event == "StopFailure":
        kind = payload.get("error_type") or payload.get("error") or "unknown"
        return Decision(event, Reason.STOP_FAILURE, "idle", stop_error=str(kind)[:64])
    if event in ACTIVITY_EVENTS:
        return Decision(event, Reason.SUBAGENT)
    if event == "SessionEnd":
        return Decision(event, Reason.SESSION_END, "idle", ended=True)
    return Decision(event, Reason.UNKNOWN_EVENT, write=False)


def iso_utc(now: float) -> str:
    """Epoch seconds -> ``2026-11-29T19:20:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def apply(doc: dict | None, d: Decision, agent: str, now: float) -> dict | None:
    """The new goal.json object, or None when nothing is to be written. Pure; ``doc`` is not mutated.

    ``doc`` None means goal.json does not exist: it is created as {agent, state, last_activity}
    (no ``dod_contract``: the watcher rightly says MAL_LANZADO), except for SessionEnd.
    """
    if not d.write:
        return None
    if doc is None:
        if d.ended:
            return None  # nothing to end
        doc = {"agent": agent}
    new = dict(doc)
    if d.state is not None:
        new["state"] = d.state
    elif "state" not in new:
        new["state"] = "busy"  # activity with no known state: the agent is working
    stamp = iso_utc(now)
    new["last_activity"] = stamp
    new["hook_event"] = d.event
    if d.ended:
        new["ended"] = True
        new["ended_at"] = stamp
    else:
        new.pop("ended", None)  # any other event: the session is (back) in the fleet
        new.pop("ended_at", None)
    if d.stop_error is not None:
        new["stop_error"] = d.stop_error
    elif d.state is not None:
        new.pop("stop_error", None)  # a later state change supersedes the failure
    return new


def parse_args(argv: list[str], env: dict) -> tuple[str | None, str]:
    """(agent or None, goals dir) from ``--agent``/``--goals-dir`` (also ``--x=v``) and the env."""
    agent = goals = None
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name not in ("--agent", "--goals-dir"):
            raise HookError(f"unknown argument {a!r} (usage: fleetwatch hook [--agent ID] [--goals-dir DIR])")
        if not eq:
            i += 1
            if i >= len(argv):
                raise HookError(f"{name} needs a value")
            val = argv[i]
        if name == "--agent":
            agent = val
        else:
            goals = val
        i += 1
    agent = agent or env.get("FLEETWATCH_AGENT") or None
    goals = goals or env.get("FLEETWATCH_GOALS_DIR") or DEFAULT_GOALS_DIR
    return agent, os.path.expanduser(os.path.expandvars(goals))


def valid_agent(agent: str) -> bool:
    return bool(agent) and agent not in (".", "..") and "/" not in agent and "\0" not in agent


# ---------------------------------------------------------------- I/O edges

def _read_json(path: str):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def _norm(p: str) -> str:
    return os.path.normpath(os.path.expanduser(p))


def resolve_agent(agent: str | None, goals_dir: str, payload: dict, env: dict) -> str | None:
    """Which agent this payload is about (None: not part of the fleet, nothing to do).

    Order: explicit agent (flag or $FLEETWATCH_AGENT); a goals-dir entry whose goal.json has the
    payload's ``session_id``; one whose ``cwd`` contains the payload's cwd (deepest wins); an
    existing goals-dir folder named like $CLAUDE_PROJECT_DIR or cwd.
    """
    if agent:
        return agent
    session = payload.get("session_id")
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else ""
    best, best_len = None, -1
    try:
        entries = sorted(os.scandir(goals_dir), key=lambda e: e.name)
    except OSError:
        return None
    for e in entries:
        if not e.is_dir():
            continue
        doc = _read_json(os.path.join(e.path, "goal.json"))
        if not isinstance(doc, dict):
            continue
        if session and doc.get("session_id") == session:
            return e.name
        gcwd = doc.get("cwd")
        if cwd and isinstance(gcwd, str) and gcwd:
            g, c = _norm(gcwd), _norm(cwd)
            if (c == g or c.startswith(g.rstrip(os.sep) + os.sep)) and len(g) > best_len:
                best, best_len = e.name, len(g)
    if best:
        return best
    for base in (env.get("CLAUDE_PROJECT_DIR") or "", cwd):
        name = os.path.basename(_norm(base)) if base else ""
        if valid_agent(name) and os.path.isdir(os.path.join(goals_dir, name)):
            return name
    return None


def _lock(fd: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise HookError(f"lock busy for {timeout:g}s, update skipped")
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


def write_atomic(path: str, data: bytes, mode: int) -> None:
    """Temporary file in the same folder, fsync, rename over ``path``, fsync the folder."""
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename itself is atomic


def update_goal(path: str, change, *, create: bool = True, timeout: float = LOCK_TIMEOUT) -> bool:
    """Run ``change(doc_or_None) -> new_doc_or_None`` under the sidecar lock and store the result.

    Returns True when goal.json was rewritten. Raises HookError when goal.json cannot be parsed
    (left untouched) or the lock stays busy past ``timeout``.
    """
    folder = os.path.dirname(path)
    if create:
        os.makedirs(folder, exist_ok=True)
    elif not os.path.isdir(folder):
        return False
    lfd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _lock(lfd, timeout)
        try:
            with open(path, "rb") as f:
                raw = f.read()
                mode = os.fstat(f.fileno()).st_mode & 0o7777
        except FileNotFoundError:
            raw, mode = None, 0o644 & ~_umask()
        doc = None
        if raw is not None:
            try:
                doc = json.loads(raw)
            except ValueError:
                raise HookError(f"{path} is not valid JSON: left untouched") from None
            if not isinstance(doc, dict):
                raise HookError(f"{path} is not a JSON object: left untouched")
        new = change(doc)
        if new is None:
            return False
        write_atomic(path, (json.dumps(new, ensure_ascii=False, indent=2) + "\n").encode(), mode)
        return True
    finally:
        os.close(lfd)  # releases the flock


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:
        return b""
    if stream.isatty():
        raise HookError("expects a Claude Code hook payload on stdin (see `fleetwatch hook --help`)")
    buf = getattr(stream, "buffer", None)
    data = buf.read() if buf is not None else stream.read()
    return data.encode() if isinstance(data, str) else data


def run_hook(argv: list[str], *, stdin: bytes | str | None = None, env: dict | None = None,
             now: float | None = None) -> int:
    """Entry point of ``fleetwatch hook``. Always 0; its own errors are one stderr line."""
    env = os.environ if env is None else env
    try:
        agent, goals_dir = parse_args(argv, env)
        raw = _read_stdin() if stdin is None else stdin
        try:
            payload = json.loads(raw)
        except ValueError:
            raise HookError("stdin is not a JSON hook payload") from None
        if not isinstance(payload, dict):
            raise HookError("stdin is not a JSON object")
        d = decide(payload)
        if not d.write:
            return 0
        explicit = bool(agent)
        agent = resolve_agent(agent, goals_dir, payload, env)
        if agent is None:
            return 0  # a session outside the fleet: nothing to do, nothing to say
        if not valid_agent(agent):
            raise HookError(f"invalid agent id {agent!r}")
        at = time.time() if now is None else now
        path = os.path.join(goals_dir, agent, "goal.json")
        update_goal(path, lambda doc: apply(doc, d, agent, at), create=explicit)
    except HookError as e:
        print(f"fleetwatch hook: {e}", file=sys.stderr)
    except Exception as e:  # never break the agent: any failure is one line, exit 0
        print(f"fleetwatch hook: {type(e).__name__}: {e}", file=sys.stderr)
    return 0
