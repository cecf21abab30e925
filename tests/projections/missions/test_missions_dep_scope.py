"""A dep was looked up among every mission's WPs: a DONE ``wp1`` of mission A satisfied mission
B's dep on B's own ``wp1``, still READY. WPs are keyed by (mission, wp) (docs/contract.md: ``key =
["mission", "wp"]``), so two missions may both have a ``wp1``. Found attacking the missions
source from the CLI with such a database: B's ``wp2`` went RUNNING with no ``deps-not-done``,
and a READY WP waiting on its own mission's unfinished ``wp1`` was listed as runnable. A dep now
names a WP of the same mission when there is one, else a WP of any mission (ids unique across
missions, as in fixtures/missions.sql). A real database, ``fleetwatch run --once``, ``tail --json``
and ``status --json``."""
from __future__ import annotations

import json
import sqlite3
import subprocess

from tests.support.fwonce import FW, once_and_tail, sqlite_config

ROWS = [("A", "wp1", "DONE", "[]"), ("A", "g", "DONE", "[]"),
        ("B", "wp1", "READY", "[]"), ("B", "wp2", "RUNNING", '["wp1"]'), ("B", "wp3", "READY", '["wp1"]'),
        ("B", "wp4", "READY", '["g"]'),           # an id only mission A has: a dep across missions
        ("C", "self", "RUNNING", '["self"]'), ("D", "x", "READY", '["y"]'), ("D", "y", "READY", '["x"]')]


def test_a_dep_names_the_wp_of_its_own_mission(tmp_path):
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE wps (mission TEXT, wp TEXT, state TEXT, deps TEXT, PRIMARY KEY (mission, wp))")
    c.executemany("INSERT INTO wps VALUES (?, ?, ?, ?)", ROWS)
    c.commit()
    c.close()
    cfg = sqlite_config(tmp_path, db, "SELECT mission, wp, state, deps FROM wps")
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    got = sorted((e["data"]["mission"], e["data"]["wp"], e["data"]["rule"]) for e in evs if e["type"] == "wp.violated")
    assert got == [("B", "wp2", "deps-not-done"), ("C", "self", "deps-not-done")]
    s = subprocess.run(FW + ["status", "--json", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert s.returncode == 0, s.stderr
    runnable = {m: d["runnable"] for m, d in json.loads(s.stdout)["missions"]["missions"].items()}
    assert runnable == {"A": [], "B": ["wp1", "wp4"], "C": [], "D": []}
