"""What an agent waits for (pure): the hook's ``waiting_for`` metadata, validated, and its words.

goal.json may carry ``"waiting_for": {"kind": K, "tool": NAME|null}`` while the agent waits
(written by the hook: ``watcher/hook/mapping.py``). :func:`clean` turns any JSON value into
``{"kind", "tool"}`` or None, trusting nothing: only the kinds of ``KINDS``, a tool name only for
a permission and only as a string, cut to ``TOOL_MAX``. Without a usable value, the phase speaks:
``bloqueado`` is ``blocked``, ``preguntando`` a ``question``. Never a command, a prompt or a
question's text: nothing else of the value is kept. Values stay raw (escaping is the renderer's
job: ``projections.text.safe``).
"""
from __future__ import annotations

from typing import Any

KINDS = ("permission", "question", "dialog", "input", "blocked")
TOOL_MAX = 64
PHASE_KIND = {"bloqueado": "blocked", "preguntando": "question"}
WORDS = {"permission": "waiting for permission", "question": "asks a question", "dialog": "waiting in a dialog",
         "input": "needs input", "blocked": "blocked"}


def clean(raw: Any, phase: Any = None) -> dict[str, Any] | None:
    """``{"kind", "tool"}`` from goal.json's ``waiting_for`` (any JSON value), else from the phase
    (normalised: ``bloqueado``/``preguntando``), else None."""
    if isinstance(raw, dict):
        kind = raw.get("kind")
        if type(kind) is str and kind in KINDS:
            tool = raw.get("tool") if kind == "permission" else None
            return {"kind": kind, "tool": tool.strip()[:TOOL_MAX] if type(tool) is str and tool.strip() else None}
    kind = PHASE_KIND.get(phase) if type(phase) is str else None
    return {"kind": kind, "tool": None} if kind else None


def words(w: Any) -> str:
    """"waiting for permission: Bash", "asks a question", … ("" for None or an unknown shape).
    The tool name is raw: the caller escapes the line."""
    if not isinstance(w, dict) or w.get("kind") not in WORDS:
        return ""
    tool = w.get("tool")
    return f"{WORDS[w['kind']]}: {tool}" if w["kind"] == "permission" and isinstance(tool, str) and tool \
        else WORDS[w["kind"]]
