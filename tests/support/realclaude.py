"""The real Claude Code client in real tmux, talking to ``tests/support/fakeapi.py`` on loopback.

``make claude-code`` installs the pinned clients into ``tools/claude-code/<flavour>/node_modules``
(``VERSIONS``: folder -> version). ``client(flavour)`` is the path of that ``claude`` or None;
``require(flavour)`` skips the test with the reason when it is missing.

``Claude(tmp, flavour, fake)`` prepares a test HOME: ``~/.claude.json`` with onboarding done, the
dummy API key approved and the working folder trusted, so no first-run dialog shows; the environment
points the client at the fake server (``ANTHROPIC_BASE_URL``), with ``ANTHROPIC_API_KEY=dummy`` and
nonessential traffic off, so it connects to nothing else. ``start()`` runs ``claude`` in a window
of a private tmux server (``tmux -L``); ``keys()``/``type()`` drive it, ``screen()`` captures the
pane (tests look at it only for a dialog's presence), ``agents()`` reads ``claude agents --json``
(the client's own truth: status busy/idle/waiting), ``hook_runs()`` parses the ``--debug-file``
log for the hooks it ran and how long each took.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "claude-code"
VERSIONS = {"current": "2.1.337", "oldest": "2.1.145"}
FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
# the hook events of each version's settings schema (read from the installed client's bundle)
SCHEMA_EVENTS = {
    "current": ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
                "UserPromptSubmit", "UserPromptExpansion", "SessionStart", "SessionEnd", "Stop", "StopFailure",
                "Interrupt", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "PreModelSwitch",
                "PostModelSwitch", "PermissionRequest", "PermissionDenied", "Setup", "TeammateIdle", "TaskCreated",
                "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange", "WorktreeCreate",
                "WorktreeRemove", "InstructionsLoaded", "CwdChanged", "FileChanged", "DirectoryAdded",
                "MessageDisplay", "PreSkillShellCommand"),
    "oldest": ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
               "UserPromptSubmit", "UserPromptExpansion", "SessionStart", "SessionEnd", "Stop", "StopFailure",
               "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "PermissionRequest",
               "PermissionDenied", "Setup", "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation",
               "ElicitationResult", "ConfigChange", "WorktreeCreate", "WorktreeRemove", "InstructionsLoaded",
               "CwdChanged", "FileChanged"),
}
MATCHER_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
                            "PermissionDenied", "Notification", "SessionStart", "SessionEnd", "PreCompact",
                            "PostCompact", "SubagentStart", "SubagentStop"})
KEY = "sk-ant-api03-dummy-fleetwatch-tests-0000000000000000AA"


def flavour_params() -> list:
    """pytest params of the versions a real-client test runs on: the current one always, the oldest
    supported one in ``make drills`` (``FW_DRILL_LONG=1``), to keep ``make test`` short. Both are
    marked ``drill`` (``make drills`` selects them)."""
    import pytest

    long = bool(os.environ.get("FW_DRILL_LONG"))
    why = f"Claude Code {VERSIONS['oldest']} runs in make drills (FW_DRILL_LONG=1); make test runs {VERSIONS['current']}"
    return [pytest.param("current", id=f"current-{VERSIONS['current']}", marks=pytest.mark.drill),
            pytest.param("oldest", id=f"oldest-{VERSIONS['oldest']}",
                         marks=[pytest.mark.drill, pytest.mark.skipif(not long, reason=why)])]


def client(flavour: str) -> str | None:
    p = TOOLS / flavour / "node_modules" / ".bin" / "claude"
    return str(p) if p.exists() and os.access(p, os.X_OK) else None


def missing(flavour: str) -> str | None:
    """Why the real-client tests of ``flavour`` cannot run here (None: they can)."""
    if shutil.which("tmux") is None:
        return "tmux is not installed"
    if client(flavour) is None:
        how = "npm is not installed" if shutil.which("npm") is None else "run `make claude-code` (npm ci)"
        return f"Claude Code {VERSIONS[flavour]} is not installed in tools/claude-code/{flavour}: {how}"
    return None


def require(flavour: str) -> str:
    import pytest

    why = missing(flavour)
    if why:
        pytest.skip(why)
    return client(flavour)  # type: ignore[return-value]


def wait_for(cond, timeout: float = 60.0, step: float = 0.1, what: str = "condition"):
    """Poll ``cond()`` until it returns a truthy value (returned); AssertionError after ``timeout``."""
    end = time.monotonic() + timeout
    last = None
    while True:
        last = cond()
        if last:
            return last
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(step)


def base_env() -> dict:
    """The test process's environment without anything of the user's Claude Code or fleetwatch."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("FLEETWATCH_", "CLAUDE", "ANTHROPIC_", "TMUX"))}


class Claude:
    """One test HOME, one private tmux server, one ``claude`` (restartable) in window ``win``."""

    def __init__(self, tmp: Path, flavour: str, fake, *, agent: str | None = None, win: str = "a1",
                 workdir: Path | None = None, settings: dict | None = None, extra_env: dict | None = None):
        self.flavour, self.fake, self.win, self.agent = flavour, fake, win, agent
        self.bin = require(flavour)
        self.home = tmp / "home"
        self.work = workdir or (tmp / "work" / win)
        self.goals = tmp / "agents"
        self.debug = tmp / f"claude-debug-{win}.log"
        self.socket = f"fwrc{os.getpid()}x{id(self) % 100000}"
        self.tmp = tmp / "claude-tmp"  # the client's own temporary files (else /tmp/claude-UID, never removed)
        for d in (self.home / ".claude", self.work, self.goals, self.tmp):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._write_state(settings or {})
        self.env = {**base_env(), "HOME": str(self.home), "ANTHROPIC_BASE_URL": fake.url,
                    "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
                    "CLAUDE_CODE_MAX_RETRIES": "0", "FLEETWATCH_GOALS_DIR": str(self.goals),
                    "CLAUDE_CODE_TMPDIR": str(self.tmp),
                    # no git clone of the plugin marketplace (it tries one despite the above)
                    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
                    "TERM": "xterm-256color", "LANG": "C.UTF-8", "SHELL": "/bin/bash",
                    **({"FLEETWATCH_AGENT": agent} if agent else {}), **(extra_env or {})}
        self.started = False

    # ------------------------------------------------------------ test HOME

    def _write_state(self, settings: dict) -> None:
        work = str(self.work)
        state = {"hasCompletedOnboarding": True, "lastOnboardingVersion": VERSIONS[self.flavour],
                 "numStartups": 5, "theme": "dark", "hasSeenTasksHint": True, "hasUsedBackslashReturn": True,
                 "bypassPermissionsModeAccepted": False, "autoUpdates": False,
                 "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
                 "projects": {work: {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                                     "allowedTools": [], "projectOnboardingSeenCount": 1,
                                     "hasClaudeMdExternalIncludesApproved": False}}}
        (self.home / ".claude.json").write_text(json.dumps(state, indent=2))
        # manual permission mode (dialogs for commands that change things); auto mode off, so that no
        # "make auto mode your default?" dialog shows at start
        s = {"permissions": {"defaultMode": "default", "disableAutoMode": "disable"}, "autoUpdates": False,
             **settings}
        path = self.home / ".claude" / "settings.json"
        if not path.exists():
            path.write_text(json.dumps(s, indent=2))

    def ensure_fleetwatch_on(self, events) -> list[str]:
        """Add the installed ``fleetwatch hook`` command to each of ``events`` that ``hook install``
        left out (returned), for events the mapping handles but the install does not yet add."""
        s = self.settings()
        hooks = s.setdefault("hooks", {})
        ours = next((dict(h) for groups in hooks.values() for g in groups for h in g.get("hooks", [])
                     if "fleetwatch" in str(h.get("command", "")) or "/hook" in str(h.get("url", ""))), None)
        assert ours, "hook install wrote no fleetwatch hook"
        missing = [e for e in events if e not in hooks]
        for ev in missing:
            hooks[ev] = [{"hooks": [ours]}]
        (self.home / ".claude" / "settings.json").write_text(json.dumps(s, indent=2))
        return missing

    def settings(self) -> dict:
        return json.loads((self.home / ".claude" / "settings.json").read_text())

    def hook_install(self, *args: str) -> subprocess.CompletedProcess:
        """``fleetwatch hook install`` into this HOME's ~/.claude/settings.json (PATH finds this claude)."""
        env = {**self.env, "PATH": f"{Path(self.bin).parent}:{self.env.get('PATH', '')}"}
        r = subprocess.run([FLEETWATCH, "hook", "install", "--goals-dir", str(self.goals), *args],
                           env=env, capture_output=True, text=True, timeout=120, input="")
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
        return r

    def add_hook(self, command: str, events, matcher: str | None = "*") -> None:
        """One more command hook on each of ``events`` in this HOME's ~/.claude/settings.json."""
        s = self.settings()
        hooks = s.setdefault("hooks", {})
        for ev in events:
            group = {"hooks": [{"type": "command", "command": command, "timeout": 10}]}
            if matcher is not None and ev in MATCHER_EVENTS:
                group = {"matcher": matcher, **group}
            hooks.setdefault(ev, []).append(group)
        (self.home / ".claude" / "settings.json").write_text(json.dumps(s, indent=2))

    def record_hooks(self, events=None) -> Path:
        """The hook recorder (tests/support/hookrecorder.py: event names and payload keys, no content)
        on ``events`` (default: every event of this version's schema); returns its log."""
        log = self.home.parent / f"hooks-{self.win}.jsonl"
        rec = Path(__file__).with_name("hookrecorder.py")
        self.add_hook(f"{_q(sys.executable)} {_q(str(rec))} {_q(str(log))}", events or SCHEMA_EVENTS[self.flavour])
        self.hook_log = log
        return log

    def recorded(self) -> list[dict]:
        try:
            lines = self.hook_log.read_text().splitlines()
        except (OSError, AttributeError):
            return []
        return [json.loads(x) for x in lines if x.strip()]

    def recorded_events(self) -> list[str]:
        return [r["event"] for r in self.recorded()]

    # ------------------------------------------------------------ tmux

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=30, check=check, env=self.env)

    def start(self, *args: str, wait_ready: bool = True) -> "Claude":
        """Start ``claude ARGS`` in window ``win`` (a new tmux session on first start, else a new
        window), then wait for its prompt."""
        cmd = [self.bin, "--debug-file", str(self.debug), *args]
        shell = " ".join(_q(c) for c in cmd)
        envs = [x for k, v in self.env.items() for x in ("-e", f"{k}={v}")]
        if not self.server_up():
            self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", self.win, "-x", "160", "-y", "50",
                      "-c", str(self.work), *envs, shell)
            self.started = True
        else:
            self.tmux("new-window", "-d", "-t", "fleet:", "-n", self.win, "-c", str(self.work), *envs, shell)
        if wait_ready:
            self.wait_ready()
        return self

    def start_shell(self) -> None:
        """A bash window (``claude`` typed into it later: ``type(self.bin ...)``)."""
        envs = [x for k, v in self.env.items() for x in ("-e", f"{k}={v}")]
        if not self.server_up():
            self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", self.win, "-x", "160", "-y", "50",
                      "-c", str(self.work), *envs, "bash --norc --noprofile")
            self.started = True
        else:
            self.tmux("new-window", "-d", "-t", "fleet:", "-n", self.win, "-c", str(self.work), *envs,
                      "bash --norc --noprofile")

    def server_up(self) -> bool:
        """The private tmux server runs with the session ``fleet`` (it exits with its last window)."""
        return self.started and self.tmux("has-session", "-t", "=fleet", check=False).returncode == 0

    def command_line(self, *args: str) -> str:
        return " ".join(_q(c) for c in [self.bin, "--debug-file", str(self.debug), *args])

    def target(self) -> str:
        return f"=fleet:{self.win}"

    def screen(self) -> str:
        r = self.tmux("capture-pane", "-p", "-t", self.target(), check=False)
        return r.stdout if r.returncode == 0 else ""

    def keys(self, *keys: str) -> None:
        """tmux key names (``Enter``, ``Escape``, ``Down``, ``C-c``) sent as they are."""
        self.tmux("send-keys", "-t", self.target(), *keys)

    def type(self, text: str, enter: bool = True) -> None:
        """Literal text, then Enter (sent apart: a paste ending in a newline is not a submit)."""
        self.tmux("send-keys", "-t", self.target(), "-l", text)
        if enter:
            time.sleep(0.3)
            self.keys("Enter")

    def pane_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", self.target(), "#{pane_pid}").stdout.strip())

    def pane_id(self) -> str:
        return self.tmux("display-message", "-p", "-t", self.target(), "#{pane_id}").stdout.strip()

    def window_alive(self) -> bool:
        r = self.tmux("list-windows", "-t", "=fleet", "-F", "#{window_name}", check=False)
        return r.returncode == 0 and self.win in r.stdout.split()

    def wait_screen(self, pattern: str, timeout: float = 60.0) -> str:
        rx = re.compile(pattern)
        return wait_for(lambda: (s := self.screen()) and rx.search(s) and s, timeout, 0.2,
                        f"screen to show /{pattern}/ in {self.win}")

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Until the session is listed by ``claude agents --json`` (its prompt is up)."""
        self.wait_screen(r"(?m)^\S*\s*(>|❯)\s", timeout)

    def kill(self) -> None:
        if self.started:
            self.tmux("kill-server", check=False)
            self.started = False

    def close(self) -> None:
        self.kill()

    # ------------------------------------------------------------ the client's own truth

    def agents(self) -> list[dict]:
        """``claude agents --json`` run in this HOME: the client's live sessions."""
        r = subprocess.run([self.bin, "agents", "--json"], env=self.env, capture_output=True, text=True,
                           timeout=60, cwd=str(self.work), stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            return []
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            return []
        return doc if isinstance(doc, list) else []

    def session(self) -> dict | None:
        """This window's session in ``agents()`` (by the cwd; the newest)."""
        mine = [a for a in self.agents() if a.get("cwd") == str(self.work)]
        return max(mine, key=lambda a: a.get("startedAt") or 0) if mine else None

    def status(self) -> str | None:
        s = self.session()
        return s.get("status") if s else None

    def wait_status(self, *statuses: str, timeout: float = 60.0) -> dict:
        return wait_for(lambda: (s := self.session()) and s.get("status") in statuses and s, timeout, 0.3,
                        f"claude agents --json status in {statuses}")

    def claude_pid(self) -> int | None:
        """The pid of the ``claude`` process in the window (the pane's process or its child)."""
        pid = self.pane_pid()
        for p in [pid, *_children(pid)]:
            try:
                exe = os.readlink(f"/proc/{p}/exe")
            except OSError:
                continue
            if "claude" in os.path.basename(exe) or exe == os.path.realpath(self.bin):
                return p
        return None

    def kill_claude(self, sig: int = signal.SIGKILL) -> None:
        pid = self.claude_pid()
        assert pid is not None, "no claude process in the pane"
        os.kill(pid, sig)

    # ------------------------------------------------------------ the client's debug log

    def debug_text(self) -> str:
        try:
            return self.debug.read_text(errors="replace")
        except OSError:
            return ""

    def hook_runs(self) -> list[tuple[str, str, float]]:
        """(event, command, milliseconds) for every command hook the debug log says finished."""
        return parse_hook_runs(self.debug_text())


HOOK_RUN = re.compile(r"Hooks: ([A-Za-z]+)(?::\S*)? \[(.*)\] finished with status -?\d+ \((\d+(?:\.\d+)?)ms\)")


def parse_hook_runs(text: str) -> list[tuple[str, str, float]]:
    """The command hooks a ``--debug-file`` log shows finished, as (event, command, ms), from its
    ``Hooks: <Event>[:<matcher value>] [<command>] finished with status N (<ms>ms)`` lines."""
    return [(m.group(1), m.group(2), float(m.group(3))) for m in HOOK_RUN.finditer(text)]


def _q(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _children(pid: int) -> list[int]:
    out = []
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for k in kids:
        out.append(int(k))
        out.extend(_children(int(k)))
    return out
