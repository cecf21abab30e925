"""fleet's and notify's per-agent records are plain dicts, read one way (``rec["class"]``,
``rec.get("target")``). Snapshots keep their bytes: a record holds every key, encoded sorted, so
the snapshots of the logs written so far (every key present) decode and encode back to the same
bytes, and an older record lacking keys still decodes and folds. Real SQLite logs
(tests/support/seededlogs.py's seeded churn)."""
from __future__ import annotations

import pytest

from events.records import Recorded
from events.timefmt import iso
from events.types import AgentClassified, AgentUpdated
from projections.base import decode_state, encode_state
from projections.fleet import fold as fleet
from projections.notify import fold as notify
from watcher.runtime.state import Projections

from tests.support import seededlogs as rb

FLEET_KEYS = ["class", "contract_len", "contract_sha256", "last_activity", "phase", "reason", "since", "source",
              "state", "target", "task", "waiting_for"]
NOTIFY_KEYS = ["cls", "cond", "nudged_at", "nudges", "seq", "since", "state"]
# one fleet snapshot as the logs hold it (the bytes fleet's records encoded to before they were dicts)
FLEET_SNAPSHOT = (b'{"agents":{"a1":{"class":"RECLAMA","contract_len":40,"contract_sha256":"ab","last_activity":null,'
                  b'"phase":"haciendo","reason":"waiting","since":"2026-12-03T10:00:00.000Z","source":"fleet",'
                  b'"state":"waiting","target":"s:1","task":"t","waiting_for":{"kind":"question","tool":null}}},'
                  b'"sources":{}}')


@pytest.fixture
def states(tmp_path):
    elog = rb.churn(str(tmp_path / "e.db"), appends=160)
    p = Projections()
    p.catch_up(elog)
    elog.close()
    return p.states


@pytest.mark.parametrize("mod,keys", [(fleet, FLEET_KEYS), (notify, NOTIFY_KEYS)], ids=["fleet", "notify"])
def test_records_are_dicts_of_every_key_and_round_trip(states, mod, keys):
    st = states[mod.NAME]
    assert len(st["agents"]) > 3
    assert all(type(r) is dict and sorted(r) == keys for r in st["agents"].values())
    data = encode_state(st)
    back = decode_state(mod, data)
    assert back == st and encode_state(back) == data


def test_a_stored_snapshot_decodes_to_the_same_bytes():
    st = decode_state(fleet, FLEET_SNAPSHOT)
    assert st["agents"]["a1"]["class"] == "RECLAMA" and encode_state(st) == FLEET_SNAPSHOT


def test_an_older_record_lacking_keys_decodes_and_folds():
    doc = b'{"agents": {"a1": {"class": "RECLAMA", "since": "2026-12-03T10:00:00.000Z"}}, "sources": {}}'
    st = decode_state(fleet, doc)
    a = st["agents"]["a1"]
    assert a["class"] == "RECLAMA" and a.get("target") is None and a.get("task") is None
    upd = AgentUpdated(agent="a1", state="idle", phase="hecho", task="t2", changed=["state"])
    st = fleet.fold(st, Recorded(7, "u", iso(1.9e9), "agent.updated", "agent:a1", 2, upd, b"", b""))
    a = st["agents"]["a1"]
    assert sorted(a) == FLEET_KEYS and a["class"] == "RECLAMA" and a["state"] == "idle" and a["reason"] is None
    ev = AgentClassified(agent="zz", to="RECLAMA", state="waiting")
    n = notify.fold(notify.initial(), Recorded(8, "c", iso(1.9e9), "agent.classified", "agent:zz", 1, ev, b"", b""))
    assert n["agents"]["zz"]["cls"] == "RECLAMA" and n["agents"]["zz"]["cond"] in n["conds"]


def test_status_reads_notify_conditions_narrowly(states):
    """`status` decodes of each condition only what views.handling reads, as a dict."""
    from watcher.cli.status import CONDVIEW, notify_health_view

    view = notify_health_view()(encode_state(states["notify"]))
    conds = states["notify"]["conds"]
    assert conds and view["conds"].keys() == conds.keys()
    for cid, c in view["conds"].items():
        assert type(c) is dict and c == {k: conds[cid][k] for k in CONDVIEW.__annotations__ if k in conds[cid]}
