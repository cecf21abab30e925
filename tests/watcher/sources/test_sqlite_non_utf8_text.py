"""One text value that is not UTF-8 in a sqlite source's database must not blind the whole source.

Found by a hostile CLI pass: a work_packages row whose id was written as bytes that are not UTF-8
(CAST(x'77ff32' AS TEXT), as another program can) made every poll of the missions source fail
with "internal error: UnicodeDecodeError" and a traceback in the service log every tick: no WP of
any mission was seen. Now the query is read again with text as blobs, shown with U+FFFD.
"""
from __future__ import annotations

import json
import subprocess

import apsw
import pytest
from tests.support.exe import FLEETWATCH



@pytest.mark.parametrize("query", [
    "SELECT mission_id AS mission, id AS wp, state, deps FROM work_packages",
    "WITH w AS (SELECT * FROM work_packages) SELECT mission_id AS mission, id AS wp, state, deps FROM w;",
])
def test_non_utf8_text_in_a_sqlite_source_is_read_not_a_failed_source(tmp_path, query):
    mdb = str(tmp_path / "m.db")
    con = apsw.Connection(mdb)
    con.execute("CREATE TABLE work_packages (mission_id TEXT, id TEXT, state TEXT, deps TEXT)")
    con.execute("INSERT INTO work_packages VALUES ('m1', 'w1', 'READY', '')")
    con.execute("INSERT INTO work_packages VALUES ('m1', CAST(x'77ff32' AS TEXT), 'RUNNING', '')")
    con.close()
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[[sources]]\nname = "missions"\nkind = "sqlite"\nentity = "wp"\npath = "{mdb}"\n'
                   f'query = "{query}"\nkey = ["mission", "wp"]\n')
    db = str(tmp_path / "e.db")
    p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    out = subprocess.run([FLEETWATCH, "export", "--db", db], capture_output=True, text=True, timeout=60).stdout
    evs = [json.loads(line) for line in out.splitlines()]
    assert not [e for e in evs if e["type"] == "source.failed"]
    assert sorted((e["data"]["wp"], e["data"]["to"]) for e in evs if e["type"] == "wp.changed") == [
        ("w1", "READY"), ("w\ufffd2", "RUNNING")]
