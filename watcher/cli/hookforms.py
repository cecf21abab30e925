"""The hook entries ``fleetwatch hook install`` writes, in the cheapest form a Claude Code takes (pure).

Forms, cheapest first (what each costs Claude Code per event: docs/bench.md):
- ``http``: ``{"type": "http", "url": <[hook] listen>/hook, "headers", "allowedEnvVars"}``: a
  loopback POST to the running watcher, no process. Claude Code interpolates the headers from its
  environment: ``$FLEETWATCH_AGENT``, ``$TMUX`` and ``$TMUX_PANE`` (the pane, for exact-pane
  liveness), ``$FLEETWATCH_GOALS_DIR``. It runs no http hook for ``SessionStart`` (nor ``Setup``):
  that one event stays a command.
- ``exec``: ``{"type": "command", "command": <fleetwatch>, "args": ["hook", ...]}``: one process,
  no shell (Claude Code 2.1.145 and later).
- ``shell``: ``{"type": "command", "command": "<fleetwatch> hook ..."}`` through a shell (any version).
Command hooks stay synchronous: two ``async`` hooks of one agent race each other, and a later
event's write could land before an earlier one's (an agent's state would go back).

Events: only those the mapping needs (``needed``), never one the installed version does not know
(a settings file naming an unknown event is skipped whole): ``PostToolBatch`` and ``PreToolUse``
are left out (``REDUNDANT``: a tool call costs one delivery, its ``PostToolUse``), ``Interrupt``
is added where the version has it. ``Notification`` gets a matcher naming the notification types the
mapping reads, ``PreToolUse`` (when asked for) one naming the tools that can run long
(``LONG_TOOLS``); the other events with a matcher match every value (``*``).
"""
from __future__ import annotations

import os
import shlex
from typing import Any

HTTP_SKIPPED = frozenset({"SessionStart", "Setup"})   # Claude Code runs no http hook for these
EXEC_SINCE = (2, 1, 145)        # the `args` exec form and http hooks: in the settings schema of 2.1.145 on
INTERRUPT_SINCE = (2, 1, 337)   # the first version the Interrupt event was seen in (its settings schema)
# not installed by default: PostToolBatch says what the PostToolUse before it said; PreToolUse only
# opens a tool call (``tools_open``: a longer silence allowed while a tool runs), which the pane's
# activity (the client's spinner ticks while a tool runs) and Claude Code's session list already
# show, and it is the dearest hook on the real client (docs/bench.md); `--events all` adds both
REDUNDANT = frozenset({"PostToolBatch", "PreToolUse"})
HTTP_TIMEOUT = 2                # seconds: a loopback POST answered once queued (a down watcher: refused at once)
NOTIFICATION_TYPES = ("permission_prompt", "worker_permission_prompt", "idle_prompt", "elicitation_dialog",
                      "elicitation_url_dialog", "elicitation_complete", "elicitation_response",
                      "agent_needs_input")
# PreToolUse only opens a tool call (``tools_open``: a longer silence is allowed while one runs):
# worth a delivery for the tools that can run for minutes; a Read, Edit or Grep ends within its
# second, and its PostToolUse (every tool: it also answers a permission request) says it ran
LONG_TOOLS = "Bash|BashOutput|Task|Agent|WebFetch|WebSearch|Skill|mcp__.*"
ENV_HEADERS = {"X-Fleetwatch-Agent": "FLEETWATCH_AGENT", "X-Fleetwatch-Tmux": "TMUX",
               "X-Fleetwatch-Pane": "TMUX_PANE", "X-Fleetwatch-Goals-Dir": "FLEETWATCH_GOALS_DIR"}
FORMS = ("auto", "http", "exec", "shell")


def needed(events: tuple[str, ...], version: tuple[int, int, int] | None) -> tuple[str, ...]:
    """The events of ``events`` worth installing for ``version`` (see the module doc)."""
    out = tuple(e for e in events if e not in REDUNDANT)
    if version is not None and version >= INTERRUPT_SINCE and "Interrupt" not in out:
        out += ("Interrupt",)
    return out


def form_for(form: str, version: tuple[int, int, int] | None, url: str | None) -> str:
    """``auto``: http when the watcher's endpoint is configured (``url``) and the version takes
    http hooks, else exec where the version takes it, else shell."""
    if form != "auto":
        return form
    modern = version is not None and version >= EXEC_SINCE
    if url and modern:
        return "http"
    return "exec" if modern else "shell"


def matcher(event: str, matcher_events: frozenset[str]) -> str | None:
    if event == "Notification":
        return "|".join(NOTIFICATION_TYPES)
    if event == "PreToolUse":
        return LONG_TOOLS
    return "*" if event in matcher_events else None


def argv(agent: str | None, goals_dir: str | None) -> list[str]:
    out = ["hook"]
    if agent:
        out += ["--agent", agent]
    if goals_dir:
        out += ["--goals-dir", goals_dir]
    return out


def entry(event: str, form: str, exe: str, *, url: str | None, agent: str | None, goals_dir: str | None,
          timeout: int) -> dict[str, Any]:
    """The one hook entry of ``event`` in ``form`` (http falls back to exec where Claude Code runs
    no http hook). ``exe``: the fleetwatch program (absolute path)."""
    if form == "http" and event not in HTTP_SKIPPED and url:
        headers = {h: f"${v}" for h, v in ENV_HEADERS.items()}
        if agent:
            headers["X-Fleetwatch-Agent"] = agent
        if goals_dir:
            headers["X-Fleetwatch-Goals-Dir"] = goals_dir
        used = [v for h, v in ENV_HEADERS.items() if headers[h] == f"${v}"]
        return {"type": "http", "url": url, "timeout": HTTP_TIMEOUT, "headers": headers, "allowedEnvVars": used}
    if form in ("http", "exec"):
        return {"type": "command", "command": exe, "args": argv(agent, goals_dir), "timeout": timeout}
    return {"type": "command", "command": " ".join([shlex.quote(exe)] + [shlex.quote(a) for a in argv(agent, goals_dir)]),
            "timeout": timeout}


def _ours_command(command: Any) -> bool:
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return any(os.path.basename(w) == "fleetwatch" and words[i + 1:i + 2] == ["hook"] for i, w in enumerate(words))


def is_ours_entry(h: Any) -> bool:
    """A settings hook entry that runs fleetwatch's hook, in any form: a shell command running
    ``fleetwatch hook``, the exec form (``command`` fleetwatch, ``args`` ["hook", ...]), or an http
    hook posting to a fleetwatch endpoint (``/hook`` with an ``X-Fleetwatch-*`` header)."""
    if not isinstance(h, dict):
        return False
    if h.get("type") == "http":
        headers = h.get("headers")
        return isinstance(h.get("url"), str) and h["url"].rstrip("/").endswith("/hook") and isinstance(headers, dict) \
            and any(str(k).lower().startswith("x-fleetwatch-") for k in headers)
    args = h.get("args")
    if isinstance(args, list):
        return isinstance(h.get("command"), str) and os.path.basename(h["command"]) == "fleetwatch" \
            and args[:1] == ["hook"]
    return _ours_command(h.get("command"))
