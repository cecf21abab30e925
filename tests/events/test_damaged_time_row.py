"""A row whose ``time`` column is damaged is reported by seq and skipped, never a traceback.

Found by a hostile CLI pass: damaged ``data`` was handled, but one row with ``time`` = 'garbage'
(or '2026-13-45T…', or a comma for the decimal point) made ``fleetwatch run`` die at start-up with
a ValueError traceback from a fold (notify/fanout/report parse ``rec.time``): the service would
restart into the same crash, the fleet unwatched. ``rebuild``, ``rebuild --check`` and ``report``
died the same way. Now such a row is damaged like undecodable ``data``: named on stderr, skipped.
"""
from __future__ import annotations

import json
import os
import subprocess

import apsw
import pytest
from tests.support.exe import FLEETWATCH



def fw(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([FLEETWATCH, *args], capture_output=True, text=True, timeout=120)


# each a damaged ``time`` of its own row: a word, an impossible date, a comma for the decimal point
BAD = ["garbage", "2026-13-45T99:00:00.000Z", "2026-12-02T01:04:43,131Z"]


@pytest.mark.slow
def test_damaged_time_rows_are_skipped_not_a_traceback(tmp_path):
    """One log with one row per damaged time (every command meets all three: one set of processes
    instead of one per value)."""
    agents = [f"a{i}" for i in range(1, len(BAD) + 1)]
    for a in agents:
        os.makedirs(tmp_path / "fleet" / a)
        (tmp_path / "fleet" / a / "goal.json").write_text(json.dumps({"state": "busy", "dod_contract": "x"}))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n')
    db = str(tmp_path / "e.db")
    assert fw("run", "--once", "--config", str(cfg), "--db", db).returncode == 0
    # events after the stored snapshots, so that a start-up folds them
    for a in agents:
        assert fw("verdict", a, "met", "--verifier", "me", "--evidence", "ok", "--db", db).returncode == 0
    con = apsw.Connection(db)
    seqs = [r[0] for r in con.execute("SELECT seq FROM events WHERE type = 'dod.verdict' ORDER BY seq")]
    assert len(seqs) == len(BAD)
    con.execute("DROP TRIGGER events_no_update")
    for seq, bad in zip(seqs, BAD):
        con.execute("UPDATE events SET time = ? WHERE seq = ?", (bad, seq))
    con.close()
    fw("verify", "--restore-guards", "--db", db)   # exits 1 (the rows are altered) after putting the guards back
    for args in (["run", "--once", "--config", str(cfg)], ["rebuild", "--check"], ["report"], ["status"],
                 ["summary"], ["tail", "-n", "5"], ["export"], ["rebuild"]):
        p = fw(*args, "--db", db)
        assert "Traceback" not in p.stderr, (args, p.stderr)
        if args[0] != "run":
            assert p.returncode in (0, 1), (args, p.stderr)
    p = fw("run", "--once", "--config", str(cfg), "--db", db)
    assert p.returncode == 0, p.stderr
    p = fw("rebuild", "--check", "--db", db)
    for seq in seqs:
        assert f"seq {seq}: damaged row (time is not ISO-8601" in p.stderr, (seq, p.stderr)
    lines = [json.loads(line) for line in fw("export", "--db", db).stdout.splitlines()]
    for seq, bad in zip(seqs, BAD):
        assert [x for x in lines if x["seq"] == seq][0]["raw"]["time"] == bad
    v = fw("verify", "--db", db)   # the chain hashes time as it is: the first altered row is the problem named
    assert v.returncode == 1 and f"seq {seqs[0]}" in v.stdout + v.stderr
