"""Regression (found by a hostile pass): a log whose tail was cut while no writer ran (or an older
copy put back) was caught by `verify` and `doctor` through its head file, until the first writer
started: `fleetwatch run` committed and overwrote the head file, and `verify` said intact — the
evidence was gone without a word. Now the first write of each writer keeps a head file the log
does not hold as ``<log>.head.lost-<time>``, says so, and `doctor` lists it. Real logs, real
`fleetwatch` processes."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from events import anchor
from events.log import EventLog
from events.types import SourceFailed
from tests.support.exe import FLEETWATCH



def fw(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([FLEETWATCH, *args], capture_output=True, text=True, timeout=60)


def _events(n: int, k: int = 0) -> list:
    return [SourceFailed(source=f"s{k + i}", error="e") for i in range(n)]


def _config(tmp: Path, db: Path) -> Path:
    agent = tmp / "fleet" / "a1"
    agent.mkdir(parents=True)
    (agent / "goal.json").write_text('{"agent": "a1", "state": "busy", "phase": "haciendo", "dod_contract": "pytest", '
                                     f'"last_activity": {time.time()}}}')
    cfg = tmp / "c.toml"
    cfg.write_text(f'[store]\npath = "{db}"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp}/fleet/*/goal.json"\n')
    return cfg


def _cut(db: Path) -> str:
    """A log of 10 events whose file is then put back to its 7-event copy: returns the head file's line."""
    with EventLog(str(db)) as e:
        e.append(_events(7), time.time())
    shutil.copy(db, f"{db}.copy")
    with EventLog(str(db)) as e:
        e.append(_events(3, 7), time.time())
    line = Path(anchor.path_of(str(db))).read_text()
    assert line.startswith("0" * 18 + "10:")
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.replace(f"{db}.copy", db)
    return line


def test_the_first_writer_after_a_cut_tail_keeps_the_head_file_that_proves_it(tmp_path):
    db = tmp_path / "events.db"
    cfg = _config(tmp_path, db)
    line = _cut(db)
    before = fw("verify", "--db", str(db))
    assert before.returncode == 1 and "truncated tail" in before.stdout + before.stderr
    run = fw("run", "--once", "--config", str(cfg))
    assert run.returncode == 0, run.stderr
    [kept] = anchor.lost(str(db))
    assert Path(kept).read_text() == line                                 # the evidence, unchanged
    assert "does not hold the head its head file named" in run.stderr and kept in run.stderr
    assert "its head file says 10 (truncated tail)" in run.stderr      # seq 8: watcher.started, its first commit
    assert fw("verify", "--db", str(db)).returncode == 0                  # the log as it is now: intact
    doc = fw("doctor", "--config", str(cfg))
    assert "once lost events" in doc.stdout and kept in doc.stdout, doc.stdout
    again = fw("run", "--once", "--config", str(cfg))                     # kept once, not once a start
    assert again.returncode == 0 and anchor.lost(str(db)) == [kept] and "head file" not in again.stderr


def test_a_cli_writer_keeps_it_too(tmp_path):
    db = tmp_path / "events.db"
    _cut(db)
    r = fw("verdict", "a1", "met", "--verifier", "v1", "--evidence", "pytest: 3 passed", "--force", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert len(anchor.lost(str(db))) == 1 and "truncated tail" in r.stderr


def test_writers_that_interleave_or_restart_keep_nothing(tmp_path):
    db = str(tmp_path / "events.db")
    a, b = EventLog(db), EventLog(db)
    try:
        for k in range(6):  # each one's first write comes after the other's commits and writes
            (a if k % 2 else b).append(_events(2, 2 * k), time.time())
    finally:
        a.close()
        b.close()
    with EventLog(db) as c:
        c.append(_events(1, 99), time.time())
    assert anchor.lost(db) == [] and EventLog(db, readonly=True).verify().ok
