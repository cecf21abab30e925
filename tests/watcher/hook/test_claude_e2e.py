"""A realistic Claude Code session replayed through the real ``fleetwatch hook`` process into a
running ``fleetwatch run``; the agent's class is read back with ``fleetwatch status --json`` after
every step: start, prompt, tools, permission, answer, parallel subagents (one asks, the other works),
Esc, /clear, stop, end.

Ordering without sleeping on a threshold: after each step a sentinel agent's goal.json gets a new
``task``; once ``status`` shows it, the watcher has looked at the agent's file too (inotify reports
changes in order, and every full tick stats every file).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
FLEETWATCH = str(BIN / "fleetwatch")
S1, S2 = "7d1a0b4e-1111-4c3e-9a61-2f5d8e1c3b7a", "7d1a0b4e-2222-4c3e-9a61-2f5d8e1c3b7a"
CWD = "/home/dev/work/a1"


def env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "CLAUDE_"))}


def write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".w.tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


class Session:
    def __init__(self, tmp_path: Path):
        self.goals = tmp_path / "agents"
        self.db = tmp_path / "e.db"
        self.cfg = tmp_path / "config.toml"
        self.cfg.write_text(f'[store]\npath = "{self.db}"\n[watch]\ninterval = "1s"\n[classify]\nstall_after = "15m"\n'
                            f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{self.goals}/*/goal.json"\n')
        self.step_no = 0
        write(self.goals / "a1" / "goal.json", {
            "agent": "a1", "task": "fix the parser", "state": "idle", "phase": "haciendo",
            "dod_contract": "pytest tests/test_parser.py passes", "session_id": S1, "cwd": CWD})
        self.sentinel(0)
        self.proc = subprocess.Popen([FLEETWATCH, "run", "--config", str(self.cfg)], env=env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def sentinel(self, n: int) -> None:
        write(self.goals / "zz-sentinel" / "goal.json", {
            "agent": "zz-sentinel", "task": f"step {n}", "state": "busy", "dod_contract": "sentinel",
            "last_activity": time.time()})

    def status(self) -> dict:
        r = subprocess.run([FLEETWATCH, "status", "--json", "--config", str(self.cfg)], env=env(),
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            return {}
        return {a["agent"]: a for a in json.loads(r.stdout).get("agents", [])}

    def hook(self, event: str, session: str = S1, **fields) -> None:
        payload = {"session_id": session, "transcript_path": f"/home/dev/.claude/projects/x/{session}.jsonl",
                   "cwd": CWD, "permission_mode": "default", "hook_event_name": event, **fields}
        r = subprocess.run([FLEETWATCH, "hook", "--goals-dir", str(self.goals)], input=json.dumps(payload).encode(),
                           capture_output=True, env=env(), timeout=30)
        assert (r.returncode, r.stderr) == (0, b""), (event, r.stderr)

    def seen(self) -> dict:
        """The agents once the watcher has looked at every change made so far. The hook swaps
        goal.json in (renameat2 RENAME_EXCHANGE), and watchdog may hold a rename's first half up to
        0.5 s to pair it, so a sentinel written at once can be reported first (a CI flake): the
        sentinel is written once that window has passed."""
        time.sleep(0.6)
        self.step_no += 1
        self.sentinel(self.step_no)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.proc.stderr.read().decode()[-2000:]
            st = self.status()
            if st.get("zz-sentinel", {}).get("task") == f"step {self.step_no}":
                return st
            time.sleep(0.1)
        raise AssertionError(f"the watcher never showed step {self.step_no}")

    def expect(self, cls: str, state: str | None = None) -> None:
        a = self.seen()["a1"]
        assert a["class"] == cls, (self.step_no, a)
        if state is not None:
            assert a["state"] == state, (self.step_no, a)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


BASH = {"tool_name": "Bash", "tool_input": {"command": "pytest -q tests/test_parser.py"}}
TASK = {"tool_name": "Task", "tool_input": {"description": "two reviewers", "prompt": "review"}}
A, B = {"agent_id": "sa_A", "agent_type": "general-purpose"}, {"agent_id": "sa_B", "agent_type": "Explore"}
EDIT = {"tool_name": "Edit", "tool_input": {"file_path": f"{CWD}/parser.py", "old_string": "a", "new_string": "b"}}
READ = {"tool_name": "Read", "tool_input": {"file_path": f"{CWD}/README.md"}}


@pytest.fixture
def session(tmp_path):
    s = Session(tmp_path)
    yield s
    s.close()


@pytest.mark.slow
def test_realistic_session_class_after_every_step(session):
    s = session
    s.expect("TRABAJANDO", "idle")                 # launched: goal.json written, idle within stall_after
    s.hook("SessionStart", source="startup", model="claude-sonnet-4-6")
    s.expect("TRABAJANDO", "idle")                 # at its prompt: idle (busy would never stall)
    s.hook("UserPromptSubmit", prompt="fix the failing parser test")
    s.expect("TRABAJANDO", "busy")
    s.hook("PreToolUse", tool_use_id="toolu_01", **BASH)
    s.hook("PermissionRequest", permission_suggestions=[], **BASH)
    s.hook("Notification", message="Claude needs your permission to use Bash", notification_type="permission_prompt")
    s.expect("RECLAMA", "waiting")
    s.hook("PostToolUse", tool_use_id="toolu_01", tool_response={"stdout": "1 failed"}, **BASH)  # allowed, ran
    s.expect("TRABAJANDO", "busy")
    # two subagents in parallel: A asks for a permission, B keeps working
    s.hook("PreToolUse", tool_use_id="toolu_02", **TASK)
    s.hook("SubagentStart", **A)
    s.hook("SubagentStart", **B)
    s.hook("PreToolUse", tool_use_id="toolu_A1", **A, **EDIT)
    s.hook("PermissionRequest", **A, **EDIT)
    s.expect("RECLAMA", "waiting")
    s.hook("PreToolUse", tool_use_id="toolu_B1", **B, **READ)
    s.hook("PostToolUse", tool_use_id="toolu_B1", tool_response={}, **B, **READ)
    s.hook("SubagentStop", stop_hook_active=False, **B)
    s.expect("RECLAMA", "waiting")                 # B's events are not A's answer
    s.hook("PostToolUse", tool_use_id="toolu_A1", tool_response={}, **A, **EDIT)
    s.expect("TRABAJANDO", "busy")
    s.hook("SubagentStop", stop_hook_active=False, **A)
    s.hook("PostToolUse", tool_use_id="toolu_02", tool_response={}, **TASK)
    s.expect("TRABAJANDO", "busy")
    # a long command, then Esc: the interrupt fires no Stop
    s.hook("PreToolUse", tool_use_id="toolu_03", **BASH)
    s.hook("PostToolUseFailure", tool_use_id="toolu_03", error="Interrupted by user", is_interrupt=True, **BASH)
    s.expect("TRABAJANDO", "idle")                 # idle (it stalls after stall_after), not busy forever
    # /clear: the session ends with reason clear and a new one starts; the agent stays, remapped
    s.hook("SessionEnd", reason="clear")
    s.hook("SessionStart", session=S2, source="clear")
    s.expect("TRABAJANDO", "idle")                 # not CERRADO
    s.hook("UserPromptSubmit", session=S2, prompt="now finish it")
    s.expect("TRABAJANDO", "busy")                 # found by its new session id
    doc = json.loads((s.goals / "a1" / "goal.json").read_text())
    assert doc["session_id"] == S2 and "handoff" not in doc
    write(s.goals / "a1" / "goal.json", {**doc, "phase": "hecho"})  # the agent claims done (its own key)
    s.hook("Stop", session=S2, stop_hook_active=False, last_assistant_message="All tests pass.", background_tasks=[])
    s.expect("DICE_TERMINADO", "idle")
    s.hook("Notification", session=S2, message="Claude is waiting for your input", notification_type="idle_prompt")
    s.expect("DICE_TERMINADO", "idle")
    s.hook("SessionEnd", session=S2, reason="prompt_input_exit")
    s.expect("CERRADO")
    r = subprocess.run([FLEETWATCH, "tail", "--json", "--config", str(s.cfg), "--subject", "agent:a1"],
                       env=env(), capture_output=True, timeout=60)
    tos = [json.loads(line)["data"]["to"] for line in r.stdout.decode().splitlines()
           if json.loads(line)["type"] == "agent.classified"]
    assert tos == ["TRABAJANDO", "RECLAMA", "TRABAJANDO", "RECLAMA", "TRABAJANDO", "DICE_TERMINADO", "CERRADO"]
