"""Launching an agent with its contract (``fleetwatch launch``, and the watcher following a plan).

Invariants
- Everything is checked before anything is written: the agent id (``AGENT_RE``: a folder and a
  tmux window name, no escapes), the contract (``projections.dod.checks.parse_contract``, the
  goal.json rules: no, empty or malformed is refused), the folder (absolute, an existing
  directory), the argv. A refusal is a :class:`LaunchError` (exit 2) and leaves nothing behind.
- goal.json is written atomically (``watcher.hook.goalfile.write_atomic``: a temporary file in
  the same folder, fsynced, renamed over) with the contract, the title, ``cwd`` and state
  ``busy``; readers see no goal.json or the whole one.
- The pin of record: the launched task, contract and folder are also kept beside the event log,
  ``launched/<pin>.json`` (0600, named by the sha256 of its own canonical JSON: a changed file is
  refused), and the ``agent.launched`` event carries that digest: the verifier reads the launched
  contract there, never the agent's goal.json.
- The window is opened on ``[launch] socket``/``session`` (the session created when absent),
  named after the agent, with ``FLEETWATCH_AGENT`` (and the config, log and PATH this launch
  used) in its environment; the command runs through ``env`` (always more than one word, so tmux
  runs it without a shell). Every tmux call is bounded (``TMUX_TIMEOUT``).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from events.errors import FleetwatchError
from events.timefmt import iso
from projections.dod.checks import parse_contract
from watcher.hook.goalfile import HookError, read_regular, write_atomic
from watcher.sources.command import run_bounded

AGENT_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z"   # \Z, not $: "$" also matches before a final newline
TMUX_TIMEOUT = 10.0
MAX_TASK = 20_000           # characters of a task's text
MAX_CONTRACT_BYTES = 262_144


class LaunchError(FleetwatchError):
    """A launch refused (exit 2) or failed (exit 1)."""

    exit_code = 2


@dataclass
class Spec:
    agent: str
    task: str
    contract: Any                    # goal.json's dod_contract: a string or a list of checks
    cwd: str
    argv: list[str]
    plan: str | None = None
    task_id: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def title(self) -> str:
        first = (self.task.strip().splitlines() or [""])[0]
        return first[:200]

    @property
    def digest(self) -> str:
        return parse_contract(self.contract).digest or ""


_MISSING = object()


def read_json(path: str, cap: int) -> Any:
    """A regular file's JSON (``_MISSING`` when absent); raises OSError/HookError (refused: a FIFO,
    a symlink, too large) or ValueError (not JSON)."""
    got = read_regular(path, cap)
    return _MISSING if got is None else json.loads(got[0])


def json_file(path: str, cap: int, what: str) -> Any:
    """The JSON of a file a person named (``--contract @FILE``, ``--plan FILE``); refused (exit 2,
    naming ``what``) when it is absent, not a regular file, over ``cap`` bytes or not JSON."""
    p = os.path.expanduser(path)
    try:
        value = read_json(p, cap)
    except (OSError, HookError) as e:
        raise refuse(f"cannot read {what}: {getattr(e, 'strerror', None) or e}", path=p) from None
    except (ValueError, RecursionError):
        raise refuse(f"{what} is not valid JSON", path=p) from None
    if value is _MISSING:
        raise refuse(f"{what} does not exist", path=p)
    return value


def refuse(msg: str, hint: str = "", path: str = "") -> LaunchError:
    return LaunchError(msg, op="launch", path=path or None, hint=hint)


def check_agent(agent: str) -> str:
    if not isinstance(agent, str) or not re.match(AGENT_RE, agent):
        raise refuse(f"agent id {agent!r} is not usable: letters, digits, - and _ (1-64, starting with a letter or digit)"
                     if isinstance(agent, str) and len(agent) <= 80 else "agent id is not usable",
                     "it names a folder and a tmux window")
    return agent


def contract_arg(text: str | None) -> Any:
    """``--contract JSON|@FILE`` -> the dod_contract value (validated as goal.json's). Text that
    does not start like JSON (``[``, ``{``, ``"``) is a free-text contract."""
    if text is None:
        raise refuse("no contract: every agent is launched with a DoD contract (--contract JSON or @FILE)",
                     "e.g. --contract '[{\"id\": \"tests\", \"kind\": \"cmd\", \"cmd\": [\"make\", \"test\"]}]'")
    src = "--contract"
    if text.startswith("@"):
        value = json_file(text[1:], MAX_CONTRACT_BYTES, "the contract file")
        src = text
    else:
        s = text.strip()
        if s[:1] in ("[", "{", '"'):
            try:
                value = json.loads(s)
            except (ValueError, RecursionError):
                raise refuse(f"{src} is not valid JSON", "a list of checks, a JSON string, or plain text") from None
        else:
            value = text
    return check_contract(value, src)


def check_contract(value: Any, where: str = "dod_contract") -> Any:
    c = parse_contract(value)
    if c.error:
        raise refuse(f"{where}: {c.error}")
    if c.digest is None:
        raise refuse(f"{where}: the contract is empty", "a non-empty text or list of checks")
    return value


def check_cwd(cwd: str | None) -> str:
    d = os.path.abspath(os.path.expanduser(cwd or os.getcwd()))
    if not os.path.isdir(d):
        raise refuse("the working folder does not exist", path=d)
    return d


def check_argv(argv: list[str]) -> list[str]:
    if not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
        raise refuse("the agent command is empty", "give one after -- or set [launch] argv")
    return argv


def prompt(spec: Spec) -> str:
    """The agent's first prompt: the task, the contract and how to say where it stands."""
    contract = spec.contract if isinstance(spec.contract, str) else json.dumps(spec.contract, indent=1)
    return (f"{spec.task.strip()}\n\n"
            f"Definition of done (the contract you will be judged against, by an independent verifier):\n"
            f"{contract}\n\n"
            f"Work in {spec.cwd}. When every part of the contract holds, run `fleetwatch claim done` "
            f"(it tells the fleet you are done; your agent id is in $FLEETWATCH_AGENT). If you are blocked run "
            f"`fleetwatch claim blocked --note WHY`; for a question `fleetwatch claim question --note TEXT`; "
            f"back at work: `fleetwatch claim working`.")


def command(spec: Spec) -> list[str]:
    text = prompt(spec)
    return [a.replace("{prompt}", text).replace("{agent}", spec.agent) for a in spec.argv]


def goal_doc(spec: Spec, now: float) -> dict[str, Any]:
    return {"agent": spec.agent, "task": spec.title, "state": "busy", "phase": "haciendo",
            "dod_contract": spec.contract, "cwd": spec.cwd, "last_activity": iso(now), "launched_at": iso(now)}


def goals_root(goals_dir: str) -> str:
    return os.path.abspath(os.path.expanduser(os.path.expandvars(goals_dir)))


def goal_path(goals_dir: str, agent: str) -> str:
    return os.path.join(goals_root(goals_dir), agent, "goal.json")


def unwatched(cfg: Any, agent: str) -> bool:
    """True when no goals source's glob takes this agent's goal.json (the watcher would not see it)."""
    import fnmatch

    p = goal_path(cfg.launch.goals_dir, agent)
    return not any(s.kind == "goals" and s.glob and fnmatch.fnmatch(p, os.path.abspath(os.path.expanduser(
        os.path.expandvars(s.glob)))) for s in cfg.sources)


def write_goal(path: str, doc: dict[str, Any]) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    if os.path.islink(folder) or not os.path.isdir(folder):
        raise refuse("the agent's folder is not a plain folder", path=folder)
    m = os.umask(0)
    os.umask(m)
    write_atomic(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode(), 0o644 & ~m)


# ---- the pin of record beside the log -----------------------------------------------------
def _canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def pin_record(spec: Spec) -> dict[str, Any]:
    return {"agent": spec.agent, "task": spec.task, "dod_contract": spec.contract, "cwd": spec.cwd}


def store(folder: str, obj: Any) -> str:
    """``obj`` as ``folder/<sha256>.json`` (0600, atomically); its digest."""
    data = _canon(obj)
    sha = hashlib.sha256(data).hexdigest()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    write_atomic(os.path.join(folder, f"{sha}.json"), data, 0o600)
    return sha


def load(folder: str, sha: str) -> Any | None:
    """What :func:`store` kept under ``sha``, or None (absent, unreadable, or not what it is named)."""
    if not re.match(r"^[0-9a-f]{64}$", sha or ""):
        return None
    try:
        got = read_json(os.path.join(folder, f"{sha}.json"), 4 * MAX_CONTRACT_BYTES + MAX_TASK * 4)
    except (OSError, HookError, ValueError, RecursionError):
        return None
    if got is _MISSING or hashlib.sha256(_canon(got)).hexdigest() != sha:
        return None
    return got


def pins_dir(db_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(db_path)), "launched")


def plans_dir(db_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(db_path)), "plans")


# ---- tmux -------------------------------------------------------------------------------------
def tmux(socket: str, *args: str, timeout: float = TMUX_TIMEOUT) -> tuple[bool, str]:
    r = run_bounded(["tmux", "-u", "-L", socket, *args], timeout, 65536)
    ok = r.error_class is None
    return ok, (r.out or b"").decode("utf-8", "replace").strip() if ok else (r.error or "tmux failed")


def windows(socket: str, session: str) -> list[tuple[str, str]] | None:
    """(window id, name) of the session's windows; [] without a server or session; None: tmux failed."""
    ok, out = tmux(socket, "list-windows", "-t", f"={session}", "-F", "#{window_id}\t#{window_name}")
    if not ok:
        return [] if out.startswith("exit status 1") else None   # tmux's no server, no such session
    return [tuple(line.split("\t", 1)) for line in out.splitlines() if "\t" in line]  # type: ignore[misc]


def window_of(socket: str, session: str, agent: str) -> str | None:
    return next((wid for wid, name in windows(socket, session) or [] if name == agent), None)


def open_window(socket: str, session: str, spec: Spec) -> str:
    """Open the agent's window (the session too when absent); its window id (``@N``)."""
    env = [f"FLEETWATCH_AGENT={spec.agent}"] + [f"{k}={v}" for k, v in sorted(spec.env.items())]
    flags = ["-d", "-n", spec.agent, "-c", spec.cwd, "-P", "-F", "#{window_id}"]
    for e in env:
        flags += ["-e", e]
    argv = ["env", *env, *command(spec)]
    ok, out = False, ""
    for _ in range(3):   # the session's last window may close (and the server exit) between two calls
        there, _ = tmux(socket, "has-session", "-t", f"={session}")
        if there:
            ok, out = tmux(socket, "new-window", *flags, "-t", f"={session}:", "--", *argv)
        else:
            ok, out = tmux(socket, "new-session", "-s", session, "-x", "200", "-y", "50", *flags, "--", *argv)
        if ok:
            break
    if not ok or not out.startswith("@"):
        raise LaunchError(f"could not open the agent's tmux window: {out[:200]}", op="launch",
                          hint=f"check `tmux -L {socket} ls`")
    return out.splitlines()[0]


def kill_window(socket: str, target: str) -> bool:
    return tmux(socket, "kill-window", "-t", target)[0]


def send_text(socket: str, target: str, text: str) -> bool:
    """``text`` into the target pane as one paste (bracketed where the program asked for it), then
    Enter as a key of its own. Typed key by key, a long line reached Claude Code as a burst its
    paste detection took in whole, the Enter with it: the line stayed in its input box, unsent."""
    buf = f"fleetwatch-{os.getpid()}"   # one worker thread sends; -d deletes the buffer once pasted
    ok, _ = tmux(socket, "set-buffer", "-b", buf, "--", text)
    ok = ok and tmux(socket, "paste-buffer", "-p", "-d", "-b", buf, "-t", target)[0]
    return ok and tmux(socket, "send-keys", "-t", target, "Enter")[0]


def env_for(cfg: Any, db: str | None) -> dict[str, str]:
    """What a launched agent's ``fleetwatch claim`` and Claude Code hook need to find this fleet:
    the config, the log, the goals folder (``$FLEETWATCH_GOALS_DIR``, read by a hook installed
    without ``--goals-dir``) and the folder of this fleetwatch on PATH."""
    import shutil
    import sys

    config_path = cfg.config_path
    env: dict[str, str] = {"FLEETWATCH_GOALS_DIR": goals_root(cfg.launch.goals_dir)}
    if config_path:
        env["FLEETWATCH_CONFIG"] = os.path.abspath(config_path)
    if db:
        env["FLEETWATCH_DB"] = os.path.abspath(db)
    exe = shutil.which("fleetwatch") or os.path.join(os.path.dirname(sys.executable), "fleetwatch")
    path = os.environ.get("PATH", "/usr/bin:/bin")
    here = os.path.dirname(os.path.abspath(exe))
    env["PATH"] = path if here in path.split(os.pathsep) else f"{here}{os.pathsep}{path}"
    return env


def start(spec: Spec, socket: str, session: str, goals_dir: str, db_path: str, now: float | None = None) -> tuple[str, str]:
    """Write goal.json and the pin of record, open the window: (target, pin digest). A failure
    (exit 2 for a folder that cannot be written) takes the goal.json it wrote away again."""
    now = time.time() if now is None else now
    path = where = goal_path(goals_dir, spec.agent)
    wrote = False
    try:
        try:
            write_goal(path, goal_doc(spec, now))
            wrote, where = True, pins_dir(db_path)
            pin = store(where, pin_record(spec))
        except (OSError, HookError) as e:   # a folder not writable, a full disk: said, never a traceback
            raise LaunchError(f"cannot write: {getattr(e, 'strerror', None) or e}", op="launch", path=where,
                              hint="check the folder's permissions and free space") from None
        target = open_window(socket, session, spec)
    except BaseException:
        if wrote:   # only the file this launch wrote (never through a folder it refused)
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    return target, pin
