"""``fleetwatch hook`` looks an unnamed session up in the first 4096 entries of the goals dir
(by name) only: in a bigger fleet an agent past the cut, found by its goal.json session_id or cwd,
was silently never updated (its state never moved, exit 0, no word). The hook now says so on its
stderr line (set $FLEETWATCH_AGENT); a folder named like the session's cwd is still found."""
from __future__ import annotations

import json
import os
import subprocess
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def test_a_session_past_the_4096_entries_scanned_is_reported_not_silently_dropped(tmp_path):
    goals = tmp_path / "agents"
    for i in range(4097):
        (goals / f"a{i:05d}").mkdir(parents=True)
    (goals / "zz").mkdir()
    (goals / "zz" / "goal.json").write_text(json.dumps({"agent": "zz", "state": "idle", "session_id": "s-zz"}))
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_AGENT", "CLAUDE_PROJECT_DIR")}

    def hook(payload):
        return subprocess.run([FW, "hook", "--goals-dir", str(goals)], input=json.dumps(payload), text=True,
                              capture_output=True, timeout=60, env=env)

    r = hook({"hook_event_name": "UserPromptSubmit", "session_id": "s-zz", "cwd": "/nowhere/x"})
    assert r.returncode == 0
    assert r.stderr == ("fleetwatch hook: no agent found for this session among the first 4096 of 4098 "
                        "entries of the goals dir: set $FLEETWATCH_AGENT or --agent\n")
    r = hook({"hook_event_name": "UserPromptSubmit", "session_id": "s-zz", "cwd": "/work/zz"})
    assert (r.returncode, r.stderr) == (0, "")   # rule 5: the folder named like the cwd
    assert json.loads((goals / "zz" / "goal.json").read_text())["state"] == "busy"
