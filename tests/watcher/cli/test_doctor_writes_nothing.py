"""`fleetwatch doctor` only looks: it opens the log read-only. Real files, real subprocesses.

A log of an older schema stays as it is (user_version unchanged), even with an older watcher
still running it: a writer would migrate it on the spot, and the upgrade is `run`'s to make,
after the service was stopped (README: Upgrade).
"""
from __future__ import annotations

import hashlib

import apsw

import events.schema as evschema
from tests.support.fwcli import fw


def test_doctor_leaves_an_older_log_as_it_is(tmp_path):
    db = tmp_path / "events.db"
    c = apsw.Connection(str(db))
    c.execute(evschema.MIGRATIONS[0])
    c.execute(f"PRAGMA application_id={evschema.APPLICATION_ID}; PRAGMA user_version=1")
    c.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    cfg = tmp_path / "config.toml"
    cfg.write_text("")
    r = fw("doctor", "--config", str(cfg), "--db", str(db))
    assert "✓ log:" in r.stdout and "writable, verify intact" in r.stdout, r.stdout
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    c = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    assert c.execute("PRAGMA user_version").fetchall()[0][0] == 1
    c.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "events.db"]
