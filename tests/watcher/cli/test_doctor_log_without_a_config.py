"""`fleetwatch doctor` with no config, or one that does not parse, still checks the log named by
--db or $FLEETWATCH_DB (its path does not depend on the config), and says which it is. Real
files, real subprocesses.

With no config at all it does not say "the config does not parse", and a broken or
newer-schema log passed with --db is reported.
"""
from __future__ import annotations

import apsw

from tests.support.fwcli import fw


def test_doctor_checks_the_named_log_when_there_is_no_config(tmp_path):
    db = tmp_path / "events.db"
    assert fw("silence", "a1", "--for", "1h", "--force", "--db", str(db)).returncode == 0
    c = apsw.Connection(str(db))
    c.execute("PRAGMA user_version=99")  # a log from a newer fleetwatch
    c.close()
    r = fw("doctor", "--config", str(tmp_path / "missing.toml"), "--db", str(db))
    assert r.returncode == 1, r.stdout
    assert "not checked (no config)" in r.stdout and "does not parse" not in r.stdout
    assert "✗ log: the log has schema version 99" in r.stdout


def test_doctor_checks_the_named_log_when_the_config_does_not_parse(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[store\n")
    db = tmp_path / "events.db"
    assert fw("silence", "a1", "--for", "1h", "--force", "--db", str(db)).returncode == 0
    r = fw("doctor", "--config", str(cfg), "--db", str(db))
    assert r.returncode == 1 and "sources, notify: not checked (the config does not parse)" in r.stdout
    assert "✓ log:" in r.stdout and "verify intact (1 events" in r.stdout, r.stdout
