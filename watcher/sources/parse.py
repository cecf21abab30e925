"""Pure parsers: bytes or JSON values -> observations. Never raise on bad input: a bad document
becomes an observation with ``error`` set (MAL_LANZADO) carrying a short reason."""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

import msgspec

from projections.fleet.fold import normalise_phase
from projections.dod.checks import parse_contract
from projections.observations import AgentObs, RunObs, SourceResult
from projections.fleet.waiting import clean as waiting_clean

_dec = msgspec.json.Decoder()
MAX_DEPTH_HINT = "deeply nested"


class ParseError(Exception):
    """A document could not be parsed; ``reason`` is short and content-free."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def decode_json(raw: bytes) -> Any:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        raise ParseError("empty file")
    try:
        return _dec.decode(raw)
    except msgspec.DecodeError as e:
        msg = str(e)
        if "depth" in msg.lower() or "recursion" in msg.lower():
            raise ParseError("not JSON (nested too deeply)") from None
        raise ParseError("not JSON" + (_not_utf8(raw) or (" (truncated)" if "truncated" in msg.lower() else ""))) from None
    except RecursionError:
        raise ParseError("not JSON (nested too deeply)") from None


def _not_utf8(raw: bytes) -> str:
    """`` (not UTF-8 text: byte N)`` when that is why ``raw`` is no JSON, else ''. A goal.json in
    Latin-1 or UTF-16 (an editor's "Unicode") reads as valid JSON to the eye: a bare "not JSON"
    sent its reader looking for a syntax error that is not there."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        utf16 = ", UTF-16? save it as UTF-8" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        return f" (not UTF-8 text: byte {e.start}{utf16})"
    return ""


def parse_time(v: Any) -> float | None:
    """ISO-8601 (``Z`` or offset) or epoch seconds -> epoch seconds; anything else -> None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        try:
            f = float(v)
        except OverflowError:  # a JSON integer beyond float range (found by tests/drills/test_fuzz.py)
            return None
        return f if math.isfinite(f) and 0 <= f < 1e11 else None
    if isinstance(v, str) and v:
        try:
            d = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return None
        if d.tzinfo is None:
            d = d.replace(tzinfo=timezone.utc)
        return d.timestamp()
    return None


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


class _Goal(msgspec.Struct):
    """The goal.json keys an observation reads, each any JSON value (UNSET: the key is absent).
    Decoding straight into it (in C) leaves the other keys (the long ``dod`` text above all)
    unbuilt: half the Python work of a first poll was building and probing each document's
    dict. Anything it cannot take (not an object) goes the generic way (``parse_goal``)."""

    agent: Any = msgspec.UNSET
    name: Any = msgspec.UNSET
    state: Any = msgspec.UNSET
    phase: Any = None
    task: Any = None
    dod_contract: Any = None
    dod_status: Any = None
    dod_verifier: Any = None
    cwd: Any = None
    last_activity: Any = None
    ended: Any = None
    target: Any = None
    tools_open: Any = None
    tmux: Any = None          # the hook's {"socket", "pane", "pid"}: the exact pane (watcher/sources/panes.py)
    claude_pid: Any = None
    waiting_for: Any = None
    session_id: Any = None    # the hook's: joins the claude source's sessions (watcher/sources/claude.py)
    hook_at: Any = None       # the hook's last activity write, epoch seconds (ms)
    stop_error: Any = None    # the hook's: the API error kind that ended the last turn


_goal_dec = msgspec.json.Decoder(_Goal)
_UNSET = msgspec.UNSET


def agent_from_obj(obj: Any, *, source: str, fallback_id: str | None, path: str | None = None,
                   mtime: float | None = None) -> AgentObs:
    """goal.json (or one `fleetview list --json` item) -> AgentObs. The ``dod`` text is dropped.
    ``mtime`` (a file's): its last_activity is at most that (see ``parse_goal``)."""
    if not isinstance(obj, dict):
        return AgentObs(agent=fallback_id or "?", source=source, path=path, error="not a JSON object")
    return _from_goal(msgspec.convert(obj, _Goal), source=source, fallback_id=fallback_id, path=path, mtime=mtime)


def _from_goal(g: _Goal, *, source: str, fallback_id: str | None, path: str | None,
               mtime: float | None) -> AgentObs:
    aid = g.agent if g.agent is not _UNSET else (None if g.name is _UNSET else g.name)
    if not isinstance(aid, str) or not aid.strip():
        aid = fallback_id
    if not aid:
        return AgentObs(agent="?", source=source, path=path, error="no agent id")
    aid = aid.strip()[:200]
    contract = parse_contract(g.dod_contract)   # free text or structured checks (validated)
    la = parse_time(g.last_activity)
    if la is None or mtime is not None and la > mtime:
        la = mtime  # absent, or later than the file was written: the mtime (see parse_goal)
    state = None if g.state is _UNSET else g.state
    error = None
    if state is not None and not isinstance(state, str) or g.state is None:
        error = f"state has the wrong type ({type(state).__name__})"
    elif contract.error:
        error = contract.error
    phase, task, tools = g.phase, g.task, g.tools_open
    pane, socket, pid = _tmux(g.tmux, g.claude_pid) if g.tmux is not None or g.claude_pid is not None \
        else (None, None, None)
    phase = normalise_phase(phase if isinstance(phase, str) else None)
    return AgentObs(
        agent=aid, source=source, path=path, error=error,
        state=state if isinstance(state, str) else None,
        phase=phase, waiting_for=waiting_clean(g.waiting_for, phase),
        contract_sha256=contract.digest, contract_len=contract.length,
        checks=list(contract.checks) if contract.checks else None,
        cwd=g.cwd if isinstance(g.cwd, str) else None,
        dod_status=_s(g.dod_status), dod_verifier=_s(g.dod_verifier),
        last_activity=la, ended=g.ended is True, target=_s(g.target),
        tool_open=isinstance(tools, list) and bool(tools),
        pane=pane, tmux_socket=socket, claude_pid=pid,
        session_id=g.session_id[:200] if isinstance(g.session_id, str) and g.session_id else None,
        hook_at=float(g.hook_at) if type(g.hook_at) in (int, float) and 0 < g.hook_at < 1e11 else None,
        stop_error=g.stop_error.strip()[:64] if isinstance(g.stop_error, str) and g.stop_error.strip() else None,
        task=task[:200] if isinstance(task, str) and task else None,
    )


_PANE = re.compile(r"^%[0-9]{1,9}$")


def _tmux(t: Any, top_pid: Any) -> tuple[str | None, str | None, int | None]:
    """(pane id, socket path, claude pid) the hook recorded: ``tmux`` {"socket": $TMUX's path,
    "pane": $TMUX_PANE, "pid"}, or a top-level ``claude_pid``. Anything malformed is None: a pane
    is ``%`` and digits, a socket an absolute path, a pid a positive int."""
    pane = socket = pid = None
    if isinstance(t, dict):
        p, s, pid = t.get("pane"), t.get("socket"), t.get("pid")
        pane = p if isinstance(p, str) and _PANE.match(p) else None
        if isinstance(s, str) and s.startswith("/") and len(s) <= 4096 and "\0" not in s:
            socket = s.rsplit(",", 2)[0] if s.count(",") >= 2 else s  # $TMUX whole: "path,pid,session"
    if pid is None:
        pid = top_pid
    if not (type(pid) is int and 0 < pid < 1 << 31):
        pid = None
    return pane, socket, pid


def parse_goal(raw: bytes, *, source: str, path: str, folder_id: str, mtime: float) -> AgentObs:
    """One goal.json's bytes -> AgentObs; ``mtime``: the file's modification time. Its
    ``last_activity`` is the document's when that is at or before ``mtime``, else ``mtime``
    (absent or unreadable too): no file records activity after it was written. A future value
    ("9999-12-31T00:00:00Z", an epoch of year 5138, a writer whose clock is ahead) kept a silent
    busy agent TRABAJANDO for ever, past the ``busy_silence`` backstop (tests/projections/fleet/test_future_activity.py)."""
    try:  # the usual document: an object, decoded into _Goal in one C call
        return _from_goal(_goal_dec.decode(raw), source=source, fallback_id=folder_id, path=path, mtime=mtime)
    except (msgspec.DecodeError, RecursionError):  # not an object, not JSON, a BOM, too deep: the careful way
        pass
    try:
        obj = decode_json(raw)
    except ParseError as e:
        return AgentObs(agent=folder_id, source=source, path=path, error=e.reason)
    return agent_from_obj(obj, source=source, fallback_id=folder_id, path=path, mtime=mtime)


def _with_non_finite(raw: bytes) -> Any:
    """``raw`` decoded by the standard library, which reads ``NaN``, ``Infinity`` and ``1e400``
    (as float nan/inf) where the fast decoder refuses the whole document; None when those are not
    the cause (not JSON, too deep, a lone surrogate the log could not encode, no such number)."""
    import json

    seen = []

    def num(text: str) -> float:
        f = float(text)
        if f - f != 0.0:
            seen.append(f)
        return f

    try:
        doc = json.loads(raw.removeprefix(b"\xef\xbb\xbf"), parse_constant=num, parse_float=num)
        if not seen:
            return None
        msgspec.json.encode(doc)  # what else the fast decoder refused stays refused
    except (ValueError, RecursionError, TypeError, msgspec.EncodeError):  # UnicodeError is a ValueError
        return None
    return doc


def parse_steps(raw: bytes, *, source: str, path: str, folder_id: str) -> RunObs:
    """One steps.json's bytes -> RunObs. A NaN or an Infinity anywhere (Python's json.dump writes
    them for a float metric) made the whole run "not JSON", every rule of it unchecked: such
    numbers are read, and each field they land in is judged as any other value of the wrong type
    (``projections.runs.parse``; tests/watcher/cli/test_steps_non_finite.py)."""
    try:
        obj = decode_json(raw)
    except ParseError as e:
        obj = _with_non_finite(raw) if e.reason == "not JSON" else None
        if obj is None:
            return RunObs(run=folder_id, source=source, path=path, error=e.reason)
    if not isinstance(obj, dict):
        return RunObs(run=folder_id, source=source, path=path, error="not a JSON object")
    run = obj.get("run")
    run = run.strip()[:200] if isinstance(run, str) and run.strip() else folder_id
    return RunObs(run=run, source=source, path=path, doc=obj)


def clamp_activity(res: SourceResult, now: float) -> SourceResult:
    """A fileless source's (command, claude) result with each agent's ``last_activity`` at most
    ``now``, its poll's time: nothing is observed active after it was observed, as no goal.json
    records activity after its mtime (``parse_goal``); each source bounds its own result, so a
    reused one (a wake-up) is the bounded one, and `check`/`doctor`'s polls are bounded too. A future value would otherwise win ``combine`` over
    the goal.json's and keep a silent busy agent TRABAJANDO. ``res`` itself when nothing is later."""
    agents = res.agents
    if not any(a.last_activity is not None and a.last_activity > now for a in agents):
        return res
    return msgspec.structs.replace(res, agents=[
        a if a.last_activity is None or a.last_activity <= now else msgspec.structs.replace(a, last_activity=now)
        for a in agents])
