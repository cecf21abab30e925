"""``fleetwatch hook``: one Claude Code hook payload on stdin -> that agent's goal.json.

The fast path of the console script (see ``watcher/entry.py``): standard library only, no
typer/rich/apsw/msgspec, so start-to-exit stays far under 100 ms. It never breaks the agent:
``run_hook`` always returns 0 and reports its own errors as one line on stderr.

Rooms: ``mapping`` (pure: payload -> Decision -> new document, the table of docs/readme/hook.md),
``goalfile`` (hostile-input-safe reads, the read-modify-write that loses no other writer's update),
and this module (arguments, which agent a payload is about, the entry point).

Invariants:
- Only the hook-owned keys change (``HOOK_KEYS``); every other key (above all ``dod`` and
  ``dod_contract``) is written back exactly as read, in the same order.
- A goal.json that cannot be parsed, is not a JSON object, is not a regular file, is a symlink or
  is over 1 MiB is left untouched; looking agents up never blocks on such a file either.
"""
from __future__ import annotations

import json
import os
import sys
import time

from watcher.hook.goalfile import (LOCK_TIMEOUT, MAX_GOAL_BYTES, HookError, Number, read_json, read_regular,  # noqa: F401
                                   surrogate_in, update_goal, write_atomic)
from watcher.hook.mapping import (HOOK_KEYS, Decision, Reason, apply, decide, iso_utc,  # noqa: F401
                                  notification_kind)

DEFAULT_GOALS_DIR = "~/.fleet/agents"
MAX_AGENTS_SCANNED = 4096   # goals-dir entries looked at when resolving by session/cwd
MAX_STDIN = 4 * 1024 * 1024
SESSION_KEPT = 200          # characters of a session_id goal.json keeps (and a look-up compares)


def parse_args(argv: list[str], env) -> tuple[str | None, str]:
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
        if not val:  # "--goals-dir=$UNSET": never fall back to ~/.fleet/agents or another agent
            raise HookError(f"{name} needs a value (got an empty one)")
        if name == "--agent":
            agent = val
        else:
            goals = val
        i += 1
    agent = agent or env.get("FLEETWATCH_AGENT") or None
    goals = goals or env.get("FLEETWATCH_GOALS_DIR") or DEFAULT_GOALS_DIR
    return agent, os.path.expanduser(os.path.expandvars(goals))


def valid_agent(agent: str) -> bool:
    return bool(agent) and agent not in (".", "..") and "/" not in agent and "\0" not in agent \
        and not any(ord(c) < 32 or ord(c) == 127 for c in agent)


def _norm(p: str) -> str:
    try:
        p = os.path.expanduser(p)
    except ValueError:  # "~user\0...": the user look-up raises; no user is named so
        pass
    return os.path.normpath(p)


def _real(p: str, memo: dict[str, str]) -> str:
    """``p`` (normalised) with symlinks resolved; a path longer than PATH_MAX (realpath would take
    minutes on a million components) or holding a NUL (realpath raises) names no folder: as it is.
    ``memo``: each folder resolved so far in this run, so that the goal.json cwds, which share
    their parents, cost an ``lstat`` per new component (realpath alone: one per component, every
    entry, doubling the look-up of a 4,000-agent goals dir)."""
    if len(p) > 4096 or "\0" in p:
        return p
    try:
        if not os.path.isabs(p):
            return os.path.realpath(p)
        todo, head = [], p
        while head not in memo:
            up, name = os.path.split(head)
            if not name:  # the root
                memo[head] = os.path.realpath(head)
                break
            todo.append((head, name))
            head = up
        r = memo[head]
        for prefix, name in reversed(todo):  # as realpath: a component that is a link is resolved
            q = os.path.join(r, name)
            r = memo[prefix] = os.path.realpath(q) if os.path.islink(q) else q
        return r
    except (OSError, ValueError):
        return p


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def resolve_agent(agent: str | None, goals_dir: str, payload: dict, env) -> str | None:
    """Which agent this payload is about (None: not part of the fleet, nothing to do).

    Order: explicit agent (flag or $FLEETWATCH_AGENT); a goals-dir entry whose goal.json has the
    payload's ``session_id``; for a SessionStart, one whose ``handoff`` (left by a SessionEnd that
    cleared or resumed) has the payload's cwd; one whose ``cwd`` contains the payload's cwd
    (deepest wins; symlinks resolved too); an existing goals-dir folder named like
    $CLAUDE_PROJECT_DIR or cwd.
    """
    if agent:
        return agent
    session = payload.get("session_id")
    if isinstance(session, str):  # compared as goal.json keeps it: a longer id never matched itself
        session = session[:SESSION_KEPT]
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else ""
    c = _norm(cwd) if cwd else ""
    memo: dict[str, str] = {}
    real = _real(c, memo) if c else ""
    starting = payload.get("hook_event_name") == "SessionStart"
    best, best_len, handed = None, -1, None
    try:
        entries = sorted(os.scandir(goals_dir), key=lambda e: e.name)
    except OSError:
        return None
    for e in entries[:MAX_AGENTS_SCANNED]:
        try:
            if not e.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        doc = read_json(os.path.join(e.path, "goal.json"))
        if not isinstance(doc, dict):
            continue
        if session and doc.get("session_id") == session:
            return e.name
        ho = doc.get("handoff")
        if starting and handed is None and c and isinstance(ho, dict) and isinstance(ho.get("cwd"), str) \
                and ho["cwd"] and _norm(ho["cwd"]) == c:
            handed = e.name
        gcwd = doc.get("cwd")
        if c and isinstance(gcwd, str) and gcwd:
            g = _norm(gcwd)
            rg = _real(g, memo)  # also through symlinks: ~/work -> /data/work, /tmp -> /private/tmp
            if (_within(c, g) or _within(real, rg)) and len(rg) > best_len:
                best, best_len = e.name, len(rg)
    if handed:
        return handed
    if best:
        return best
    for base in (env.get("CLAUDE_PROJECT_DIR") or "", cwd):
        name = os.path.basename(_norm(base)) if base else ""
        if valid_agent(name) and os.path.isdir(os.path.join(goals_dir, name)):
            return name
    if len(entries) > MAX_AGENTS_SCANNED:  # an agent past the cut may be this session's: say so
        raise HookError(f"no agent found for this session among the first {MAX_AGENTS_SCANNED} of "
                        f"{len(entries)} entries of the goals dir: set $FLEETWATCH_AGENT or --agent")
    return None


def tmux_of(env) -> dict | None:
    """``{"socket", "pane"}`` of the tmux pane the hook runs in: $TMUX's socket path (``path,pid,
    session``) and $TMUX_PANE (``%N``); None outside tmux or for a malformed value."""
    pane, tmux = env.get("TMUX_PANE") or "", env.get("TMUX") or ""
    if not (pane.startswith("%") and pane[1:].isdigit() and len(pane) <= 10):
        return None
    sock = tmux.rsplit(",", 2)[0] if tmux.count(",") >= 2 else tmux
    return {"socket": sock if sock.startswith("/") and len(sock) <= 4096 else None, "pane": pane}


def claude_pid(max_up: int = 3) -> int | None:
    """The pid of the Claude Code process that ran this hook: the nearest ancestor (parent, or the
    shell's parent: Claude Code runs a command hook through ``sh -c``) whose name starts with
    ``claude``; None when there is none within ``max_up`` levels or /proc cannot tell (not Linux)."""
    pid = os.getppid()
    for _ in range(max_up):
        if pid <= 1:
            return None
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read(4096)
        except OSError:
            return None
        name, _, rest = stat.partition(b" (")[2].rpartition(b") ")
        if name.startswith(b"claude"):
            return pid
        fields = rest.split()
        pid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    return None


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:
        return b""
    if stream.isatty():
        raise HookError("expects a Claude Code hook payload on stdin (see `fleetwatch hook --help`)")
    buf = getattr(stream, "buffer", None)
    data = buf.read(MAX_STDIN + 1) if buf is not None else stream.read(MAX_STDIN + 1)
    return data.encode() if isinstance(data, str) else data


def _int(text: str):
    """A payload's integer; one over 4300 digits (Python's int() refuses it, so json.loads did) is
    kept as its text: a tool call's input may hold one, and its PermissionRequest still counts."""
    return int(text) if len(text) < 4300 else Number(text)


def _utf8(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _unencodable(e: UnicodeEncodeError, payload, agent) -> str:
    """The refusal line for a goal.json that could not be encoded because of what the payload (or
    the agent id) brought: which field holds the lone surrogate, escaped."""
    char = e.object[e.start:e.start + 1] if isinstance(e.object, str) else None
    bad = surrogate_in(payload, char) if isinstance(payload, dict) else None
    if bad:
        return f"stdin payload has a lone UTF-16 surrogate ({bad[1]!a}) in {bad[0]}, not encodable as UTF-8: ignored"
    if isinstance(agent, str) and not _utf8(agent):
        return f"agent id {agent!a} is not UTF-8 (goal.json could not hold it): ignored"
    return f"goal.json not written: {e.reason} ({char!a})"


def _unusable(e: OSError, goals_dir, agent) -> str:
    """The refusal line, with a hint, for an OSError on the way to goal.json (error path only)."""
    import errno

    where = "--goals-dir or $FLEETWATCH_GOALS_DIR"
    if not isinstance(goals_dir, str) or not isinstance(agent, str):
        return f"cannot update goal.json: {e.strerror or e}"
    folder = os.path.join(goals_dir, agent)
    if e.errno == errno.ENAMETOOLONG:
        if len(agent.encode("utf-8", "surrogatepass")) > 255:
            return (f"agent id {agent[:20] + '...'!r} ({len(agent)} characters) is too long for a folder name "
                    "(at most 255 bytes): use a shorter --agent or $FLEETWATCH_AGENT")
        size = len(folder.encode("utf-8", "surrogatepass"))
        return f"path of the agent folder too long ({size} bytes): use a shorter {where}"
    if e.errno in (errno.ENOTDIR, errno.EEXIST):
        if not os.path.isdir(goals_dir):  # it, or a folder on its path, is a file
            return f"goals dir {goals_dir} is not a folder: point {where} at a folder"
        if os.path.lexists(folder) and not os.path.isdir(folder):
            return f"{folder} is a file, not the agent's folder: move it away or use another --agent"
    denied = e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    hint = " (check the owner and mode of the goals dir)" if denied else ""
    return f"cannot update {e.filename or folder}: {e.strerror or e}{hint}"


def run_hook(argv: list[str], *, stdin: bytes | str | None = None, env=None, now: float | None = None,
             say=None) -> int:
    """Entry point of ``fleetwatch hook``. Always 0; its own errors are one stderr line (``say``:
    given that line instead; the watcher's hook endpoint counts it)."""
    env = os.environ if env is None else env
    _say = say or _say_stderr
    payload = agent = goals_dir = None
    try:
        agent, goals_dir = parse_args(argv, env)
        raw = _read_stdin() if stdin is None else stdin
        if len(raw) > MAX_STDIN:
            raise HookError("stdin payload larger than 4 MiB: ignored")
        try:
            payload = json.loads(raw, parse_int=_int)
        except (ValueError, RecursionError):
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
        sid, wd = payload.get("session_id"), payload.get("cwd")
        session = sid if isinstance(sid, str) else ""
        cwd = wd if isinstance(wd, str) else ""
        path = os.path.join(goals_dir, agent, "goal.json")
        if explicit and not agent.isascii() and not _utf8(agent) and not os.path.isfile(path):
            raise HookError(f"agent id {agent!a} is not UTF-8 (goal.json could not hold it): nothing created")
        where, pid = tmux_of(env), (claude_pid() if stdin is None else None)
        update_goal(path, lambda doc: apply(doc, d, agent, at, session=session[:SESSION_KEPT], cwd=cwd[:4096],
                                            where=where, pid=pid), create=explicit)
    except HookError as e:
        _say(str(e))
    except UnicodeEncodeError as e:  # goal.json's own surrogates are named by update_goal
        _say(_unencodable(e, payload, agent))
    except OSError as e:  # the goals dir or agent folder cannot be made or used
        _say(_unusable(e, goals_dir, agent))
    except Exception as e:  # never break the agent: any failure is one line, exit 0
        _say(f"{type(e).__name__}: {e}")
    return 0


def inert(msg: str) -> str:
    """``msg`` with every character that is not printable (ESC and the other C0/C1 controls, a
    newline, bidi overrides, U+2028, lone surrogates) shown as an escape (``\\x1b``, ``\\u202e``)."""
    if msg.isascii() and msg.isprintable():
        return msg
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in msg)


def _say_stderr(msg: str) -> None:
    """The hook's one stderr line. Its paths and ids come from the environment, the goals dir's
    folder names and the payload: shown ``inert``, nothing in them reaches the terminal as a
    control or forges a second line."""
    print(f"fleetwatch hook: {inert(msg)}", file=sys.stderr)
