"""fleet's and notify's per-agent records are Structs (projections/fleet/records.py, issue 19: a
first tick's memory and page faults) that encode to the very bytes of the dicts they replaced,
decode from the snapshots those dicts wrote, and read, write and compare as those dicts. Real
SQLite logs (tests/support/seededlogs.py's seeded churn)."""
from __future__ import annotations

import msgspec
import pytest

from projections.fleet import fold as fleet
from projections.notify import fold as notify
from projections.base import decode_state, encode_state
from projections.fleet.records import Agent, NotifyAgent, Record
from watcher.runtime.state import Projections

from tests.support import seededlogs as rb


def as_dicts(state: dict) -> dict:
    """The same state with every record a plain dict (what the folds built before)."""
    return {**state, "agents": {a: dict(r.items()) for a, r in state["agents"].items()}}


@pytest.fixture
def states(tmp_path):
    elog = rb.churn(str(tmp_path / "e.db"), appends=160)
    p = Projections()
    p.catch_up(elog)
    elog.close()
    return p.states


@pytest.mark.parametrize("mod,rec", [(fleet, Agent), (notify, NotifyAgent)], ids=["fleet", "notify"])
def test_records_encode_as_the_dicts_did_and_decode_back(states, mod, rec):
    st = states[mod.NAME]
    assert len(st["agents"]) > 3 and all(type(r) is rec for r in st["agents"].values())
    old = as_dicts(st)
    assert encode_state(st) == encode_state(old)                  # a snapshot's bytes are unchanged
    back = decode_state(mod, encode_state(old))                    # a snapshot the dicts wrote
    assert all(type(r) is rec for r in back["agents"].values())
    assert back == st and back == old and encode_state(back) == encode_state(st)
    assert msgspec.json.decode(encode_state(st)) == st             # plain JSON: equal to the dicts


def test_a_snapshot_record_missing_a_key_decodes_with_it_none():
    doc = b'{"agents": {"a1": {"class": "RECLAMA", "since": "2026-12-03T10:00:00.000Z"}}, "sources": {}}'
    st = decode_state(fleet, doc)
    a = st["agents"]["a1"]
    assert type(a) is Agent and a["class"] == "RECLAMA" and a["target"] is None and a.get("task", "x") is None


def test_a_record_reads_writes_and_compares_as_its_dict():
    a = NotifyAgent("RECLAMA", 1.0, 7, "waiting", "agent:a|RECLAMA#7")
    d = {"cls": "RECLAMA", "since": 1.0, "seq": 7, "state": "waiting", "cond": "agent:a|RECLAMA#7", "nudges": 0,
         "nudged_at": None}
    assert a == d and d == a and not a != d and dict(a) == d and {**a} == d and len(a) == 7
    assert list(a) == list(d) and list(a.keys()) == list(d) and a.items() == list(d.items()) and a.values() == list(d.values())
    assert "cond" in a and "bogus" not in a and a.get("bogus", 3) == 3 and a.get("nudged_at", 3) is None
    a["nudges"] += 1
    assert a.nudges == 1 and a != d and a == {**d, "nudges": 1}
    with pytest.raises(KeyError):
        a["bogus"]
    with pytest.raises(KeyError):
        a["bogus"] = 1
    f = Agent("TRABAJANDO", "t")
    assert f["class"] == f.cls == "TRABAJANDO" and "class" in f and "cls" not in f
    assert f == Agent("TRABAJANDO", "t") and f != Agent("RECLAMA", "t") and f != NotifyAgent("TRABAJANDO", "t")
    assert issubclass(Agent, Record) and issubclass(NotifyAgent, Record)


def test_a_state_built_by_hand_as_dicts_still_folds(states):
    """A reader's own decode (or a test) holds dict records: the folds read and replace them."""
    from events.records import Recorded
    from events.timefmt import iso
    from events.types import AgentClassified, AgentUpdated

    st = as_dicts(states["fleet"])
    aid = next(iter(st["agents"]))
    upd = AgentUpdated(agent=aid, state="idle", phase="hecho", task="t2", changed=["state"])
    st = fleet.fold(st, Recorded(10**6, "u", iso(1.9e9), "agent.updated", f"agent:{aid}", 99, upd, b"", b""))
    assert type(st["agents"][aid]) is Agent and st["agents"][aid]["state"] == "idle"
    n = as_dicts(states["notify"])
    ev = AgentClassified(agent="zz", to="RECLAMA", state="waiting")
    n = notify.fold(n, Recorded(10**6 + 1, "c", iso(1.9e9), "agent.classified", "agent:zz", 1, ev, b"", b""))
    assert n["agents"]["zz"]["cls"] == "RECLAMA" and n["agents"]["zz"]["cond"] in n["conds"]
