"""`verify` checks every row, also those before seq 1. Real files (a log edited with SQLite, as an
attacker with the file would), real subprocesses.

Rows inserted at seq 0 and -5 with the guards dropped and put back (`verify --restore-guards`,
which promises to check every row) make `verify` fail, although its walk starts at seq 1 and
every reader skips such rows silently.
"""
from __future__ import annotations

import time

import apsw

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


def test_a_row_inserted_before_seq_1_breaks_verify(tmp_path):
    db = str(tmp_path / "events.db")
    with EventLog(db) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                    for i in range(5)], time.time())
    c = apsw.Connection(db)
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f'DROP TRIGGER "{name}"')
    row = list(c.execute("SELECT * FROM events WHERE seq = 1").fetchall()[0])
    for seq, version in ((0, 99), (-5, 98)):
        row[0], row[1], row[5] = seq, f"forged{seq}", version
        c.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", row)
    c.close()
    r = fw("verify", "--restore-guards", "--db", db)
    assert r.returncode == 1 and "seq -5: a row before seq 1" in r.stdout, (r.stdout, r.stderr)
    assert "last good 5:" in r.stdout
    r = fw("verify", "--db", db)
    assert r.returncode == 1 and "verify failed at seq -5" in r.stderr
