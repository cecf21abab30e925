"""The pure core of ``fleetwatch hook``: one Claude Code hook payload -> what it means for goal.json.

``decide(payload) -> Decision`` is the mapping table of docs/readme/hook.md (one row per hook event
and notification type of the settings schema of the Claude Code versions the real-client tests run,
tests/test_realclient_*.py); ``apply(doc, decision, agent, now) -> new doc`` computes the new
goal.json object. Both are pure: no I/O, no clock.

Invariants:
- Only ``HOOK_KEYS`` change; every other key is kept exactly, in the same order.
- ``state`` is ``waiting`` exactly while ``pending`` (the open requests for the human) is not
  empty. A request is keyed by who asked (``agent_id``, "main" for the session's own thread) and
  what (the tool's name, the notification type, the MCP server of an elicitation), so another
  subagent's tool events never clear it; only its own answer (that actor's next event for that
  tool: a PermissionRequest carries no ``tool_use_id``, and AskUserQuestion's PostToolUse adds the
  answers to ``tool_input``), or an event that ends every dialog (a new prompt, Stop, an
  ``Interrupt``, a session start or end), does.
- ``waiting_for`` is ``{"kind", "tool"}`` exactly while ``state`` is ``waiting``, derived from the
  pending requests: metadata only (a tool's name, never its input, a prompt or a question).
- ``tools_open`` lists the tool calls begun (PreToolUse) and not finished (PostToolUse /
  PostToolUseFailure): the watcher allows a longer silence while one is open.
- Events that can fire while the agent sits at its prompt (file watches, config and instruction
  loads, worktrees, ``idle_prompt``) never count as activity.
"""
from __future__ import annotations

import enum
import json
import time

HOOK_KEYS = ("state", "last_activity", "hook_event", "ended", "ended_at", "stop_error", "pending",
             "tools_open", "handoff", "session_id", "waiting_for", "tmux", "claude_pid", "hook_at")
MAX_PENDING = 32       # open requests kept per goal.json (oldest dropped past it)
MAX_TOOLS_OPEN = 64    # open tool calls kept (oldest dropped past it)
MAIN = "main"          # the actor of events without agent_id: the session's own thread

BUSY_EVENTS = frozenset({"UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "PostToolUse",
                         "PostToolBatch", "PermissionDenied", "PreSkillShellCommand"})
ACTIVITY_EVENTS = frozenset({"SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "TaskCreated",
                             "TaskCompleted"})
# documented events that say nothing about this agent's state (may fire while it is idle)
NOISE_EVENTS = frozenset({"Setup", "InstructionsLoaded", "ConfigChange", "CwdChanged", "FileChanged",
                          "WorktreeCreate", "WorktreeRemove", "TeammateIdle", "DirectoryAdded", "MessageDisplay",
                          "PreModelSwitch", "PostModelSwitch"})
# a notification that a dialog waits for the person -> the kind of waiting_for it means
WAITING_NOTIFICATIONS = {"permission_prompt": "permission", "worker_permission_prompt": "permission",
                         "elicitation_dialog": "dialog", "elicitation_url_dialog": "dialog",
                         "agent_needs_input": "input"}
# a notification that an MCP server's dialog was answered or closed
ANSWER_NOTIFICATIONS = frozenset({"elicitation_complete", "elicitation_response"})
# the other notification types of the schema: nothing about this agent's state
NOISE_NOTIFICATIONS = frozenset({"auth_success", "auth_storage_failure", "agent_completed", "computer_use_enter",
                                 "computer_use_exit", "plugin_notification", "push_notification"})
QUESTION_TOOLS = frozenset({"AskUserQuestion"})   # a PermissionRequest of these is a question to the person
DIALOG_TOOLS = frozenset({"ExitPlanMode"})        # ... of these a dialog (a plan to approve)
REVIVING = frozenset({"UserPromptSubmit"})  # besides SessionStart, what brings an ended agent back: a prompt
ENDING_REASONS_KEEP = frozenset({"clear", "resume"})  # SessionEnd reasons after which the work goes on
FINISHED_TASK_STATUSES = frozenset({"completed", "complete", "done", "failed", "killed", "stopped", "cancelled",
                                    "canceled", "exited", "error"})
TOOL_DONE_EVENTS = frozenset({"PostToolUse", "PostToolUseFailure", "PermissionDenied"})


class Reason(enum.Enum):
    """Why a payload leads (or does not lead) to a change of goal.json."""

    STARTED = "session started, cleared or resumed: at its prompt, idle"
    WORKING = "agent activity: busy"
    PERMISSION = "agent waits for a permission or an answer"
    ANSWERED = "a pending request was answered"
    IDLE_PROMPT = "idle prompt notification: idle if it was busy (backstop for a missed Stop)"
    INTERRUPTED = "turn interrupted (Esc, a denied permission, a rewind): idle"
    NOISE = "says nothing about the state: no change"
    STOPPED = "turn finished: idle"
    BACKGROUND = "turn finished but background tasks still run: busy"
    STOP_FAILURE = "turn ended by an API error: idle, error kind kept"
    SUBAGENT = "subagent, task or compaction activity: last_activity only"
    SESSION_END = "session ended: the agent leaves the fleet"
    HANDOFF = "session cleared or resumed: the agent stays, its next session is mapped to it"
    UNKNOWN_EVENT = "event not mapped: no change"


class Decision:
    """What one payload means. ``state``: the state to set when no request is pending (None:
    keep); ``write`` False: touch nothing; ``touch``: set last_activity; ``ask``: a pending key to
    add; ``clear``: "all" | "actor" | "tool" | "key" | "dialogs" | None; ``tool_open``/``tool_close``: an open
    tool call key to add/remove; ``handoff``: record the session for its successor."""

    __slots__ = ("event", "reason", "state", "write", "stop_error", "ended", "touch", "actor", "ask", "clear",
                 "key", "call", "tool_open", "tool_close", "handoff", "only_if_busy", "new_session")

    def __init__(self, event: str, reason: Reason, state: str | None = None, *, write: bool = True,
                 stop_error: str | None = None, ended: bool = False, touch: bool = True, actor: str = MAIN,
                 ask: str | None = None, clear: str | None = None, key: str | None = None,
                 tool_open: str | None = None, tool_close: str | None = None, handoff: bool = False,
                 only_if_busy: bool = False, new_session: bool = False):
        self.event, self.reason, self.state, self.write = event, reason, state, write
        self.stop_error, self.ended, self.touch, self.actor = stop_error, ended, touch, actor
        self.ask, self.clear, self.key = ask, clear, key
        self.call = ""  # the tool call's tool_use_id, when the payload has one
        self.tool_open, self.tool_close, self.handoff = tool_open, tool_close, handoff
        self.only_if_busy, self.new_session = only_if_busy, new_session

    def __repr__(self) -> str:  # for test failure messages
        return (f"Decision({self.event!r}, {self.reason.name}, state={self.state!r}, write={self.write}, "
                f"ask={self.ask!r}, clear={self.clear!r})")


# ---------------------------------------------------------------- payload fields

def _str(payload: dict, key: str) -> str:
    v = payload.get(key)
    return v[:200] if isinstance(v, str) else ""


def actor_of(payload: dict) -> str:
    """Who the event is about: the subagent's ``agent_id``, else the main thread."""
    return _str(payload, "agent_id") or MAIN


def tool_fingerprint(payload: dict) -> str:
    """The tool call an event is about: tool name + digest of its input (stable across the
    PreToolUse / PermissionRequest / PostToolUse of one call, which may lack ``tool_use_id``).
    hashlib is imported here, not at the top: it loads OpenSSL (a part of the hook's start), and
    the tool events Claude Code sends carry ``tool_use_id``, so most hooks never get here."""
    import hashlib

    name = _str(payload, "tool_name") or "?"
    try:
        raw = json.dumps(payload.get("tool_input"), sort_keys=True, ensure_ascii=True, default=str)
    except (TypeError, ValueError, RecursionError):
        raw = "?"
    return f"{name}#{hashlib.sha256(raw.encode()).hexdigest()[:12]}"


def _tool_key(payload: dict) -> str:
    return _str(payload, "tool_use_id") or tool_fingerprint(payload)


def tool_name(payload: dict) -> str:
    return _str(payload, "tool_name")[:64] or "?"


def background_running(payload: dict) -> bool:
    tasks = payload.get("background_tasks")
    if not isinstance(tasks, list):
        return False
    for t in tasks:
        status = t.get("status") if isinstance(t, dict) else None
        if not isinstance(status, str) or status.lower() not in FINISHED_TASK_STATUSES:
            return True  # listed and not known to be finished: still running
    return False


def notification_kind(payload: dict) -> str:
    kind = payload.get("notification_type")
    if isinstance(kind, str) and kind:
        return kind
    msg = payload.get("message")  # older Claude Code versions send only the message text
    if isinstance(msg, str):
        if msg.startswith("Claude needs your permission"):
            return "permission_prompt"
        if msg.startswith("Claude is waiting for your input"):
            return "idle_prompt"
    return ""


# ---------------------------------------------------------------- the table

def decide(payload: dict) -> Decision:
    """The mapping table of docs/readme/hook.md, as a function of the payload alone."""
    event = payload.get("hook_event_name")
    event = event if isinstance(event, str) else ""
    actor = actor_of(payload)
    if event == "SessionStart":
        if _str(payload, "source") == "compact":  # compaction inside a turn: the work goes on
            return Decision(event, Reason.SUBAGENT, actor=actor)
        return Decision(event, Reason.STARTED, "idle", clear="all", new_session=True)
    if event == "Interrupt" or event == "PostToolUseFailure" and payload.get("is_interrupt") is True:
        # Esc during a tool or while the model thinks, No/Esc at a permission dialog, a rewind: the turn
        # ends with no Stop and no idle_prompt (Claude Code 2.1.337); older versions: is_interrupt
        return Decision(event, Reason.INTERRUPTED, "idle", clear="all")
    if event in BUSY_EVENTS:
        d = Decision(event, Reason.WORKING, "busy", actor=actor)
        if event in ("UserPromptSubmit", "UserPromptExpansion"):
            d.clear = "all"  # the user typed at the main prompt (a slash command too): no dialog is open
        elif event == "PreToolUse":
            d.tool_open = _tool_key(payload)
        elif event in TOOL_DONE_EVENTS:
            d.clear, d.key, d.call = "tool", tool_name(payload), _str(payload, "tool_use_id")
            d.tool_close = _tool_key(payload)
        return d
    if event == "PostToolUseFailure":  # a failed call (not an interrupt): the agent goes on
        d = Decision(event, Reason.WORKING, "busy", actor=actor, clear="tool", key=tool_name(payload),
                     tool_close=_tool_key(payload))
        d.call = _str(payload, "tool_use_id")
        return d
    if event == "PermissionRequest":
        # keyed by actor + tool name (+ the call's id where a payload has one): Claude Code's has no
        # tool_use_id, and the PostToolUse of an AskUserQuestion adds the answers to tool_input (a
        # digest of the input never matched it)
        call = _str(payload, "tool_use_id")
        return Decision(event, Reason.PERMISSION, "waiting", actor=actor,
                        ask=f"{actor}|perm:{tool_name(payload)}" + (f"#{call}" if call else ""))
    if event == "Elicitation":
        server = _str(payload, "mcp_server_name") or "?"
        return Decision(event, Reason.PERMISSION, "waiting", actor=actor, ask=f"{actor}|elicit:{server}")
    if event == "ElicitationResult":
        server = _str(payload, "mcp_server_name") or "?"
        return Decision(event, Reason.ANSWERED, "busy", actor=actor, clear="key", key=f"{actor}|elicit:{server}")
    if event == "Notification":
        kind = notification_kind(payload)
        if kind in WAITING_NOTIFICATIONS:  # fires seconds after the dialog showed: not activity
            return Decision(event, Reason.PERMISSION, "waiting", actor=actor, ask=f"{actor}|notice:{kind}",
                            touch=False)
        if kind in ANSWER_NOTIFICATIONS:
            return Decision(event, Reason.ANSWERED, None, actor=actor, clear="dialogs")
        if kind == "idle_prompt":
            return Decision(event, Reason.IDLE_PROMPT, "idle", touch=False, only_if_busy=True)
        return Decision(event, Reason.NOISE, write=False)
    if event == "Stop":
        if background_running(payload):
            return Decision(event, Reason.BACKGROUND, "busy", clear="all")
        return Decision(event, Reason.STOPPED, "idle", clear="all")
    if event == "StopFailure":
        kind = payload.get("error_type") or payload.get("error") or "unknown"
        return Decision(event, Reason.STOP_FAILURE, "idle", stop_error=str(kind)[:64], clear="all")
    if event in ACTIVITY_EVENTS:
        d = Decision(event, Reason.SUBAGENT, actor=actor)
        if event == "SubagentStop" and actor != MAIN:
            d.clear = "actor"  # a finished subagent asks nothing any more
        return d
    if event == "SessionEnd":
        if _str(payload, "reason") in ENDING_REASONS_KEEP:
            return Decision(event, Reason.HANDOFF, "idle", clear="all", handoff=True)
        return Decision(event, Reason.SESSION_END, "idle", ended=True, clear="all")
    if event in NOISE_EVENTS:
        return Decision(event, Reason.NOISE, write=False)
    return Decision(event, Reason.UNKNOWN_EVENT, write=False)


def iso_utc(now: float) -> str:
    """Epoch seconds -> ``2026-11-29T19:20:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def _strings(v, cap: int) -> list[str]:
    return [x for x in v if isinstance(x, str)][-cap:] if isinstance(v, list) else []


def _digest_of(p: str, base: str) -> bool:
    """``p`` is ``base#<12 hex digits>``: a request keyed by an input digest (older goal.json)."""
    tail = p[len(base) + 1:] if p.startswith(base + "#") else ""
    return len(tail) == 12 and all(c in "0123456789abcdef" for c in tail)


def _pending_after(pending: list[str], d: Decision) -> list[str]:
    if d.clear == "all":
        pending = []
    elif d.clear == "actor":
        pending = [p for p in pending if p.partition("|")[0] != d.actor]
    elif d.clear == "key":
        pending = [p for p in pending if p != d.key]
    elif d.clear == "dialogs":  # an MCP server's dialog was answered: its elicitation requests and notices
        pending = [p for p in pending if not (p.startswith(f"{d.actor}|elicit:")
                                              or p.startswith(f"{d.actor}|notice:elicitation"))]
    elif d.clear == "tool":
        # the actor's own request for this tool is answered: the one keyed by the tool's name, by
        # this very call's id, or (as goal.json files written before kept them) by a digest of the
        # input or the call's id alone; another call's id keeps its own. Its notices go with its
        # last request
        base = f"{d.actor}|perm:{d.key}"
        mine = {base, f"{base}#{d.call}" if d.call else "", f"{d.actor}|perm:{d.call}" if d.call else ""}
        pending = [p for p in pending if p not in mine and not _digest_of(p, base)]
        left = [p for p in pending if p.startswith(f"{d.actor}|perm:")]
        tool = (d.key or "").partition("#")[0]
        if not left:
            pending = [p for p in pending if not (p.startswith(f"{d.actor}|notice:") and (
                "elicitation" not in p or tool.startswith("mcp__")))]
        if tool.startswith("mcp__"):  # the MCP call ended: its elicitation is over
            server = tool.split("__")[1] if tool.count("__") >= 2 else ""
            pending = [p for p in pending if p != f"{d.actor}|elicit:{server}"]
    if d.ask and d.ask not in pending:
        pending = (pending + [d.ask])[-MAX_PENDING:]
    return pending


def waiting_for(pending: list[str]) -> dict | None:
    """What the newest pending request waits for: ``{"kind": permission|question|dialog|input,
    "tool": name or None}`` (a tool only for a permission). A tool's own request wins over a
    notification about it."""
    if not pending:
        return None
    perms = [p.partition("|perm:")[2] for p in pending if "|perm:" in p]
    if perms:
        tool = perms[-1].partition("#")[0]
        if tool in QUESTION_TOOLS:
            return {"kind": "question", "tool": None}
        if tool in DIALOG_TOOLS:
            return {"kind": "dialog", "tool": None}
        return {"kind": "permission", "tool": None if tool in ("", "?") or tool.startswith("toolu_") else tool}
    what, _, rest = pending[-1].partition("|")[2].partition(":")
    if what == "elicit":
        return {"kind": "dialog", "tool": None}
    return {"kind": WAITING_NOTIFICATIONS.get(rest, "input"), "tool": None}


def apply(doc: dict | None, d: Decision, agent: str, now: float, *, session: str = "",
          cwd: str = "", where: dict | None = None, pid: int | None = None) -> dict | None:
    """The new goal.json object, or None when nothing is to be written. Pure; ``doc`` is not mutated.

    ``doc`` None means goal.json does not exist: it is created as {agent, state, last_activity,
    hook_event} (no ``dod_contract``: the watcher rightly says MAL_LANZADO), except for SessionEnd.
    ``session``/``cwd``: the payload's. The session id is recorded on a SessionStart, and by any
    event when goal.json has none yet; the ``handoff`` of a SessionEnd that clears or resumes keeps
    both (the next session there is mapped to this agent). ``where``: ``{"socket", "pane"}`` of the
    tmux pane the hook runs in ($TMUX, $TMUX_PANE), recorded as ``tmux``; ``pid``: Claude Code's
    process id, recorded as ``claude_pid`` (both for the watcher's exact-pane liveness).
    """
    if not d.write:
        return None
    if doc is not None and doc.get("ended") is True and not (d.ended or d.new_session or d.event in REVIVING):
        return None  # a late event of the session that ended (hooks run concurrently): it stays ended
    if doc is None:
        if d.ended or d.handoff or d.only_if_busy:
            return None  # nothing to end, hand off or settle
        doc = {"agent": agent}
    new = dict(doc)
    old_state = new.get("state")
    pending = _pending_after(_strings(new.get("pending"), MAX_PENDING), d)
    tools = [] if d.clear == "all" else _strings(new.get("tools_open"), MAX_TOOLS_OPEN)
    if d.tool_close in tools:
        tools.remove(d.tool_close)
    if d.tool_open and d.tool_open not in tools:
        tools = (tools + [d.tool_open])[-MAX_TOOLS_OPEN:]
    state: str | None
    if pending:
        state = "waiting"
    elif d.only_if_busy:
        state = d.state if old_state == "busy" else old_state
    elif d.state is not None:
        state = d.state
    elif old_state == "waiting" and "pending" in new:
        state = "busy"  # its last request was answered (by this event): back at work
    else:
        state = old_state if old_state is not None else "busy"  # activity, state unknown: working
    if state is not None:
        new["state"] = state
    for key, val in (("pending", pending), ("tools_open", tools)):
        if val:
            new[key] = val
        else:
            new.pop(key, None)
    stamp = iso_utc(now)
    if d.touch:
        new["last_activity"] = stamp
        # the same moment to the millisecond, epoch seconds: Claude Code's own status set after it
        # is newer than this hook's word (watcher/sources/claude.py)
        new["hook_at"] = round(now, 3)
    new["hook_event"] = d.event
    if d.ended:
        new["ended"] = True
        new["ended_at"] = stamp
    else:
        new.pop("ended", None)  # any other event: the session is (back) in the fleet
        new.pop("ended_at", None)
    wf = waiting_for(pending) if new.get("state") == "waiting" else None
    if wf:
        new["waiting_for"] = wf
    else:
        new.pop("waiting_for", None)
    if d.handoff:
        new["handoff"] = {"session_id": session, "cwd": cwd, "at": stamp}
    elif d.new_session:
        new.pop("handoff", None)
        if session:
            new["session_id"] = session  # the agent's work continues in this session
    elif session and not isinstance(new.get("session_id"), str):
        new["session_id"] = session
    if where and not d.ended:
        new["tmux"] = dict(where)
    if pid and not d.ended:
        new["claude_pid"] = pid
    if d.stop_error is not None:
        new["stop_error"] = d.stop_error
    elif d.state is not None and not d.only_if_busy:
        new.pop("stop_error", None)  # a later state change supersedes the failure
    return new
