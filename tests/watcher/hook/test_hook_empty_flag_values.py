"""``fleetwatch hook --goals-dir=`` (a settings.json command written as ``--goals-dir="$FLEET"``
with FLEET unset) silently wrote ~/.fleet/agents/<agent>/goal.json, and ``--agent ""`` fell back to
$FLEETWATCH_AGENT and the session lookup: an empty value given explicitly is now refused with one
line (exit status still 0), and nothing is written."""
from __future__ import annotations

import os
import subprocess

import pytest
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


@pytest.mark.parametrize("args, flag", [(["--goals-dir=", "--agent", "a1"], "--goals-dir"),
                                        (["--goals-dir", "", "--agent", "a1"], "--goals-dir"),
                                        (["--goals-dir", "G", "--agent="], "--agent"),
                                        # an agent named "install" goes through the typer path: same rules
                                        (["--goals-dir", "", "--agent", "install"], "--goals-dir")])
def test_an_empty_goals_dir_or_agent_is_refused_not_replaced_by_the_default(tmp_path, args, flag):
    goals = tmp_path / "G"
    (goals / "other").mkdir(parents=True)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "FLEETWATCH_AGENT": "other",
           "FLEETWATCH_GOALS_DIR": ""}
    r = subprocess.run([FW, "hook", *[str(goals) if a == "G" else a for a in args]], env=env, timeout=60,
                       input='{"hook_event_name": "Stop"}', capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stderr == f"fleetwatch hook: {flag} needs a value (got an empty one)\n"
    assert not (tmp_path / "home").exists() and list(goals.iterdir()) == [goals / "other"]
    assert not (goals / "other" / "goal.json").exists()
