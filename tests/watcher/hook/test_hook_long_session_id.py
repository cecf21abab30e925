"""goal.json keeps the first 200 characters of a session_id, but the hook compared the payload's
whole id with it: a session whose id was longer was never found again by its id (its later
events, from a cwd outside its folder, updated nothing). The look-up now compares what is kept."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def hook(goals: Path, payload: dict, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_AGENT", "CLAUDE_PROJECT_DIR")}
    return subprocess.run([FW, "hook", "--goals-dir", str(goals)], input=json.dumps(payload), text=True,
                          capture_output=True, timeout=60, env={**e, **env})


def test_a_session_id_longer_than_what_goal_json_keeps_is_still_found_by_it(tmp_path):
    goals = tmp_path / "agents"
    (goals / "a1").mkdir(parents=True)   # a launcher mapped the agent to a session (goal.json's session_id)
    (goals / "a1" / "goal.json").write_text(json.dumps({"agent": "a1", "state": "idle", "session_id": "old"}))
    sid = "s" + "x" * 299
    r = hook(goals, {"hook_event_name": "SessionStart", "session_id": sid, "cwd": "/work/a1", "source": "startup"},
             FLEETWATCH_AGENT="a1")
    assert r.returncode == 0, r.stderr
    doc = json.loads((goals / "a1" / "goal.json").read_text())
    assert doc["session_id"] == sid[:200]
    r = hook(goals, {"hook_event_name": "UserPromptSubmit", "session_id": sid, "cwd": "/elsewhere/tmp"})
    assert (r.returncode, r.stderr) == (0, "")
    assert json.loads((goals / "a1" / "goal.json").read_text())["state"] == "busy"
