"""One row of a missions database stopped the missions detector for every mission. Found
attacking the sqlite source from the CLI: a ``deps`` text nested 100,000 deep made
``json.loads`` raise RecursionError (only ValueError was caught), and an ``attempts`` REAL of
``9e999`` (SQLite stores it as Inf) made ``int()`` raise OverflowError: "detector missions failed
on this tick's snapshot; skipped" at every tick, no wp.changed, wp.violated or mission.completed
for any mission. Now such deps are read as text and such a counter is 0. A real database
(sqlite3), a real ``fleetwatch run --once`` and ``tail --json``."""
from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from tests.support.fwonce import once_and_tail, sqlite_config
SCHEMA = ("CREATE TABLE work_packages (id TEXT PRIMARY KEY, mission_id TEXT NOT NULL, state TEXT NOT NULL, "
          "deps TEXT, attempts INTEGER NOT NULL DEFAULT 0, last_error_sig TEXT, "
          "same_sig_count INTEGER NOT NULL DEFAULT 0)")


def _watch(tmp_path: Path, rows: list[tuple]) -> tuple[subprocess.CompletedProcess, list[dict]]:
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute(SCHEMA)
    c.executemany("INSERT INTO work_packages (id, mission_id, state, deps, attempts, same_sig_count) "
                  "VALUES (?, ?, ?, ?, ?, ?)", rows)
    c.commit()
    c.close()
    return once_and_tail(sqlite_config(tmp_path, db, "SELECT mission_id AS mission, id AS wp, state, deps, attempts, "
                                       "last_error_sig, same_sig_count FROM work_packages"))


GOOD = [("g1", "good", "DONE", "[]", 1, 0), ("g2", "good", "RUNNING", '["g3"]', 1, 0),
        ("g3", "good", "READY", "[]", 0, 0)]


def _wps(evs: list[dict]) -> dict[str, dict]:
    return {e["data"]["wp"]: e["data"] for e in evs if e["type"] == "wp.changed"}


def test_a_deps_text_nested_deeper_than_the_parser_goes_does_not_stop_the_missions_detector(tmp_path):
    r, evs = _watch(tmp_path, GOOD + [("deep", "bad", "READY", "[" * 100_000 + "]" * 100_000, 0, 0)])
    assert r.returncode == 0, r.stderr
    assert "detector missions failed" not in r.stderr
    wps = _wps(evs)
    assert {"g1", "g2", "g3", "deep"} <= set(wps)
    assert [e["data"]["rule"] for e in evs if e["type"] == "wp.violated"] == ["deps-not-done"]   # g2 on g3


def test_an_infinite_attempts_count_does_not_stop_the_missions_detector(tmp_path):
    r, evs = _watch(tmp_path, GOOD + [("inf", "bad", "READY", "[]", float("inf"), float("-inf"))])
    assert r.returncode == 0, r.stderr
    assert "detector missions failed" not in r.stderr
    wps = _wps(evs)
    assert {"g1", "g2", "g3", "inf"} <= set(wps)
    assert wps["inf"]["attempts"] == 0 and wps["inf"]["same_sig_count"] == 0
