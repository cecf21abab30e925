"""``fleetwatch hook`` finds the agent whose goal.json ``cwd`` contains the payload's cwd. It
compared the strings only: a launcher that wrote ``cwd`` through a symlink (``~/work`` ->
``/data/work``, macOS ``/tmp`` -> ``/private/tmp``) while Claude Code reports the physical path
(or the other way round) matched nothing, and the hook silently did nothing: the agent's state
never moved. Both sides are now also compared resolved; the deepest folder still wins."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def hook(goals: Path, payload: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_AGENT", "CLAUDE_PROJECT_DIR")}
    return subprocess.run([FW, "hook", "--goals-dir", str(goals)], input=json.dumps(payload), text=True,
                          capture_output=True, timeout=90, env=env)


def state(goals: Path, agent: str) -> str | None:
    return json.loads((goals / agent / "goal.json").read_text()).get("state")


def test_a_goal_cwd_written_through_a_symlink_still_maps_the_session(tmp_path):
    (tmp_path / "data" / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "work").symlink_to(tmp_path / "data")
    goals = tmp_path / "agents"
    for agent, cwd in (("p1", tmp_path / "work" / "proj"),              # through the link
                       ("p2", tmp_path / "data" / "proj" / "sub")):     # physical, deeper
        (goals / agent).mkdir(parents=True)
        (goals / agent / "goal.json").write_text(json.dumps({"agent": agent, "state": "idle", "cwd": str(cwd)}))
    r = hook(goals, {"hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path / "data" / "proj")})
    assert (r.returncode, r.stderr) == (0, "")
    assert (state(goals, "p1"), state(goals, "p2")) == ("busy", "idle")
    r = hook(goals, {"hook_event_name": "Stop", "cwd": str(tmp_path / "work" / "proj" / "sub" / "x")})
    assert (state(goals, "p1"), state(goals, "p2")) == ("busy", "idle")  # the deepest: p2
    r = hook(goals, {"hook_event_name": "PreToolUse", "tool_use_id": "t1",
                     "cwd": str(tmp_path / "work" / "proj" / "sub" / "x")})
    assert (state(goals, "p1"), state(goals, "p2")) == ("busy", "busy")
    hook(goals, {"hook_event_name": "Stop", "cwd": str(tmp_path / "work" / "proj")})
    assert (state(goals, "p1"), state(goals, "p2")) == ("idle", "busy")


def test_a_cwd_of_a_million_components_does_not_hang_the_hook(tmp_path):
    """Resolving symlinks (above) walks a path component by component: a payload cwd of 1.5
    million components took 6 minutes, a goal.json cwd of 400,000 about 27 s (Claude Code's
    hook timeout is 10 s). A path longer than PATH_MAX names no folder: it is compared as
    written. The subprocess timeout is only the hang detector."""
    goals = tmp_path / "agents"
    (goals / "x1").mkdir(parents=True)
    (goals / "x1" / "goal.json").write_text(json.dumps({"agent": "x1", "state": "idle", "cwd": "/a" * 400_000}))
    r = hook(goals, {"hook_event_name": "UserPromptSubmit", "cwd": "/b" * 1_500_000})
    assert (r.returncode, r.stderr) == (0, "") and state(goals, "x1") == "idle"
    r = hook(goals, {"hook_event_name": "UserPromptSubmit", "cwd": "/a" * 400_000 + "/sub"})
    assert (r.returncode, r.stderr) == (0, "") and state(goals, "x1") == "busy"  # as written: still found


@pytest.mark.parametrize("goal_cwd, cwd", [("/w/x\0y", "/w/a\0b"), ("~\0a", "~root\0x")])
def test_a_nul_in_a_cwd_does_not_stop_the_session_lookup(tmp_path, goal_cwd, cwd):
    """A cwd holding a NUL (JSON "\\u0000"), in the payload or in any goal.json of the goals dir:
    resolving symlinks (ca9c599) raised ValueError (embedded null byte), and so did the look-up of
    the user of a '~user' path (since the first hook): the hook printed 'ValueError: embedded null
    byte' and updated nothing, even a session its goal.json names by session_id."""
    goals = tmp_path / "agents"
    for agent, doc in (("n0", {"cwd": goal_cwd}), ("n1", {"session_id": "s-n1"})):
        (goals / agent).mkdir(parents=True)
        (goals / agent / "goal.json").write_text(json.dumps({"agent": agent, "state": "idle", **doc}))
    r = hook(goals, {"hook_event_name": "UserPromptSubmit", "session_id": "s-n1", "cwd": cwd})
    assert (r.returncode, r.stderr) == (0, "") and state(goals, "n1") == "busy"
    r = hook(goals, {"hook_event_name": "PreToolUse", "tool_use_id": "t", "cwd": goal_cwd + "/z"})
    assert (r.returncode, r.stderr) == (0, "") and state(goals, "n0") == "busy"
