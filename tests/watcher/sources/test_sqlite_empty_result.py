"""A missions query that gives no row was a failed source. Found attacking the sqlite source from
the CLI: once a query completes without a row its apsw cursor has no description, so the source
saw no columns and answered "schema changed: the query gives no column mission, wp, state (has
none)": an orchestrator's empty work_packages table was ``source.failed``, and when every WP of a
mission was deleted they were never gone (a failed source's rows keep their state), while
``status`` showed the source failed. The columns now come from the statement as it is prepared
(an exec trace). A real database (sqlite3), a real ``fleetwatch run --once`` and ``tail --json``."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.fwonce import once_and_tail, sqlite_config


def _config(tmp_path: Path, db: Path) -> Path:
    return sqlite_config(tmp_path, db, "SELECT mission_id AS mission, id AS wp, state FROM work_packages")


def test_an_empty_table_is_a_source_with_no_rows_and_deleted_wps_are_gone(tmp_path):
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE work_packages (id TEXT PRIMARY KEY, mission_id TEXT, state TEXT)")
    c.executemany("INSERT INTO work_packages VALUES (?, 'm1', ?)", [("w1", "DONE"), ("w2", "RUNNING")])
    c.commit()
    cfg = _config(tmp_path, db)
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert sorted(e["data"]["wp"] for e in evs if e["type"] == "wp.changed") == ["w1", "w2"]
    c.execute("DELETE FROM work_packages")
    c.commit()
    c.close()
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert [e for e in evs if e["type"] == "source.failed"] == []
    gone = [(e["data"]["wp"], e["data"]["from"], e["data"]["to"]) for e in evs if e["type"] == "wp.changed"][2:]
    assert sorted(gone) == [("w1", "DONE", None), ("w2", "RUNNING", None)]


def test_an_empty_table_from_the_start_is_not_a_failed_source(tmp_path):
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE work_packages (id TEXT PRIMARY KEY, mission_id TEXT, state TEXT)")
    c.commit()
    c.close()
    r, evs = once_and_tail(_config(tmp_path, db))
    assert r.returncode == 0, r.stderr
    assert [e["type"] for e in evs] == ["watcher.started", "watcher.stopped"]
