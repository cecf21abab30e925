"""A verdict is never overwritten by a non-answer (issue 45 item 4).

Found: on a free-text contract, after `verdict a7 met`, `check a7` recorded `unevaluable` over it
(rc 1) and sent an urgent push, though its `--dry-run` said there was nothing it could run."""
from __future__ import annotations

import json

from events.records import Recorded
from events.types import DodVerdict
from projections.dod import fold as dod
from tests.support.fwcli import fw
from tests.support.fleet import config, events, goal


def test_check_with_nothing_to_run_records_nothing_and_says_so(tmp_path):
    goal(tmp_path / "goals", "a7", state="idle", phase="hecho", dod_contract="the login works on staging")
    cfg = config(tmp_path)
    assert fw("run", "--once", "--create", "--config", str(cfg)).returncode == 0
    r = fw("verdict", "a7", "met", "--verifier", "ana", "--evidence", "logged in on staging", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    r = fw("check", "a7", "--config", str(cfg))
    assert r.returncode == 4 and "nothing fleetwatch can run" in r.stderr and "nothing recorded" in r.stderr
    assert [e["data"]["verdict"] for e in events(cfg, "dod.verdict")] == ["met"]
    st = json.loads(fw("status", "--json", "--config", str(cfg)).stdout)
    assert st["agents"][0]["dod_status"] == "met"


def test_check_of_contract_without_a_cmd_check_records_nothing(tmp_path):
    contract = [{"id": "ux", "kind": "manual", "what": "a person tries the login"}]
    goal(tmp_path / "goals", "a7", state="idle", phase="hecho", dod_contract=contract)
    cfg = config(tmp_path)
    assert fw("run", "--once", "--create", "--config", str(cfg)).returncode == 0
    r = fw("check", "a7", "--config", str(cfg))
    assert r.returncode == 4 and "no check of the contract is a cmd" in r.stderr, (r.returncode, r.stderr)
    assert events(cfg, "dod.verdict") == []


def _rec(seq: int, ev) -> Recorded:
    return Recorded(seq=seq, id=f"e{seq}", time=f"2027-01-01T00:00:{seq:02d}Z", type=ev.__struct_config__.tag,
                    subject=ev.subject, version=1, event=ev, data=b"", hash=b"")


def _fold(*evs) -> dict:
    st = dod.initial()
    for i, ev in enumerate(evs, 1):
        dod.fold(st, _rec(i, ev))
    return st["agents"]["a7"]


def test_unevaluable_never_replaces_a_persons_or_a_verifiers_verdict():
    for first in ("met", "failed"):
        a = _fold(DodVerdict(agent="a7", verdict=first, verifier="ana", source="cli"),
                  DodVerdict(agent="a7", verdict="unevaluable", verifier="fleetwatch-checks", source="checks"))
        assert a["verdict"]["verdict"] == first and dod.agent_status(a) == first
        assert a["unevaluable"]["verifier"] == "fleetwatch-checks"      # kept apart, not lost
    a = _fold(DodVerdict(agent="a7", verdict="met", verifier="ana", source="cli"),
              DodVerdict(agent="a7", verdict="failed", verifier="bob", source="cli"))
    assert a["verdict"]["verdict"] == "failed"                             # an answer replaces an answer


def test_the_checkers_own_verdict_is_replaced_by_its_later_unevaluable():
    a = _fold(DodVerdict(agent="a7", verdict="met", verifier="fleetwatch-checks", source="checks"),
              DodVerdict(agent="a7", verdict="unevaluable", verifier="fleetwatch-checks", source="checks"))
    assert a["verdict"]["verdict"] == "unevaluable" and not dod.judged(a)
