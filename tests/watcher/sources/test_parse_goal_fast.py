"""parse_goal decodes the usual goal.json straight into the keys it reads (watcher/sources/parse.py
``_Goal``); every document, usual or hostile, gives the observation the plain dict reading gives
(the reference below is that reading, as it was before the fast path)."""
from __future__ import annotations

import json
import random

import msgspec

from projections.dod.checks import parse_contract
from projections.fleet.fold import normalise_phase
from projections.observations import AgentObs
from projections.fleet.waiting import clean as waiting_clean
from watcher.sources.parse import ParseError, decode_json, parse_goal, parse_time
from tests.support.exe import ROOT

FIXTURES = ROOT.parent / "shared" / "fixtures"


def _s(v):
    return v if isinstance(v, str) else None


def reference(raw: bytes, folder_id: str, mtime: float) -> AgentObs:
    try:
        obj = decode_json(raw)
    except ParseError as e:
        return AgentObs(agent=folder_id, source="s", path="/p", error=e.reason)
    if not isinstance(obj, dict):
        return AgentObs(agent=folder_id or "?", source="s", path="/p", error="not a JSON object")
    aid = obj.get("agent", obj.get("name"))
    if not isinstance(aid, str) or not aid.strip():
        aid = folder_id
    if not aid:
        return AgentObs(agent="?", source="s", path="/p", error="no agent id")
    aid = aid.strip()[:200]
    contract = parse_contract(obj.get("dod_contract"))
    la = parse_time(obj.get("last_activity"))
    if la is None or la > mtime:  # no file records activity after its mtime
        la = mtime
    state = obj.get("state")
    error = None
    if "state" in obj and not isinstance(state, str):
        error = f"state has the wrong type ({type(state).__name__})"
    elif contract.error:
        error = contract.error
    return AgentObs(
        agent=aid, source="s", path="/p", error=error, state=_s(state),
        phase=normalise_phase(_s(obj.get("phase"))), contract_sha256=contract.digest,
        contract_len=contract.length, checks=list(contract.checks) if contract.checks else None,
        cwd=obj.get("cwd") if isinstance(obj.get("cwd"), str) else None,
        dod_status=_s(obj.get("dod_status")), dod_verifier=_s(obj.get("dod_verifier")),
        last_activity=la, ended=obj.get("ended") is True, target=_s(obj.get("target")),
        tool_open=isinstance(obj.get("tools_open"), list) and bool(obj.get("tools_open")),
        task=(_s(obj.get("task")) or None) and obj["task"][:200],
        waiting_for=waiting_clean(obj.get("waiting_for"), normalise_phase(_s(obj.get("phase")))))


KEYS = ["agent", "name", "state", "phase", "task", "dod_contract", "dod_status", "dod_verifier", "cwd",
        "last_activity", "ended", "target", "tools_open", "waiting_for", "dod", "extra"]
VALUES = [None, True, False, 0, -1, 1.5, 1e400, "", " ", "busy", "waiting", "idle", "working", "testing",
          "a1", " a2 ", "x" * 300, "2026-11-29T19:20:00Z", "2026-11-29T19:20:00+02:00", "nope",
          1_764_443_000, [], ["Bash"], [{"id": "t", "kind": "cmd", "cmd": ["true"]}],
          [{"id": "t", "kind": "cmd", "cmd": []}], {}, {"a": [1, {"b": None}]}, "\u001b[2Jevil\n",
          {"kind": "permission", "tool": "Bash"}, {"kind": "question", "tool": "x"}, {"kind": "nope"},
          {"kind": "permission", "tool": ["x"]}]


def documents(n: int, seed: int = 23) -> list[bytes]:
    rnd = random.Random(seed)
    docs = [p.read_bytes() for p in sorted(FIXTURES.glob("goals/**/*.json"))]
    for _ in range(n):
        obj = {k: rnd.choice(VALUES) for k in rnd.sample(KEYS, rnd.randrange(len(KEYS) + 1))}
        raw = json.dumps(obj).encode()
        k = rnd.random()
        if k < 0.05 and obj:  # a duplicated key: the last one counts, both ways
            key = next(iter(obj))
            raw = raw[:-1] + (", " if len(obj) else "").encode() + json.dumps({key: rnd.choice(VALUES)})[1:].encode()
        elif k < 0.08:
            raw = b"\xef\xbb\xbf" + raw
        elif k < 0.11:
            raw = raw[: rnd.randrange(len(raw))]
        elif k < 0.13:
            raw = json.dumps(rnd.choice(VALUES)).encode()
        docs.append(raw)
    docs += [b"", b"   ", b"[]", b"null", b"[" * 5000 + b"]" * 5000, b'{"dod_contract": ' + b"[" * 3000 + b"]" * 3000 + b"}",
             b'{"agent": "a", "state": "busy", "agent": "b"}', b'{"state": null}', b'{"agent": null, "name": "n"}']
    return docs


def test_the_fast_path_gives_what_the_dict_reading_gives():
    docs = documents(6000)
    assert len(docs) > 6000
    for raw in docs:
        got = parse_goal(raw, source="s", path="/p", folder_id="f", mtime=1.0)
        assert msgspec.structs.asdict(got) == msgspec.structs.asdict(reference(raw, "f", 1.0)), raw[:200]


def test_no_folder_id_and_no_agent_id_is_an_error_both_ways():
    for raw in (b'{"state": "busy"}', b'{"agent": "  "}', b'{"name": 5}'):
        got = parse_goal(raw, source="s", path="/p", folder_id="", mtime=1.0)
        assert got.error == "no agent id" and got == reference(raw, "", 1.0)
