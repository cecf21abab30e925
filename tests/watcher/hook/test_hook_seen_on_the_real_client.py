"""The hook mapping for what the real Claude Code client was seen to send (tests/watcher/hook/test_realclient_steps.py
drives it; these rows pin each payload shape it sent, and the schema's other events and
notification types, through the real ``run_hook`` on a real goal.json).

Seen on 2.1.337: Esc during a tool or while the model thinks, and No/Esc at a permission dialog,
fire only ``Interrupt {source, reason, via}``; a ``PermissionRequest`` has no ``tool_use_id``;
AskUserQuestion's ``PostToolUse`` carries ``answers``/``annotations`` added to ``tool_input``.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from watcher.hook.adapter import Reason, decide, run_hook, tmux_of
from watcher.hook.mapping import (ANSWER_NOTIFICATIONS, NOISE_NOTIFICATIONS, WAITING_NOTIFICATIONS, apply,
                                  waiting_for)
from tests.support.realclaude import SCHEMA_EVENTS
from tests.support.exe import FLEETWATCH

NOW = 1796068800.0
BASE = {"session_id": "5e1f-real", "transcript_path": "/h/.claude/projects/x/5e1f.jsonl", "cwd": "/w/a1",
        "permission_mode": "default", "prompt_id": "p1", "effort": "medium"}
Q = {"questions": [{"question": "Which color?", "header": "Color", "multiSelect": False,
                    "options": [{"label": "Red", "description": "red"}, {"label": "Blue", "description": "blue"}]}]}
BASH = {"tool_name": "Bash", "tool_input": {"command": "python3 -c 'x'", "description": "run"}}
# the notification types in 2.1.337's and 2.1.145's bundles
SCHEMA_NOTIFICATIONS = {"agent_completed", "agent_needs_input", "auth_storage_failure", "auth_success",
                        "computer_use_enter", "computer_use_exit", "elicitation_complete", "elicitation_response",
                        "elicitation_dialog", "elicitation_url_dialog", "idle_prompt", "permission_prompt",
                        "plugin_notification", "push_notification", "worker_permission_prompt"}


def pl(event: str, **extra) -> dict:
    return {**BASE, "hook_event_name": event, **extra}


def run(goals: Path, payload: dict, now: float = NOW) -> dict:
    assert run_hook(["--agent", "a1", "--goals-dir", str(goals)], stdin=json.dumps(payload), env={}, now=now) == 0
    return json.loads((goals / "a1" / "goal.json").read_text())


@pytest.mark.parametrize("reason", ["stop", "permission_denied", "rewind", "other"])
def test_interrupt_is_idle_whatever_its_reason(tmp_path, reason):
    run(tmp_path, pl("UserPromptSubmit", prompt="x"))
    run(tmp_path, pl("PreToolUse", tool_use_id="toolu_1", **BASH))
    doc = run(tmp_path, pl("PermissionRequest", permission_suggestions=[], **BASH))
    assert doc["state"] == "waiting" and doc["waiting_for"] == {"kind": "permission", "tool": "Bash"}
    doc = run(tmp_path, pl("Interrupt", source="user", reason=reason, via="terminal"))
    assert doc["state"] == "idle" and doc["hook_event"] == "Interrupt"
    assert not ({"pending", "tools_open", "waiting_for"} & set(doc))


def test_an_answered_question_is_cleared_by_its_post_tool_use_with_the_answers_added(tmp_path):
    """Regression: the request was keyed on a digest of tool_input, and the PostToolUse's input has
    answers/annotations added: nothing cleared it until the turn ended."""
    run(tmp_path, pl("PreToolUse", tool_use_id="toolu_q", tool_name="AskUserQuestion", tool_input=Q))
    doc = run(tmp_path, pl("PermissionRequest", tool_name="AskUserQuestion", tool_input=Q, permission_suggestions=[]))
    assert doc["state"] == "waiting" and doc["waiting_for"] == {"kind": "question", "tool": None}
    answered = {**Q, "answers": {"Which color?": "Red"}, "annotations": {}}
    doc = run(tmp_path, pl("PostToolUse", tool_use_id="toolu_q", tool_name="AskUserQuestion", tool_input=answered,
                           tool_response={}, duration_ms=900))
    assert doc["state"] == "busy" and not ({"pending", "waiting_for", "tools_open"} & set(doc))


def test_a_subagents_request_is_answered_only_by_its_own_call(tmp_path):
    sub = {"agent_id": "a4d7", "agent_type": "general-purpose"}
    doc = run(tmp_path, pl("PermissionRequest", **sub, **BASH))
    doc = run(tmp_path, pl("Notification", notification_type="permission_prompt", message="Claude needs your permission"))
    assert doc["waiting_for"] == {"kind": "permission", "tool": "Bash"}  # the request names the tool
    assert doc["last_activity"] == "2026-11-30T20:00:00Z"
    doc = run(tmp_path, pl("PostToolUse", tool_use_id="toolu_m", **BASH))  # the main thread's call: not the answer
    assert doc["state"] == "waiting" and doc["pending"] == ["a4d7|perm:Bash"]
    doc = run(tmp_path, pl("PostToolUse", tool_use_id="toolu_s", **sub, **BASH))  # the subagent's own answer
    assert doc["state"] == "busy" and not ({"pending", "waiting_for"} & set(doc))


def test_goal_json_written_before_keeps_clearing_by_digest(tmp_path):
    (tmp_path / "a1").mkdir()
    (tmp_path / "a1" / "goal.json").write_text(json.dumps(
        {"agent": "a1", "state": "waiting", "pending": ["main|perm:Bash#0123456789ab"]}))
    doc = run(tmp_path, pl("PostToolUse", tool_use_id="toolu_1", **BASH))
    assert doc["state"] == "busy" and "pending" not in doc


@pytest.mark.parametrize("kind", sorted(SCHEMA_NOTIFICATIONS))
def test_every_notification_type_of_the_schema_is_mapped(tmp_path, kind):
    d = decide(pl("Notification", notification_type=kind, message="m"))
    if kind in WAITING_NOTIFICATIONS:
        doc = run(tmp_path, pl("Notification", notification_type=kind, message="m"))
        assert doc["state"] == "waiting" and doc["waiting_for"]["kind"] == WAITING_NOTIFICATIONS[kind]
    elif kind in ANSWER_NOTIFICATIONS:
        assert d.reason is Reason.ANSWERED
    elif kind == "idle_prompt":
        assert d.reason is Reason.IDLE_PROMPT
    else:
        assert kind in NOISE_NOTIFICATIONS and d.reason is Reason.NOISE and not d.write


def test_an_answered_mcp_dialog_clears_its_notice(tmp_path):
    run(tmp_path, pl("Notification", notification_type="elicitation_dialog", message="m"))
    doc = run(tmp_path, pl("Notification", notification_type="elicitation_complete", message="m"))
    assert doc["state"] == "busy" and "pending" not in doc and "waiting_for" not in doc


@pytest.mark.parametrize("flavour", sorted(SCHEMA_EVENTS))
def test_every_event_of_the_schema_is_mapped(flavour):
    for event in SCHEMA_EVENTS[flavour]:
        assert decide(pl(event)).reason is not Reason.UNKNOWN_EVENT, event


@pytest.mark.parametrize("event", ["MessageDisplay", "DirectoryAdded", "PreModelSwitch", "PostModelSwitch"])
def test_events_that_fire_at_the_prompt_write_nothing(tmp_path, event):
    (tmp_path / "a1").mkdir()
    p = tmp_path / "a1" / "goal.json"
    p.write_text('{"agent": "a1", "state": "idle"}')
    assert run_hook(["--agent", "a1", "--goals-dir", str(tmp_path)], stdin=json.dumps(pl(event)), env={}, now=NOW) == 0
    assert p.read_text() == '{"agent": "a1", "state": "idle"}'


def test_skill_shell_command_is_work(tmp_path):
    assert run(tmp_path, pl("PreSkillShellCommand"))["state"] == "busy"


def test_waiting_for_shapes():
    assert waiting_for([]) is None
    assert waiting_for(["main|perm:Edit"]) == {"kind": "permission", "tool": "Edit"}
    assert waiting_for(["main|perm:ExitPlanMode"]) == {"kind": "dialog", "tool": None}
    assert waiting_for(["main|perm:toolu_9"]) == {"kind": "permission", "tool": None}
    assert waiting_for(["s|notice:agent_needs_input"]) == {"kind": "input", "tool": None}
    assert waiting_for(["main|elicit:github"]) == {"kind": "dialog", "tool": None}


def test_session_pane_and_pid_recorded_and_not_on_an_ended_session():
    d = decide(pl("SessionStart", source="startup"))
    doc = apply(None, d, "a1", NOW, session="s1", where={"socket": "/tmp/tmux-0/fleet", "pane": "%3"}, pid=4242)
    assert (doc["session_id"], doc["tmux"], doc["claude_pid"]) == ("s1", {"socket": "/tmp/tmux-0/fleet", "pane": "%3"}, 4242)
    doc = apply(doc, decide(pl("UserPromptSubmit")), "a1", NOW, session="other")  # only a SessionStart changes it
    assert doc["session_id"] == "s1"
    end = apply({"agent": "a1"}, decide(pl("SessionEnd", reason="prompt_input_exit")), "a1", NOW,
                where={"socket": "/s", "pane": "%4"}, pid=7)
    assert "tmux" not in end and "claude_pid" not in end


def test_tmux_of_the_environment():
    assert tmux_of({"TMUX": "/tmp/tmux-0/fleet,123,0", "TMUX_PANE": "%12"}) == {"socket": "/tmp/tmux-0/fleet",
                                                                                "pane": "%12"}
    assert tmux_of({"TMUX_PANE": "%1"}) == {"socket": None, "pane": "%1"}
    for bad in ({}, {"TMUX_PANE": "12"}, {"TMUX_PANE": "%1x"}, {"TMUX_PANE": "%" + "1" * 20}):
        assert tmux_of(bad) is None


def test_the_hook_learns_the_pid_of_the_claude_that_runs_it(tmp_path):
    """A real process tree: a program named ``claude`` (a shell under that name) runs the hook
    through ``sh -c``, as Claude Code runs a command hook; the hook records that program's pid."""
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    os.symlink("/bin/sh", claude)
    exe = FLEETWATCH
    cmd = f"sh -c '{exe} hook --agent a1 --goals-dir {tmp_path}/g; true'; true"
    p = subprocess.Popen([str(claude), "-c", cmd], stdin=subprocess.PIPE,
                         env={"PATH": os.environ["PATH"], "TMUX_PANE": "%7", "TMUX": "/tmp/tmux-9/x,1,0"})
    p.communicate(json.dumps(pl("SessionStart", source="startup")).encode(), timeout=60)
    doc = json.loads((tmp_path / "g" / "a1" / "goal.json").read_text())
    assert doc["claude_pid"] == p.pid and doc["tmux"] == {"socket": "/tmp/tmux-9/x", "pane": "%7"}
