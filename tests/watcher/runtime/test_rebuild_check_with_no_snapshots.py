"""`rebuild --check` on a log with no stored snapshots says there was nothing to compare, rather
than "snapshots match". Real logs, real subprocesses.

A log whose snapshots table is empty (only CLI appends, never a watcher) never gets the words
of a real match.
"""
from __future__ import annotations

import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


def test_rebuild_check_without_snapshots_says_nothing_was_compared(tmp_path):
    db = str(tmp_path / "events.db")
    with EventLog(db) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                    for i in range(20)], time.time())
    r = fw("rebuild", "--check", "--db", db)
    assert r.returncode == 0 and "no snapshots stored, nothing to compare" in r.stdout, r.stdout
    assert "snapshots match" not in r.stdout
    assert fw("rebuild", "--db", db).returncode == 0
    r = fw("rebuild", "--check", "--db", db)
    assert r.returncode == 0 and "snapshots match (" in r.stdout and " compared)" in r.stdout, r.stdout
