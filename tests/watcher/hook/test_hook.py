"""fleetwatch hook: mapping table, goal.json rewrite, agent lookup, concurrency, install."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.cli.hook import HOOK_EVENTS, is_ours, merge
from watcher.hook.adapter import Decision, HookError, Reason, apply, decide, iso_utc, run_hook, update_goal
from watcher.hook.mapping import tool_fingerprint

from tests.support.hookinput import A01, BASE, NOW
from tests.support.exe import ROOT, TESTS

VENV_BIN = Path(sys.executable).parent
FLEETWATCH = str(VENV_BIN / "fleetwatch")
FIXTURE = TESTS / "fixtures" / "goals" / "a01" / "goal.json"


def payload(event: str, **extra) -> dict:
    return {**BASE, "hook_event_name": event, **extra}


def seed(goals: Path, agent: str = "a01", doc: dict | None = None, **over) -> Path:
    p = goals / agent / "goal.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({**(doc or A01), **over}, indent=2) + "\n")
    return p


def run_cli(args: list[str], data, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "CLAUDE_"))}
    e.update(env or {})
    inp = data if isinstance(data, (bytes, str)) else json.dumps(data)
    return subprocess.run([FLEETWATCH, "hook", *args], input=inp.encode() if isinstance(inp, str) else inp,
                          capture_output=True, env=e, cwd=cwd, timeout=30)


# ---------------------------------------------------------------- mapping (rows: tests/watcher/hook/test_hook_events.py)

def test_mapping_rows_end_to_end_through_console_script(tmp_path):
    """Three rows through the real `fleetwatch hook` process (fast path of watcher/entry.py)."""
    path = seed(tmp_path)
    perm = payload("PermissionRequest", tool_name="Bash", tool_input={"command": "rm -rf build"})
    post = payload("PostToolUse", tool_name="Bash", tool_input={"command": "rm -rf build"}, tool_response={})
    for pl, state in ((perm, "waiting"), (post, "busy"), (payload("Stop"), "idle")):
        r = run_cli(["--agent", "a01", "--goals-dir", str(tmp_path)], pl)
        assert (r.returncode, r.stderr) == (0, b"")
        doc = json.loads(path.read_text())
        assert doc["state"] == state and doc["dod_contract"] == A01["dod_contract"]
        assert doc["last_activity"].endswith("Z") and len(doc["last_activity"]) == 20


def test_fast_path_imports_no_heavy_modules(tmp_path):
    code = (
        "import sys\n"
        f"sys.argv = ['fleetwatch', 'hook', '--agent', 'a9', '--goals-dir', {str(tmp_path)!r}]\n"
        "from watcher.entry import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print(sorted(m for m in ('typer', 'rich', 'click', 'apsw', 'msgspec', 'events') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload("Stop")).encode(),
                       capture_output=True, cwd=ROOT, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == "[]"
    assert json.loads((tmp_path / "a9" / "goal.json").read_text())["state"] == "idle"


def test_hook_with_a_tool_use_id_loads_no_hashlib(tmp_path):
    """hashlib (OpenSSL) is only for tool events without ``tool_use_id`` (their fingerprint):
    the common hook does not pay its import (issue 19: the hook's start)."""
    code = (
        "import sys\n"
        f"sys.argv = ['fleetwatch', 'hook', '--agent', 'a9', '--goals-dir', {str(tmp_path)!r}]\n"
        "from watcher.entry import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print(sorted(m for m in ('hashlib', '_hashlib') if m in sys.modules))\n"
    )
    pre = payload("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_use_id="toolu_9")
    r = subprocess.run([sys.executable, "-c", code], input=json.dumps(pre).encode(),
                       capture_output=True, cwd=ROOT, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == "[]"
    assert json.loads((tmp_path / "a9" / "goal.json").read_text())["state"] == "busy"
    no_id = dict(pre)
    del no_id["tool_use_id"]
    digest = hashlib.sha256(json.dumps({"command": "ls"}, sort_keys=True).encode()).hexdigest()[:12]
    assert tool_fingerprint(no_id) == f"Bash#{digest}"


# ---------------------------------------------------------------- pure apply

def test_apply_creates_minimal_goal_and_never_creates_for_session_end():
    # no goal.json yet: {agent, state, last_activity} (+ hook_event); no contract -> MAL_LANZADO later
    new = apply(None, decide(payload("UserPromptSubmit")), "a5", NOW)
    assert new == {"agent": "a5", "state": "busy", "last_activity": "2026-11-30T20:00:00Z", "hook_at": NOW,
                   "hook_event": "UserPromptSubmit"}
    # activity-only event on a missing file: the agent is working
    assert apply(None, decide(payload("SubagentStop")), "a5", NOW)["state"] == "busy"
    # SessionEnd of an agent with no goal.json: nothing to end
    assert apply(None, decide(payload("SessionEnd")), "a5", NOW) is None


def test_apply_does_not_mutate_and_clears_owned_marks():
    ended = apply(dict(A01), decide(payload("SessionEnd", reason="logout")), "a01", NOW)
    assert ended["ended"] is True and ended["ended_at"] == iso_utc(NOW)
    failed = apply(dict(A01), decide(payload("StopFailure", error_type="server_error")), "a01", NOW)
    assert failed["stop_error"] == "server_error"
    # a resumed session brings the agent back: ended marks go, it sits at its prompt
    back = apply(ended, decide(payload("SessionStart", source="resume")), "a01", NOW + 5)
    assert "ended" not in back and "ended_at" not in back and back["state"] == "idle"
    # a new turn after a failure: the error kind goes; subagent activity keeps it
    assert "stop_error" in apply(failed, decide(payload("SubagentStop")), "a01", NOW)
    assert "stop_error" not in apply(failed, decide(payload("UserPromptSubmit")), "a01", NOW)
    assert "ended" in ended and "stop_error" in failed  # inputs not mutated


def test_stop_failure_error_kind_fallbacks():
    # error_type is the documented key; `error` alone (short code) is the fallback; nothing -> unknown
    assert decide(payload("StopFailure", error="overloaded")).stop_error == "overloaded"
    assert decide(payload("StopFailure")).stop_error == "unknown"
    assert decide({"hook_event_name": 3}).reason is Reason.UNKNOWN_EVENT
    assert isinstance(decide(payload("Stop")), Decision)


# ---------------------------------------------------------------- errors never break the agent

def test_unparseable_goal_json_left_untouched(tmp_path):
    p = tmp_path / "a01" / "goal.json"
    p.parent.mkdir()
    p.write_bytes(b'{"agent": "a01", "state": "busy",')  # torn by some other writer
    os.utime(p, (1000, 1000))
    r = run_cli(["--agent", "a01", "--goals-dir", str(tmp_path)], payload("Stop"))
    assert r.returncode == 0
    assert r.stderr.decode().count("\n") == 1 and "not valid JSON" in r.stderr.decode()
    assert p.read_bytes() == b'{"agent": "a01", "state": "busy",' and p.stat().st_mtime == 1000
    p.write_text("[1, 2]")  # valid JSON but not an object
    r = run_cli(["--agent", "a01", "--goals-dir", str(tmp_path)], payload("Stop"))
    assert r.returncode == 0 and "not a JSON object" in r.stderr.decode()
    assert p.read_text() == "[1, 2]"


@pytest.mark.parametrize("args,data,msg", [
    (["--bogus"], json.dumps(payload("Stop")), "unknown argument"),  # unknown flag
    (["--agent"], json.dumps(payload("Stop")), "needs a value"),  # flag without value
    (["--agent", "a1"], "not json", "not a JSON hook payload"),  # garbage on stdin
    (["--agent", "a1"], "[]", "not a JSON object"),  # JSON but not an object
    (["--agent", "../evil"], json.dumps(payload("Stop")), "invalid agent id"),  # path escape
])
def test_own_errors_are_one_line_and_exit_0(tmp_path, args, data, msg):
    r = run_cli([*args, "--goals-dir", str(tmp_path)] if args != ["--agent"] else args, data)
    assert r.returncode == 0
    err = r.stderr.decode()
    assert err.startswith("fleetwatch hook: ") and err.count("\n") == 1 and msg in err
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil").exists()


def test_lock_timeout_skips_update(tmp_path):
    import fcntl

    path = seed(tmp_path)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(HookError, match="lock busy"):
            update_goal(str(path), lambda d: {**d, "state": "idle"}, timeout=0.05)
    finally:
        os.close(fd)
    assert json.loads(path.read_text())["state"] == "busy"
    assert update_goal(str(path), lambda d: {**d, "state": "idle"}) is True


# ---------------------------------------------------------------- agent lookup

def test_agent_from_env_and_flag_precedence(tmp_path):
    seed(tmp_path, "a01")
    seed(tmp_path, "a02", {**A01, "agent": "a02"})
    r = run_cli(["--goals-dir", str(tmp_path)], payload("Stop"), env={"FLEETWATCH_AGENT": "a02"})
    assert r.returncode == 0 and r.stderr == b""
    assert json.loads((tmp_path / "a02" / "goal.json").read_text())["state"] == "idle"
    assert json.loads((tmp_path / "a01" / "goal.json").read_text())["state"] == "busy"
    # --agent beats the env; $FLEETWATCH_GOALS_DIR names the folder
    run_cli(["--agent", "a01"], payload("Stop"), env={"FLEETWATCH_AGENT": "a02", "FLEETWATCH_GOALS_DIR": str(tmp_path)})
    assert json.loads((tmp_path / "a01" / "goal.json").read_text())["state"] == "idle"


def test_agent_from_session_cwd_and_project_dir(tmp_path):
    g = tmp_path / "goals"
    seed(g, "by-session", {**A01, "agent": "by-session", "session_id": "S-42"})
    seed(g, "outer", {**A01, "agent": "outer", "cwd": "/srv/work"})
    seed(g, "inner", {**A01, "agent": "inner", "cwd": "/srv/work/inner/"})
    (g / "proj").mkdir()
    state = lambda a: json.loads((g / a / "goal.json").read_text())["state"]  # noqa: E731
    # 1. session_id recorded in a goal.json wins over cwd
    run_hook(["--goals-dir", str(g)], stdin=json.dumps({**payload("Stop"), "session_id": "S-42", "cwd": "/srv/work"}), env={}, now=NOW)
    assert (state("by-session"), state("outer")) == ("idle", "busy")
    # 2. cwd inside an agent's cwd, the deepest one wins
    run_hook(["--goals-dir", str(g)], stdin=json.dumps({**payload("Stop"), "cwd": "/srv/work/inner/src"}), env={}, now=NOW)
    assert (state("inner"), state("outer")) == ("idle", "busy")
    # 3. an existing folder named like $CLAUDE_PROJECT_DIR: goal.json created there
    # (another session: the one of step 2 is now recorded in inner's goal.json, which rule 1 finds)
    run_hook(["--goals-dir", str(g)], stdin=json.dumps({**payload("PreToolUse"), "cwd": "/elsewhere/x",
                                                        "session_id": "S-other"}),
             env={"CLAUDE_PROJECT_DIR": "/home/dev/proj"}, now=NOW)
    assert json.loads((g / "proj" / "goal.json").read_text()) == {
        "agent": "proj", "state": "busy", "last_activity": "2026-11-30T20:00:00Z", "tools_open": ["?#74234e98afe7"],
        "hook_event": "PreToolUse", "session_id": "S-other", "hook_at": NOW}
    # 4. a session outside the fleet: nothing written, nothing said
    before = sorted(p.name for p in g.iterdir())
    r = run_cli(["--goals-dir", str(g)], {**payload("PreToolUse"), "cwd": "/tmp/not-an-agent"})
    assert (r.returncode, r.stderr) == (0, b"") and sorted(p.name for p in g.iterdir()) == before


# ---------------------------------------------------------------- concurrency

COUNTER_WRITER = r"""
import fcntl, json, os, sys
path = sys.argv[1]
fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)             # the documented protocol for other writers
doc = json.load(open(path))
doc["n"] = doc.get("n", 0) + 1
tmp = path + ".w%d" % os.getpid()
with open(tmp, "w") as f:
    json.dump(doc, f); f.flush(); os.fsync(f.fileno())
os.replace(tmp, path)
"""


def test_concurrent_hooks_lose_no_update_and_never_tear(tmp_path):
    path = seed(tmp_path, n=0)
    events = ["PreToolUse", "PostToolUse", "Stop", "PermissionRequest"]
    stop, bad = threading.Event(), []

    def reader():
        while not stop.is_set():
            try:
                doc = json.loads(path.read_bytes())
                if doc.get("dod_contract") != A01["dod_contract"]:
                    bad.append("dod_contract changed")
            except ValueError as e:
                bad.append(f"torn: {e}")

    t = threading.Thread(target=reader)
    t.start()
    procs = []
    n_writers = 16
    for i in range(n_writers):
        procs.append(subprocess.Popen([FLEETWATCH, "hook", "--agent", "a01", "--goals-dir", str(tmp_path)],
                                      stdin=subprocess.PIPE, stderr=subprocess.PIPE))
        procs.append(subprocess.Popen([sys.executable, "-c", COUNTER_WRITER, str(path)], stderr=subprocess.PIPE))
    for i, p in enumerate(procs):
        if p.stdin:
            p.stdin.write(json.dumps(payload(events[i % len(events)])).encode())
            p.stdin.close()
    errs = [p.stderr.read() for p in procs]
    codes = [p.wait(timeout=60) for p in procs]
    stop.set()
    t.join()
    # a hook that waited LOCK_TIMEOUT (2 s of real time: reachable on a loaded machine) gives up
    # with its one line and exit 0, by design; what may never happen is a lost or torn write
    assert codes == [0] * len(procs)
    assert all(e == b"" or b"lock busy" in e and e.count(b"\n") == 1 for e in errs), errs
    assert bad == []
    doc = json.loads(path.read_text())
    assert doc["n"] == n_writers  # no increment lost to a hook's read-modify-write
    assert doc["state"] in ("busy", "idle", "waiting") and doc["dod"] == A01["dod"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["goal.json", "goal.json.lock"]  # no tmp left


# ---------------------------------------------------------------- CLI: help and install

runner = CliRunner()
OTHER = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write ."}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "/usr/local/bin/notify-done", "timeout": 5}]}],
    },
}


def test_hook_help_documents_options():
    r = runner.invoke(app, ["hook", "--help"])
    assert r.exit_code == 0
    assert "--agent" in r.output and "--goals-dir" in r.output and "install" in r.output


def test_hook_through_typer_reads_stdin(tmp_path):
    path = seed(tmp_path)
    r = runner.invoke(app, ["hook", "--agent", "a01", "--goals-dir", str(tmp_path)], input=json.dumps(payload("Stop")))
    assert r.exit_code == 0
    assert json.loads(path.read_text())["state"] == "idle"


def test_install_twice_into_settings_with_other_hooks(tmp_path):
    s = tmp_path / ".claude" / "settings.json"
    s.parent.mkdir()
    s.write_text(json.dumps(OTHER, indent=2) + "\n")
    args = ["hook", "install", "--settings", str(s), "--command", "/opt/fw/bin/fleetwatch", "--events", "all"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "+            \"command\": \"/opt/fw/bin/fleetwatch hook\"" in r.output  # the diff came first
    assert f"{len(HOOK_EVENTS)} added" in r.output
    first = s.read_bytes()
    data = json.loads(first)
    assert data["model"] == "opus" and data["permissions"] == OTHER["permissions"]
    assert data["hooks"]["PostToolUse"][0] == OTHER["hooks"]["PostToolUse"][0]  # others' hooks kept, first
    assert data["hooks"]["Stop"][0] == OTHER["hooks"]["Stop"][0]
    for ev in HOOK_EVENTS:
        ours = [h for g in data["hooks"][ev] for h in g["hooks"] if is_ours(h["command"])]
        assert [h["command"] for h in ours] == ["/opt/fw/bin/fleetwatch hook"], ev
    assert data["hooks"]["PreToolUse"][-1]["matcher"] == "*"
    assert json.loads((tmp_path / ".claude" / "settings.json.fleetwatch.bak").read_text()) == OTHER
    # second run: nothing to change, file byte-identical
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and "nothing to change" in r.output
    assert s.read_bytes() == first


def test_install_dry_run_force_and_bad_file(tmp_path):
    s = tmp_path / "settings.json"
    # missing file + dry run: diff shown, nothing written
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--dry-run", "--command", "fleetwatch"])
    assert r.exit_code == 0 and "dry run" in r.output and not s.exists()
    runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "fleetwatch", "--events", "all"])
    # a different fleetwatch command is already there: kept without --force, replaced with it
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "/usr/bin/fleetwatch", "--agent", "a7",
                            "--events", "all"])
    assert "nothing to change" in r.output
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "/usr/bin/fleetwatch", "--agent", "a7",
                            "--force", "--events", "all"])
    assert r.exit_code == 0 and f"{len(HOOK_EVENTS)} updated" in r.output
    cmds = {h["command"] for gs in json.loads(s.read_text())["hooks"].values() for g in gs for h in g["hooks"]}
    assert cmds == {"/usr/bin/fleetwatch hook --agent a7"}
    # invalid JSON: clear error, exit 1, file untouched
    s.write_text("{ nope")
    r = runner.invoke(app, ["hook", "install", "--settings", str(s)])
    assert r.exit_code == 1 and "not valid JSON" in r.output
    assert s.read_text() == "{ nope"


def test_install_settings_given_as_a_bare_file_name_is_written(tmp_path):
    """`--settings settings.local.json` (no folder: the current one) failed with "cannot write
    settings: No such file or directory" (os.makedirs("")), new file or existing one alike."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "CLAUDE_"))}
    (tmp_path / "settings.json").write_text(json.dumps(OTHER) + "\n")
    for name in ("settings.local.json", "settings.json"):
        r = subprocess.run([FLEETWATCH, "hook", "install", "--settings", name, "--command", "fleetwatch",
                            "--events", "core"], capture_output=True, text=True, cwd=tmp_path, env=e, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"{name}: written" in r.stdout
        data = json.loads((tmp_path / name).read_text())
        assert data["hooks"]["Stop"][-1] == {"hooks": [{"type": "command", "command": "fleetwatch hook", "timeout": 10}]}
    assert json.loads((tmp_path / "settings.json.fleetwatch.bak").read_text()) == OTHER


def test_install_project_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["hook", "install", "--project", "--command", "fleetwatch", "--goals-dir", "~/fleet"])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert data["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "fleetwatch hook --goals-dir '~/fleet'", "timeout": 10}]}]


@pytest.mark.parametrize("command,ours", [
    ("fleetwatch hook", True),  # plain
    ("/home/u/.venv/bin/fleetwatch hook --agent a1", True),  # absolute path and flags
    ("FLEETWATCH_AGENT=a1 fleetwatch hook", True),  # env prefix
    ("fleetwatch status", False),  # another fleetwatch command
    ("npx prettier --write .", False),  # someone else's hook
    ("echo 'unbalanced", False),  # unparsable shell
])
def test_is_ours(command, ours):
    assert is_ours(command) is ours


def test_merge_is_pure_and_rejects_bad_shapes():
    src = json.loads(json.dumps(OTHER))
    new, actions = merge(src, "fleetwatch hook")
    assert src == OTHER and set(actions.values()) == {"added"}
    assert merge(new, "fleetwatch hook")[1] == {e: "unchanged" for e in HOOK_EVENTS}
    from watcher.cli.hook import SettingsError

    with pytest.raises(SettingsError):
        merge({"hooks": []}, "fleetwatch hook")
    with pytest.raises(SettingsError):
        merge({"hooks": {"Stop": {}}}, "fleetwatch hook")


@pytest.mark.parametrize("printed,want", [
    ("2.1.145 (Claude Code)\n", "all"),     # documents every mapped event
    ("2.3.0 (Claude Code)\n", "all"),
    ("2.1.90 (Claude Code)\n", "core"),     # older: a settings file naming unknown events is skipped whole
    (None, "core"),                         # no claude on PATH
])
def test_install_events_follow_the_installed_claude_version(tmp_path, monkeypatch, printed, want):
    from watcher.cli.hook import CORE_EVENTS

    bindir = tmp_path / "bin"
    bindir.mkdir()
    if printed is not None:
        (bindir / "claude").write_text(f"#!/bin/sh\nprintf '{printed}'\n")
        (bindir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    s = tmp_path / "settings.json"
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "fleetwatch"])
    assert r.exit_code == 0, r.output
    events = set(json.loads(s.read_text())["hooks"])
    # all: every mapped event but PostToolBatch (its PostToolUse says the same), Interrupt where known
    interrupt = {"Interrupt"} if printed and printed.startswith("2.3") else set()
    assert events == (set(HOOK_EVENTS) - {"PostToolBatch", "PreToolUse"} | interrupt if want == "all"
                      else set(CORE_EVENTS) - {"PreToolUse"})
    # later, on a newer Claude Code: --events all adds the rest, the core entries unchanged
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "fleetwatch", "--events", "all"])
    assert r.exit_code == 0 and set(json.loads(s.read_text())["hooks"]) == set(HOOK_EVENTS) | interrupt
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--events", "bogus"])
    assert r.exit_code == 2
