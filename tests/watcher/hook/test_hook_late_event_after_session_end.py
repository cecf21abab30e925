"""Hooks run as concurrent processes, so an event of a session can reach goal.json after its
SessionEnd (a Stop or a Notification whose hook started first). Any event cleared ``ended``: the
agent the session had left came back as working or waiting (CERRADO -> TRABAJANDO / RECLAMA) and
stayed so, a session nobody runs. Now only a new session (SessionStart) or a prompt clears it."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def hook(goals: Path, payload: dict) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_AGENT", "CLAUDE_PROJECT_DIR")}
    r = subprocess.run([FW, "hook", "--goals-dir", str(goals), "--agent", "a1"], input=json.dumps(payload),
                       text=True, capture_output=True, timeout=60, env=env)
    assert (r.returncode, r.stderr) == (0, "")


def doc(goals: Path) -> dict:
    return json.loads((goals / "a1" / "goal.json").read_text())


BASE = {"session_id": "s1", "cwd": "/work/a1"}


@pytest.mark.parametrize("late", [
    {"hook_event_name": "Stop"},
    {"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"},
    {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "t1"},
    {"hook_event_name": "SubagentStop"},
])
def test_a_late_event_of_an_ended_session_does_not_bring_the_agent_back(tmp_path, late):
    goals = tmp_path / "agents"
    hook(goals, {**BASE, "hook_event_name": "SessionStart", "source": "startup"})
    hook(goals, {**BASE, "hook_event_name": "UserPromptSubmit", "prompt": "go"})
    hook(goals, {**BASE, "hook_event_name": "SessionEnd", "reason": "logout"})
    ended = doc(goals)
    assert ended["ended"] is True
    hook(goals, {**BASE, **late})
    assert doc(goals) == ended


@pytest.mark.parametrize("back", [
    {"hook_event_name": "SessionStart", "source": "resume", "session_id": "s2"},
    {"hook_event_name": "UserPromptSubmit", "prompt": "again"},
])
def test_a_new_session_or_a_prompt_still_brings_it_back(tmp_path, back):
    goals = tmp_path / "agents"
    hook(goals, {**BASE, "hook_event_name": "SessionStart", "source": "startup"})
    hook(goals, {**BASE, "hook_event_name": "SessionEnd", "reason": "logout"})
    hook(goals, {**BASE, **back})
    assert "ended" not in doc(goals)
