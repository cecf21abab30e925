"""A key twice in a missions query's rows flipped its WP (or circuit) at every tick. Found
attacking the sqlite source from the CLI: two rows for (m, w), READY and RUNNING, gave
"new -> READY" and "new -> RUNNING" in one tick, then RUNNING -> READY, READY -> RUNNING ... one
wp.changed per tick for ever (and a circuit with rows OPEN and CLOSED the same). The swarm
projection already let the first row of a key win; work packages and circuits now do too. A real
database (sqlite3), real ``fleetwatch run --once`` processes and ``tail --json``."""
from __future__ import annotations

import sqlite3

from tests.support.fwonce import once_and_tail, sqlite_config


def test_a_key_twice_in_the_rows_is_read_once_and_does_not_flap(tmp_path):
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE wps (mission TEXT, wp TEXT, state TEXT)")
    c.executemany("INSERT INTO wps VALUES (?, ?, ?)", [("m", "w", "READY"), ("m", "w", "RUNNING"), ("m", "x", "DONE")])
    c.execute("CREATE TABLE circuits (scope TEXT, state TEXT)")
    c.executemany("INSERT INTO circuits VALUES (?, ?)", [("m", "OPEN"), ("m", "CLOSED")])
    c.commit()
    c.close()
    cfg = sqlite_config(tmp_path, db, "SELECT mission, wp, state FROM wps")
    cfg.write_text(cfg.read_text() + f'[[sources]]\nname = "circuits"\nkind = "sqlite"\nentity = "circuit"\n'
                   f'path = "{db}"\nkey = ["scope"]\nquery = "SELECT scope, state FROM circuits"\n')
    for _ in range(3):
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    assert [(e["data"]["wp"], e["data"]["from"], e["data"]["to"]) for e in evs if e["type"] == "wp.changed"] == [
        ("w", None, "READY"), ("x", None, "DONE")]
    assert [(e["data"]["from"], e["data"]["to"]) for e in evs if e["type"] == "circuit.changed"] == [(None, "OPEN")]
