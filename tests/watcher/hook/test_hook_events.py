"""The hook mapping table, one row per documented Claude Code hook payload.

Reference: Claude Code hooks reference, https://code.claude.com/docs/en/hooks (event set and input
fields as documented for Claude Code v2.1.145, changelog of 2026-05-20, which added
``background_tasks``/``session_crons`` to Stop and SubagentStop input), read 2026-12-01. Common input
fields: ``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``, ``hook_event_name``, and
``agent_id``/``agent_type`` on events fired inside a subagent. Notification types: ``permission_prompt``,
``idle_prompt``, ``auth_success``, ``elicitation_dialog``, ``elicitation_url_dialog``,
``agent_needs_input``. SessionStart ``source``: startup, resume, clear, compact. SessionEnd
``reason``: clear, resume, logout, prompt_input_exit, bypass_permissions_disabled, other.

Each row runs the payload through ``run_hook`` on a real goal.json (fixture a01) and checks the
state after, the reason, whether the file was written, the open requests and open tool calls.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from watcher.hook.adapter import Reason, decide, run_hook

from tests.support.hookinput import A01, BASE, NOW

STAMP = "2026-11-30T20:00:00Z"
OLD = A01["last_activity"]
BASH = {"tool_name": "Bash", "tool_input": {"command": "pytest -q"}}
SUB = {"agent_id": "sa_7f3", "agent_type": "Explore"}


def pl(hook_event_name: str, **extra) -> dict:
    return {**BASE, "hook_event_name": hook_event_name, **extra}


def perm_key(actor: str, tool: dict) -> str:
    return f"{actor}|perm:{tool['tool_name']}"


W = "waiting"
# (id, payload, goal.json before (overrides of A01), want: state, reason, written, pending, tools_open, touched)
ROWS = [
    # SessionStart: the agent sits at its prompt, whatever brought it there (not busy: busy never stalls)
    ("SessionStart-startup", pl("SessionStart", source="startup", model="claude-sonnet-4-6"), {}, "idle", Reason.STARTED, True, [], [], True),
    ("SessionStart-resume", pl("SessionStart", source="resume"), {"state": W, "pending": ["main|notice:permission_prompt"]}, "idle", Reason.STARTED, True, [], [], True),
    ("SessionStart-clear", pl("SessionStart", source="clear"), {"tools_open": ["toolu_1"]}, "idle", Reason.STARTED, True, [], [], True),
    # compaction inside a turn: the work goes on, the state is kept
    ("SessionStart-compact", pl("SessionStart", source="compact"), {}, "busy", Reason.SUBAGENT, True, [], [], True),
    ("Setup", pl("Setup", trigger="init"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("UserPromptSubmit", pl("UserPromptSubmit", prompt="run the tests"), {"state": W, "pending": ["sa_1|notice:agent_needs_input"]}, "busy", Reason.WORKING, True, [], [], True),
    ("UserPromptExpansion", pl("UserPromptExpansion", command_name="review", prompt="/review"), {"state": "idle"}, "busy", Reason.WORKING, True, [], [], True),
    # a slash command typed at the prompt closes every dialog as a prompt does (the table said so; it did not)
    ("UserPromptExpansion-closes-pending-dialogs", pl("UserPromptExpansion", command_name="review", prompt="/review"),
     {"state": W, "pending": ["main|notice:permission_prompt"], "tools_open": ["toolu_9"]}, "busy", Reason.WORKING, True, [], [], True),
    ("PreToolUse", pl("PreToolUse", tool_use_id="toolu_01", **BASH), {"state": "idle"}, "busy", Reason.WORKING, True, [], ["toolu_01"], True),
    ("PermissionRequest", pl("PermissionRequest", permission_suggestions=[], **BASH), {}, W, Reason.PERMISSION, True, [perm_key("main", BASH)], [], True),
    ("PermissionRequest-subagent", pl("PermissionRequest", **SUB, **BASH), {}, W, Reason.PERMISSION, True, [perm_key("sa_7f3", BASH)], [], True),
    # the auto-mode classifier denied a call: no dialog, the agent goes on
    ("PermissionDenied", pl("PermissionDenied", tool_use_id="toolu_01", reason="auto mode denied", **BASH), {}, "busy", Reason.WORKING, True, [], [], True),
    # the answer to its own request: waiting -> busy, the call is no longer open
    ("PostToolUse", pl("PostToolUse", tool_use_id="toolu_01", tool_response={"stdout": "ok"}, **BASH),
     {"state": W, "pending": [perm_key("main", BASH)], "tools_open": ["toolu_01"]}, "busy", Reason.WORKING, True, [], [], True),
    ("PostToolUseFailure", pl("PostToolUseFailure", tool_use_id="toolu_01", error="exit 1", is_interrupt=False, **BASH),
     {"state": "busy", "tools_open": ["toolu_01"]}, "busy", Reason.WORKING, True, [], [], True),
    # the user pressed Esc: the aborted turn fires no Stop, so the interrupt itself means idle
    ("PostToolUseFailure-interrupt", pl("PostToolUseFailure", tool_use_id="toolu_01", error="interrupted", is_interrupt=True, **BASH),
     {"state": W, "pending": [perm_key("main", BASH)], "tools_open": ["toolu_01", "toolu_02"]}, "idle", Reason.INTERRUPTED, True, [], [], True),
    ("PostToolBatch", pl("PostToolBatch"), {"state": "busy"}, "busy", Reason.WORKING, True, [], [], True),
    ("Notification-permission_prompt", pl("Notification", message="Claude needs your permission to use Bash", title="Permission needed", notification_type="permission_prompt"),
     {}, W, Reason.PERMISSION, True, ["main|notice:permission_prompt"], [], False),
    # idle_prompt is the backstop for a missed Stop: busy -> idle, last activity not refreshed
    ("Notification-idle_prompt", pl("Notification", message="Claude is waiting for your input", notification_type="idle_prompt"),
     {}, "idle", Reason.IDLE_PROMPT, True, [], [], False),
    ("Notification-idle_prompt-waiting", pl("Notification", message="Claude is waiting for your input", notification_type="idle_prompt"),
     {"state": W, "pending": ["main|notice:elicitation_dialog"]}, W, Reason.IDLE_PROMPT, True, ["main|notice:elicitation_dialog"], [], False),
    ("Notification-auth_success", pl("Notification", message="Signed in", notification_type="auth_success"), {}, "busy", Reason.NOISE, False, [], [], False),
    ("Notification-elicitation_dialog", pl("Notification", message="MCP server asks for input", notification_type="elicitation_dialog"),
     {}, W, Reason.PERMISSION, True, ["main|notice:elicitation_dialog"], [], False),
    ("Notification-elicitation_url_dialog", pl("Notification", message="Open the link to sign in", notification_type="elicitation_url_dialog"),
     {}, W, Reason.PERMISSION, True, ["main|notice:elicitation_url_dialog"], [], False),
    # a subagent needs the user
    ("Notification-agent_needs_input", pl("Notification", message="Explore needs your input", notification_type="agent_needs_input", **SUB),
     {}, W, Reason.PERMISSION, True, ["sa_7f3|notice:agent_needs_input"], [], False),
    ("Notification-legacy-text", pl("Notification", message="Claude needs your permission to use Write"), {}, W, Reason.PERMISSION, True,
     ["main|notice:permission_prompt"], [], False),
    ("SubagentStart", pl("SubagentStart", **SUB), {"state": W, "pending": ["main|notice:permission_prompt"]}, W, Reason.SUBAGENT, True,
     ["main|notice:permission_prompt"], [], True),
    # a finished subagent asks nothing any more; its parent is still at work
    ("SubagentStop", pl("SubagentStop", stop_hook_active=False, agent_transcript_path="/x/agent.jsonl", last_assistant_message="done", background_tasks=[], **SUB),
     {"state": W, "pending": ["sa_7f3|notice:agent_needs_input"]}, "busy", Reason.SUBAGENT, True, [], [], True),
    ("TaskCreated", pl("TaskCreated", task_id="t1", task_subject="write tests", task_description="…"), {}, "busy", Reason.SUBAGENT, True, [], [], True),
    ("TaskCompleted", pl("TaskCompleted", task_id="t1", task_subject="write tests"), {}, "busy", Reason.SUBAGENT, True, [], [], True),
    ("Stop", pl("Stop", stop_hook_active=False, last_assistant_message="Done."), {"tools_open": ["toolu_9"]}, "idle", Reason.STOPPED, True, [], [], True),
    ("Stop-background-empty", pl("Stop", background_tasks=[], session_crons=[]), {}, "idle", Reason.STOPPED, True, [], [], True),
    # a background shell still runs: busy (the watcher's busy_silence backstop bounds it)
    ("Stop-background-running", pl("Stop", background_tasks=[{"id": "bash_1", "command": "npm run dev", "status": "running"}]),
     {}, "busy", Reason.BACKGROUND, True, [], [], True),
    ("Stop-background-done", pl("Stop", background_tasks=[{"id": "bash_1", "command": "make", "status": "completed"}]),
     {}, "idle", Reason.STOPPED, True, [], [], True),
    ("StopFailure", pl("StopFailure", error_type="rate_limit", error="429", error_message="Rate limit exceeded"),
     {"state": W, "pending": ["main|notice:permission_prompt"]}, "idle", Reason.STOP_FAILURE, True, [], [], True),
    # events that can fire while the agent sits idle: never activity
    ("TeammateIdle", pl("TeammateIdle", teammate_name="t2", team_name="crew"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("InstructionsLoaded", pl("InstructionsLoaded", file_path="/w/CLAUDE.md", memory_type="Project", load_reason="session_start"),
     {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("ConfigChange", pl("ConfigChange", source="user_settings", file_path="~/.claude/settings.json"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("CwdChanged", pl("CwdChanged", old_cwd="/w", new_cwd="/w/sub"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("FileChanged", pl("FileChanged", file_path="/w/.env", event="change"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("WorktreeCreate", pl("WorktreeCreate", name="fix-1"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("WorktreeRemove", pl("WorktreeRemove", worktree_path="/w/.claude/worktrees/fix-1"), {"state": "idle"}, "idle", Reason.NOISE, False, [], [], False),
    ("PreCompact", pl("PreCompact", trigger="auto", custom_instructions=""), {}, "busy", Reason.SUBAGENT, True, [], [], True),
    ("PostCompact", pl("PostCompact", trigger="manual", compact_summary="…"), {}, "busy", Reason.SUBAGENT, True, [], [], True),
    # an MCP server asks the user (form or URL): waiting until its result
    ("Elicitation", pl("Elicitation", mcp_server_name="github", message="Pick a repo", mode="form", requested_schema={}),
     {}, W, Reason.PERMISSION, True, ["main|elicit:github"], [], True),
    ("ElicitationResult", pl("ElicitationResult", mcp_server_name="github", action="accept", content={}),
     {"state": W, "pending": ["main|elicit:github"]}, "busy", Reason.ANSWERED, True, [], [], True),
    # SessionEnd ends the agent only when the work ends; /clear and resume hand it to the next session
    ("SessionEnd-clear", pl("SessionEnd", reason="clear"), {}, "idle", Reason.HANDOFF, True, [], [], True),
    ("SessionEnd-resume", pl("SessionEnd", reason="resume"), {}, "idle", Reason.HANDOFF, True, [], [], True),
    ("SessionEnd-logout", pl("SessionEnd", reason="logout"), {}, "idle", Reason.SESSION_END, True, [], [], True),
    ("SessionEnd-prompt_input_exit", pl("SessionEnd", reason="prompt_input_exit"), {}, "idle", Reason.SESSION_END, True, [], [], True),
    ("SessionEnd-bypass_permissions_disabled", pl("SessionEnd", reason="bypass_permissions_disabled"), {}, "idle", Reason.SESSION_END, True, [], [], True),
    ("SessionEnd-other", pl("SessionEnd", reason="other"), {}, "idle", Reason.SESSION_END, True, [], [], True),
    ("unknown-event", pl("SomeFutureEvent"), {}, "busy", Reason.UNKNOWN_EVENT, False, [], [], False),
]
ENDED = {"SessionEnd-logout", "SessionEnd-prompt_input_exit", "SessionEnd-bypass_permissions_disabled", "SessionEnd-other"}


def seed(goals: Path, **over) -> Path:
    p = goals / "a01" / "goal.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({**A01, **over}, indent=2) + "\n")
    return p


@pytest.mark.parametrize("name,payload,before,state,reason,written,pending,tools,touched", ROWS, ids=[r[0] for r in ROWS])
def test_documented_payload(tmp_path, capsys, name, payload, before, state, reason, written, pending, tools, touched):
    assert decide(payload).reason is reason
    path = seed(tmp_path, **before)
    raw = path.read_bytes()
    assert run_hook(["--agent", "a01", "--goals-dir", str(tmp_path)], stdin=json.dumps(payload), env={}, now=NOW) == 0
    assert capsys.readouterr().err == ""
    if not written:
        assert path.read_bytes() == raw  # untouched, byte for byte
        return
    doc = json.loads(path.read_text())
    assert doc["state"] == state
    assert doc.get("pending", []) == pending
    assert doc.get("tools_open", []) == tools
    assert doc["last_activity"] == (STAMP if touched else OLD)
    assert doc["hook_event"] == payload["hook_event_name"]
    assert doc.get("ended") is (True if name in ENDED else None)
    assert ("handoff" in doc) is (name.startswith("SessionEnd-") and name not in ENDED)
    assert doc.get("stop_error") == ("rate_limit" if name == "StopFailure" else None)
    for k in ("agent", "task", "phase", "dod", "dod_contract", "dod_status"):
        assert doc[k] == A01[k]  # others' fields kept exactly
    assert list(doc)[:len(A01)] == list(A01)  # and in the same order


def test_every_documented_event_has_a_row():
    documented = {"SessionStart", "Setup", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "PermissionRequest",
                  "PermissionDenied", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
                  "SubagentStart", "SubagentStop", "TaskCreated", "TaskCompleted", "Stop", "StopFailure", "TeammateIdle",
                  "InstructionsLoaded", "ConfigChange", "CwdChanged", "FileChanged", "WorktreeCreate", "WorktreeRemove",
                  "PreCompact", "PostCompact", "Elicitation", "ElicitationResult", "SessionEnd"}
    rows = {r[1]["hook_event_name"] for r in ROWS}
    assert documented <= rows
    kinds = {r[1].get("notification_type") for r in ROWS if r[1]["hook_event_name"] == "Notification"} - {None}
    assert kinds == {"permission_prompt", "idle_prompt", "auth_success", "elicitation_dialog", "elicitation_url_dialog",
                     "agent_needs_input"}
    from watcher.cli.hook import HOOK_EVENTS

    mapped = {r[1]["hook_event_name"] for r in ROWS if r[5]}  # events that write: all installed
    assert mapped <= set(HOOK_EVENTS)


def run(goals: Path, payload: dict, now: float = NOW, **kw) -> dict:
    assert run_hook(["--goals-dir", str(goals), *kw.get("args", ["--agent", "a01"])], stdin=json.dumps(payload),
                    env={}, now=now) == 0
    return json.loads((goals / "a01" / "goal.json").read_text())


def test_waiting_is_cleared_only_by_its_own_answer(tmp_path):
    """Parallel subagents: A's permission request is not answered by B's tool events."""
    seed(tmp_path)
    a, b = {"agent_id": "sa_A", "agent_type": "general"}, {"agent_id": "sa_B", "agent_type": "general"}
    edit = {"tool_name": "Edit", "tool_input": {"file_path": "/w/x.py"}}
    read = {"tool_name": "Read", "tool_input": {"file_path": "/w/y.py"}}
    assert run(tmp_path, pl("PreToolUse", tool_use_id="tA", **a, **edit))["state"] == "busy"
    assert run(tmp_path, pl("PermissionRequest", **a, **edit))["state"] == W
    for ev in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):  # B keeps working
        assert run(tmp_path, pl(ev, tool_use_id="tB", **b, **read))["state"] == W, ev
    assert run(tmp_path, pl("PostToolBatch"))["state"] == W
    assert run(tmp_path, pl("SubagentStop", **b))["state"] == W  # B finished: A still asks
    # the main thread's parallel call finishing does not answer A either
    assert run(tmp_path, pl("PostToolUse", tool_use_id="tM", **read))["state"] == W
    doc = run(tmp_path, pl("PostToolUse", tool_use_id="tA", **a, **edit))  # A's own answer
    assert doc["state"] == "busy" and "pending" not in doc and "tools_open" not in doc


def test_clear_keeps_the_agent_and_remaps_its_session(tmp_path):
    """/clear: SessionEnd(clear) then SessionStart(clear) with a new session_id, agent mapped by session."""
    g = tmp_path
    seed(g, session_id=BASE["session_id"])
    args = {"args": []}
    assert run(g, pl("UserPromptSubmit"), **args)["state"] == "busy"
    doc = run(g, pl("SessionEnd", reason="clear"), **args)
    assert "ended" not in doc and doc["handoff"]["cwd"] == BASE["cwd"]
    new = {**pl("SessionStart", source="clear"), "session_id": "9a9a-new"}
    doc = run(g, new, **args)
    assert doc["session_id"] == "9a9a-new" and "handoff" not in doc and doc["state"] == "idle"
    doc = run(g, {**pl("UserPromptSubmit"), "session_id": "9a9a-new", "cwd": "/elsewhere"}, **args)
    assert doc["state"] == "busy"  # found by its new session id
    doc = run(g, {**pl("SessionEnd", reason="prompt_input_exit"), "session_id": "9a9a-new"}, **args)
    assert doc["ended"] is True


def test_a_request_with_a_tool_use_id_is_answered_by_that_call_even_with_edited_input(tmp_path):
    seed(tmp_path)
    assert run(tmp_path, pl("PermissionRequest", tool_use_id="toolu_9", **BASH))["pending"] == ["main|perm:Bash#toolu_9"]
    other = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert run(tmp_path, pl("PostToolUse", tool_use_id="toolu_8", **other))["state"] == W  # a parallel call
    edited = {"tool_name": "Bash", "tool_input": {"command": "pytest -q -x"}}  # the user edited the command
    doc = run(tmp_path, pl("PostToolUse", tool_use_id="toolu_9", **edited))
    assert doc["state"] == "busy" and "pending" not in doc
