"""A --since beyond SQLite's 64-bit integers is one usage error, exit 2, not a traceback.

Found by a hostile CLI pass: `fleetwatch tail --since 99999999999999999999999` (also `export`,
`tail -f`, `report --since`) died with "OverflowError: int too big to convert" from the SQLite
binding, exit 1.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from tests.support.exe import FLEETWATCH

HUGE = str(1 << 63)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    base = tmp_path_factory.mktemp("since")
    os.makedirs(base / "fleet" / "a1")
    (base / "fleet" / "a1" / "goal.json").write_text(json.dumps({"state": "busy", "dod_contract": "x"}))
    cfg = base / "cfg.toml"
    cfg.write_text(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{base}/fleet/*/goal.json"\n')
    path = str(base / "e.db")
    p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", path],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return path


@pytest.mark.parametrize("args", [["tail", "--since", HUGE], ["tail", "-f", "--since", HUGE], ["export", "--since", HUGE],
                                  ["tail", "--since", "99999999999999999999999"],
                                  ["report", "--since", HUGE]])
def test_since_beyond_int64_is_a_usage_error_not_a_traceback(db, args):
    p = subprocess.run([FLEETWATCH, *args, "--db", db], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "--since" in p.stderr


def test_the_largest_seq_still_reads_and_a_huge_n_still_means_all(db):
    p = subprocess.run([FLEETWATCH, "tail", "--since", str((1 << 63) - 1), "--db", db],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout == "", p.stderr
    p = subprocess.run([FLEETWATCH, "tail", "-n", HUGE, "--db", db], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and len(p.stdout.splitlines()) >= 3, p.stderr
