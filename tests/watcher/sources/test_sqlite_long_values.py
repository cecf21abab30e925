"""A long text in a missions database went whole into the log. Found attacking the sqlite source
from the CLI: five work packages whose last_error_sig held a 20 MB traceback made a 210 MB event
log on the first tick (twice the database) and 516 MB of resident memory, and every change of a
signature was another 20 MB event. A text value over 1,024 characters is now kept as its
beginning, its length and a digest of the whole, so a change anywhere in it is still a change.
A real database (sqlite3), a real ``fleetwatch run --once`` and ``tail --json``."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from tests.support.fwonce import once_and_tail, sqlite_config

BIG = 2 * 1024 * 1024


def _db(path: Path, sigs: list[str]) -> None:
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE IF NOT EXISTS wps (mission TEXT, wp TEXT, state TEXT, sig TEXT, n INT, "
              "PRIMARY KEY (mission, wp))")
    c.executemany("INSERT OR REPLACE INTO wps VALUES ('m1', ?, 'FAILED', ?, 3)",
                  [(f"w{i}", s) for i, s in enumerate(sigs)])
    c.commit()
    c.close()


def test_a_long_text_in_a_row_does_not_go_whole_into_the_log(tmp_path):
    db = tmp_path / "missions.db"
    _db(db, ["E" * BIG + "a", "E" * BIG + "b", "short"])
    cfg = sqlite_config(tmp_path, db, "SELECT mission, wp, state, sig AS last_error_sig, n AS same_sig_count FROM wps")
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    sig = {e["data"]["wp"]: e["data"]["last_error_sig"] for e in evs if e["type"] == "wp.changed"}
    assert sig["w2"] == "short"
    assert len(sig["w0"]) <= 1024 and f"[{BIG + 1} chars " in sig["w0"] and sig["w0"] != sig["w1"]
    assert os.path.getsize(tmp_path / "e.db") < BIG    # not 2 x 2 MiB (and their snapshot)
    _db(db, ["E" * BIG + "c"])                          # a change at the very end is a change
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert [e["data"]["wp"] for e in evs if e["type"] == "wp.changed"][3:] == ["w0"]


def test_a_long_deps_list_is_read_whole(tmp_path):
    """8051415 cut every text over 1,024 characters, a deps column too: a WP with 120 deps (1.7 KB
    of JSON) was read as garbage dep ids ('["d000"', ...) and, RUNNING with all of them DONE,
    broke deps-not-done. A deps column is kept whole up to 256 Ki characters."""
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE wps (mission TEXT, wp TEXT, state TEXT, deps TEXT)")
    ids = [f"dep-number-{i:03d}" for i in range(120)]
    c.executemany("INSERT INTO wps VALUES ('m1', ?, 'DONE', '[]')", [(i,) for i in ids])
    c.execute("INSERT INTO wps VALUES ('m1', 'w', 'RUNNING', ?)", (json.dumps(ids),))
    c.commit()
    c.close()
    r, evs = once_and_tail(sqlite_config(tmp_path, db, "SELECT mission, wp, state, deps FROM wps"))
    assert r.returncode == 0, r.stderr
    assert [e["data"]["deps"] for e in evs if e["type"] == "wp.changed" and e["data"]["wp"] == "w"] == [ids]
    assert [e for e in evs if e["type"] == "wp.violated"] == []
