"""`fleetwatch rebuild [--check]` where there is no log (a mistyped --db) exits 2 as `verify`
does, so `rebuild --check && echo fine` does not say fine about nothing. Real subprocesses.

Before: "no event log yet at PATH; nothing to rebuild" and exit 0.
"""
from __future__ import annotations

import os

from tests.fwcli import fw


def test_rebuild_check_of_a_missing_log_exits_2_and_creates_nothing(tmp_path):
    for cmd in (("rebuild", "--check"), ("rebuild",)):
        for db in (tmp_path / "typo.db", tmp_path / "nodir" / "events.db"):
            r = fw(*cmd, "--db", str(db))
            assert r.returncode == 2 and "no event log here yet" in r.stderr, (cmd, db, r.stderr)
    assert os.listdir(tmp_path) == []
