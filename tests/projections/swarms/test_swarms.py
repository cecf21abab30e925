"""Swarm projection: child transitions, per-group counts, settled, caps (pure, virtual clock)."""
from __future__ import annotations

import json
import os

import msgspec
import pytest

from events.log import Recorded, iso
from events.types import encode_data, tag_of
from projections.swarms import fold as swarms
from projections.base import encode_state
from projections.observations import RowObs, Snapshot, SourceResult
from watcher.config import Source
from tests.support.exe import TESTS

FIXTURE = os.path.join(str(TESTS), "fixtures", "swarm-groups.json")
T0 = 1_800_000_000.0


def rec(seq, ev):
    return Recorded(seq, f"id{seq}", iso(T0 + seq), tag_of(ev), ev.subject, seq, ev, encode_data(ev), b"")


def rows_result(items, name="swarm", ok=True):
    rows = [RowObs(entity="swarm", source=name, key=(i["group"], i["child"]), row=i) for i in items]
    return SourceResult(name=name, kind="command", ok=ok, rows=rows if ok else [])


def tick(st, results, failed=None):
    rows = {}
    for r in results:
        for row in r.rows:
            rows.setdefault(row.entity, []).append(row)
    evs = swarms.detect(st, Snapshot(results=results, rows=rows, failed=failed or {}), T0,
                        max_concurrent=2, max_children=3)
    base = 1000 + sum(len(g["children"]) for g in st["groups"].values())
    for i, e in enumerate(evs):
        st = swarms.fold(st, rec(base + i, e))
    assert encode_state(msgspec.json.decode(encode_state(st))) == encode_state(st)
    return st, evs


def fixture_items():
    return json.load(open(FIXTURE))


def test_fixture_counts_and_caps():
    st, evs = tick(swarms.initial(), [rows_result(fixture_items())])
    assert len(evs) == 5 and all(e.from_ is None for e in evs)
    s = swarms.status(st, T0, max_concurrent=0, max_children=3)
    g = s["groups"]["swarm:main:run-31"]
    assert g["counts"] == {"queued": 0, "running": 1, "done": 1, "failed": 1, "killed": 0, "timeout": 1}
    assert (g["active"], g["settled"], g["flags"]) == (1, False, [])   # 4 children, 1 active: under 3
    assert s["groups"]["swarm:ops:run-9"]["flags"] == []
    assert swarms.status(st, T0)["groups"]["swarm:main:run-31"]["flags"] == []   # the design's 8 / 50 / 200
    st, evs = tick(st, [rows_result(fixture_items())])
    assert evs == []                                                           # a level is no event


def test_transitions_settle_and_disappear():
    items = fixture_items()
    st, _ = tick(swarms.initial(), [rows_result(items)])
    for i in items:
        if i["status"] in ("running", "queued"):
            i["status"] = "done" if i["child"] == "c2" else "killed"
    st, evs = tick(st, [rows_result(items)])
    assert sorted((e.group, e.child, e.from_, e.to) for e in evs) == [
        ("swarm:main:run-31", "c2", "running", "done"), ("swarm:ops:run-9", "c1", "queued", "killed")]
    s = swarms.status(st, T0)["groups"]
    assert s["swarm:main:run-31"]["settled"] and s["swarm:ops:run-9"]["settled"]
    st, evs = tick(st, [rows_result(items[:4])])                              # ops:run-9 vanished
    assert [(e.group, e.to) for e in evs] == [("swarm:ops:run-9", None)]
    assert "swarm:ops:run-9" not in swarms.status(st, T0)["groups"]


def test_failed_source_keeps_children():
    st, _ = tick(swarms.initial(), [rows_result(fixture_items())])
    st, evs = tick(st, [rows_result([], ok=False)], failed={"swarm": "timed out"})
    assert evs == [] and len(st["groups"]) == 2


def test_concurrency_cap_flag_and_summary():
    items = [{"group": "g", "child": f"c{i}", "status": "running", "label": ""} for i in range(3)]
    st, _ = tick(swarms.initial(), [rows_result(items)])
    s = swarms.status(st, T0, max_concurrent=2)
    assert s["groups"]["g"]["flags"] == ["max-concurrent"] and s["running"] == 3
    its = swarms.items(st, T0, max_concurrent=2)
    assert its[0] == ("violations", "swarm g: 3 running > max_concurrent 2")
    assert its[1] == ("swarms", "g: active, 3 running")


# (raw status, normalised)
NORM = [
    ("running", "running"),        # canonical
    ("RUNNING", "running"),        # case
    ("completed", "done"),         # alias
    ("timed_out", "timeout"),      # alias
    ("", "unknown"),               # empty
    ("weird", "weird"),            # kept as its own count
]


@pytest.mark.parametrize("raw,norm", NORM)
def test_norm_status(raw, norm):
    assert swarms.norm_status(raw) == norm


def test_command_source_end_to_end():
    """The lead's command source with entity = "swarm" feeds the projection (real subprocess)."""
    from watcher.sources.proc import CommandSource

    src = CommandSource(Source(name="swarm", kind="command", entity="swarm", argv=["cat", FIXTURE]))
    res = src.poll(T0)
    assert res.ok, res.error
    st, evs = tick(swarms.initial(), [res])
    assert {e.group for e in evs} == {"swarm:main:run-31", "swarm:ops:run-9"}


def test_sqlite_source_swarm_rows(tmp_path):
    import sqlite3

    from watcher.sources.sqlite import SqliteSource

    p = tmp_path / "swarm.db"
    con = sqlite3.connect(p)
    con.execute('CREATE TABLE kids ("group" TEXT, child TEXT, status TEXT, label TEXT)')
    con.executemany("INSERT INTO kids VALUES (?,?,?,?)",
                    [(i["group"], i["child"], i["status"], i["label"]) for i in fixture_items()])
    con.commit()
    con.close()
    src = SqliteSource(Source(name="sw", kind="sqlite", entity="swarm", path=str(p),
                              query='SELECT "group", child, status, label FROM kids', key=["group", "child"]))
    res = src.poll(T0)
    assert res.ok, res.error
    st, evs = tick(swarms.initial(), [res])
    assert len(evs) == 5 and os.path.exists(p)
