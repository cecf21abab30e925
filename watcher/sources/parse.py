"""Pure parsers: bytes or JSON values -> observations. Never raise on bad input: a bad document
becomes an observation with ``error`` set (MAL_LANZADO) carrying a short reason."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import msgspec

from projections.fleet import normalise_phase
from projections.dod_checks import parse_contract
from projections.observations import AgentObs, RunObs

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
        raise ParseError("not JSON" + (" (truncated)" if "truncated" in msg.lower() else "")) from None
    except RecursionError:
        raise ParseError("not JSON (nested too deeply)") from None


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


def agent_from_obj(obj: Any, *, source: str, fallback_id: str | None, path: str | None = None,
                   mtime: float | None = None) -> AgentObs:
    """goal.json (or one `fleetview list --json` item) -> AgentObs. The ``dod`` text is dropped."""
    if not isinstance(obj, dict):
        return AgentObs(agent=fallback_id or "?", source=source, path=path, error="not a JSON object")
    aid = obj.get("agent", obj.get("name"))
    if not isinstance(aid, str) or not aid.strip():
        aid = fallback_id
    if not aid:
        return AgentObs(agent="?", source=source, path=path, error="no agent id")
    aid = aid.strip()[:200]
    contract = parse_contract(obj.get("dod_contract"))   # free text or structured checks (validated)
    sha, clen = contract.digest, contract.length
    cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else None
    la = parse_time(obj.get("last_activity"))
    if la is None:
        la = mtime
    state = obj.get("state")
    error = None
    if "state" in obj and not isinstance(state, str):
        error = f"state has the wrong type ({type(state).__name__})"
    elif contract.error:
        error = contract.error
    return AgentObs(
        agent=aid, source=source, path=path, error=error,
        state=_s(state), phase=normalise_phase(_s(obj.get("phase"))),
        contract_sha256=sha, contract_len=clen, checks=list(contract.checks) if contract.checks else None, cwd=cwd,
        dod_status=_s(obj.get("dod_status")), dod_verifier=_s(obj.get("dod_verifier")),
        last_activity=la, ended=obj.get("ended") is True, target=_s(obj.get("target")),
        tool_open=isinstance(obj.get("tools_open"), list) and bool(obj.get("tools_open")),
        task=(_s(obj.get("task")) or None) and obj["task"][:200],
    )


def parse_goal(raw: bytes, *, source: str, path: str, folder_id: str, mtime: float) -> AgentObs:
    try:
        obj = decode_json(raw)
    except ParseError as e:
        return AgentObs(agent=folder_id, source=source, path=path, error=e.reason)
    return agent_from_obj(obj, source=source, fallback_id=folder_id, path=path, mtime=mtime)


def parse_steps(raw: bytes, *, source: str, path: str, folder_id: str) -> RunObs:
    try:
        obj = decode_json(raw)
    except ParseError as e:
        return RunObs(run=folder_id, source=source, path=path, error=e.reason)
    if not isinstance(obj, dict):
        return RunObs(run=folder_id, source=source, path=path, error="not a JSON object")
    run = obj.get("run")
    run = run.strip()[:200] if isinstance(run, str) and run.strip() else folder_id
    return RunObs(run=run, source=source, path=path, doc=obj)
