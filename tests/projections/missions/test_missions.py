"""Missions: the read-only sqlite source on a real database, and the pure projection."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys

import msgspec
import pytest

from events.log import Recorded, iso
from events.types import CircuitChanged, MissionCompleted, WpChanged, encode_data, tag_of
from projections.missions import fold as missions
from projections.base import encode_state
from projections.observations import RowObs, Snapshot, SourceResult
from watcher.config import Source
from watcher.sources.sqlite import SqliteSource
from tests.support.exe import TESTS

FIXTURE = os.path.join(str(TESTS), "fixtures", "missions.sql")
WP_QUERY = ("SELECT mission_id AS mission, id AS wp, state, deps, attempts, last_error_sig, same_sig_count "
            "FROM work_packages")
T0 = 1_800_000_000.0


@pytest.fixture
def mdb(tmp_path):
    p = tmp_path / "missions.db"
    con = sqlite3.connect(p)
    con.executescript(open(FIXTURE).read())
    con.close()
    return p


def wp_source(path, query=WP_QUERY, **kw) -> SqliteSource:
    return SqliteSource(Source(name="missions", kind="sqlite", entity="wp", path=str(path), query=query,
                               key=["mission", "wp"], **kw))


def circ_source(path) -> SqliteSource:
    return SqliteSource(Source(name="circuits", kind="sqlite", entity="circuit", path=str(path),
                               query="SELECT scope, state FROM circuits", key=["scope"]))


def digest(p) -> str:
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


# ---- the source ----------------------------------------------------------------------------
def test_source_reads_rows_and_never_changes_the_database(mdb):
    before = digest(mdb), sorted(os.listdir(mdb.parent))
    src = wp_source(mdb)
    for _ in range(3):
        res = src.poll(T0)
        assert res.ok, res.error
    assert {r.key for r in res.rows} == {("m1", "m1-wp1"), ("m1", "m1-wp2"), ("m1", "m1-wp3"),
                                         ("m1", "m1-wp4"), ("m2", "m2-wp1")}
    r2 = next(r for r in res.rows if r.key == ("m1", "m1-wp2"))
    assert r2.entity == "wp" and r2.row["deps"] == '["m1-wp1"]' and r2.row["attempts"] == 1
    assert circ_source(mdb).poll(T0).ok
    assert (digest(mdb), sorted(os.listdir(mdb.parent))) == before  # bytes unchanged, no journal left


def test_source_writing_query_is_refused(mdb):
    before = digest(mdb)
    res = wp_source(mdb, query="DELETE FROM work_packages").poll(T0)
    assert not res.ok and "readonly" in res.error.lower()
    assert digest(mdb) == before


# (what breaks, expected fragment of the reason)
FAILURES = [
    ("missing", "database missing"),              # the file is gone
    ("dropped-column", "schema changed"),          # a column the query names is gone
    ("renamed-column", "no column"),               # the query runs but a required column is absent
    ("not-a-db", "not a database"),                # garbage file
]


@pytest.mark.parametrize("what,fragment", FAILURES)
def test_source_failures_are_values(tmp_path, mdb, what, fragment):
    path, query = mdb, WP_QUERY
    if what == "missing":
        path = tmp_path / "nope.db"
    elif what == "dropped-column":
        con = sqlite3.connect(mdb)
        con.execute("ALTER TABLE work_packages DROP COLUMN same_sig_count")
        con.commit()
        con.close()
    elif what == "renamed-column":
        query = "SELECT mission_id AS mission, id AS workpackage, state FROM work_packages"
    elif what == "not-a-db":
        path = tmp_path / "junk.db"
        path.write_bytes(b"x" * 4096)
    res = wp_source(path, query=query).poll(T0)
    assert not res.ok and fragment in res.error, res.error


def test_source_locked_database_fails_fast(mdb):
    # another process holds an exclusive lock (POSIX locks do not conflict within one process)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('PRAGMA locking_mode=EXCLUSIVE'); c.execute('BEGIN EXCLUSIVE'); "
         "print('locked', flush=True); sys.stdin.readline()", str(mdb)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        res = wp_source(mdb).poll(T0)
        assert not res.ok and "locked" in res.error
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert wp_source(mdb).poll(T0).ok  # recovers once the lock is gone


def test_source_query_timeout(mdb):
    q = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) AS mission FROM c"
    res = wp_source(mdb, query=q, timeout="200ms").poll(T0)
    assert not res.ok and "timed out" in res.error


# ---- the projection ------------------------------------------------------------------------
def rec(seq, ev, t=T0):
    return Recorded(seq, f"id{seq}", iso(t), tag_of(ev), ev.subject, seq, ev, encode_data(ev), b"")


def apply(st, events, seq0=0):
    for i, ev in enumerate(events, seq0 + 1):
        st = missions.fold(st, rec(i, ev, T0 + i))
    assert encode_state(msgspec.json.decode(encode_state(st))) == encode_state(st)
    return st


def tick(st, results: list[SourceResult], failed=None):
    rows: dict[str, list[RowObs]] = {}
    for r in results:
        for row in r.rows:
            rows.setdefault(row.entity, []).append(row)
    snap = Snapshot(results=results, rows=rows, failed=failed or {})
    evs = missions.detect(st, snap, T0)
    return apply(st, evs, seq0=10_000), evs


def test_end_to_end_fixture(mdb):
    st = missions.initial()
    st, evs = tick(st, [wp_source(mdb).poll(T0), circ_source(mdb).poll(T0)])
    assert [tag_of(e) for e in evs].count("wp.changed") == 5
    assert [tag_of(e) for e in evs].count("circuit.changed") == 2
    wp2 = next(e for e in evs if tag_of(e) == "wp.changed" and e.wp == "m1-wp2")
    assert wp2.deps == ["m1-wp1"] and wp2.from_ is None and wp2.to == "RUNNING"
    s = missions.status(st, T0)["missions"]
    assert s["m1"]["runnable"] == []                       # m1-wp3 waits for m1-wp2 (RUNNING)
    assert s["m2"]["approval_required"] == ["m2-wp1"]
    assert s["m1"]["flagged"] == []                         # attempts 3, same sig 2: at the limit, not over
    assert s["m1"]["counts"] == {"DONE": 1, "FAILED": 1, "READY": 1, "RUNNING": 1}
    # level persists: nothing new
    st, evs = tick(st, [wp_source(mdb).poll(T0), circ_source(mdb).poll(T0)])
    assert evs == []
    # m1-wp2 finishes -> m1-wp3 runnable; wp4 retries again -> flagged; circuit m2 opens
    con = sqlite3.connect(mdb)
    con.execute("UPDATE work_packages SET state='DONE' WHERE id='m1-wp2'")
    con.execute("UPDATE work_packages SET attempts=4, same_sig_count=3 WHERE id='m1-wp4'")
    con.execute("UPDATE circuits SET state='OPEN' WHERE scope='m2'")
    con.commit()
    con.close()
    st, evs = tick(st, [wp_source(mdb).poll(T0), circ_source(mdb).poll(T0)])
    assert sorted((tag_of(e), getattr(e, "wp", getattr(e, "scope", None))) for e in evs) == [
        ("circuit.changed", "m2"), ("wp.changed", "m1-wp2"), ("wp.changed", "m1-wp4"),
        ("wp.flagged", "m1-wp4"), ("wp.flagged", "m1-wp4")]  # retries and same-error: once per crossing
    s = missions.status(st, T0)
    assert s["missions"]["m1"]["runnable"] == ["m1-wp3"]
    assert s["missions"]["m1"]["flagged"][0]["flags"] == ["retries", "same-error"]
    assert s["open_circuits"] == ["m2"] and s["missions"]["m2"]["circuit_open"]
    lines = missions.summary(st, T0)
    assert lines[0].startswith("m2/m2-wp1: APPROVAL_REQUIRED") and "circuit m2: OPEN" in lines
    # all of m1 done -> completed once
    con = sqlite3.connect(mdb)
    con.execute("UPDATE work_packages SET state='DONE' WHERE mission_id='m1'")
    con.commit()
    con.close()
    st, evs = tick(st, [wp_source(mdb).poll(T0), circ_source(mdb).poll(T0)])
    assert [e.mission for e in evs if tag_of(e) == "mission.completed"] == ["m1"]
    assert missions.status(st, T0)["missions"]["m1"]["completed"]
    st, evs = tick(st, [wp_source(mdb).poll(T0), circ_source(mdb).poll(T0)])
    assert evs == []


def test_failed_source_keeps_rows_and_missing_rows_are_gone(mdb):
    st, _ = tick(missions.initial(), [wp_source(mdb).poll(T0)])
    broken = SourceResult(name="missions", kind="sqlite", ok=False, error="database locked")
    st, evs = tick(st, [broken], failed={"missions": "database locked"})
    assert evs == [] and len(missions.status(st, T0)["missions"]["m1"]["by_state"]) == 4
    con = sqlite3.connect(mdb)
    con.execute("DELETE FROM work_packages WHERE mission_id='m2'")
    con.commit()
    con.close()
    st, evs = tick(st, [wp_source(mdb).poll(T0)])
    assert [(e.wp, e.to) for e in evs] == [("m2-wp1", None)]
    assert "m2" not in missions.status(st, T0)["missions"]


# (wps as (id, state, deps), circuit state or None, expected runnable)
RUNNABLE = [
    ([("w1", "READY", [])], None, ["w1"]),                                 # no circuit row = CLOSED
    ([("w1", "READY", [])], "OPEN", []),                                   # open circuit blocks
    ([("w1", "READY", ["w0"])], "CLOSED", []),                             # unknown dep is not DONE
    ([("w0", "DONE", []), ("w1", "READY", ["w0"])], "CLOSED", ["w1"]),     # dep done
    ([("w0", "FAILED", []), ("w1", "READY", ["w0"])], "CLOSED", []),       # dep failed
    ([("w1", "RUNNING", [])], "CLOSED", []),                               # not READY
]


@pytest.mark.parametrize("wps,circuit,expected", RUNNABLE)
def test_runnable_table(wps, circuit, expected):
    evs = [WpChanged(mission="m", wp=w, to=s, deps=d, source="x") for w, s, d in wps]
    if circuit:
        evs.append(CircuitChanged(scope="m", to=circuit, source="x"))
    st = apply(missions.initial(), evs)
    assert missions.status(st, T0)["missions"]["m"]["runnable"] == expected


# (raw deps column, parsed)
DEPS = [
    ('["a","b"]', ["a", "b"]),   # JSON array
    ("[]", []),                   # empty array
    (None, []),                   # NULL
    ("a, b", ["a", "b"]),         # comma list (not JSON)
    (["x"], ["x"]),               # already a list (command source)
]


@pytest.mark.parametrize("raw,parsed", DEPS)
def test_parse_deps(raw, parsed):
    assert missions.parse_deps(raw) == parsed


def test_reopened_mission_completes_again():
    st = apply(missions.initial(), [WpChanged(mission="m", wp="w", to="DONE"), MissionCompleted(mission="m", wps=1),
                                    WpChanged(mission="m", wp="w", from_="DONE", to="READY")])
    assert not missions.status(st, T0)["missions"]["m"]["completed"]
