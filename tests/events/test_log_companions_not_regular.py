"""A log whose -wal, -shm or -journal is not a regular file (a FIFO, a folder, a symlink to
/dev/zero) is refused by name, exit 2, before SQLite meets it. Real files, real subprocesses.

Never SQLite's "disk I/O error" or "unable to open database file" with a hint about disk space
or modes, and with a FIFO -wal `verify` does not say "ok".
"""
from __future__ import annotations

import os
import time

import pytest

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


@pytest.mark.parametrize("suffix,make", [
    ("-wal", os.mkfifo), ("-shm", os.mkfifo), ("-wal", os.mkdir), ("-journal", os.mkdir),
    ("-wal", lambda p: os.symlink("/dev/zero", p)),
])
def test_a_log_whose_companion_is_not_a_regular_file_is_refused_by_name(tmp_path, suffix, make):
    db = str(tmp_path / "events.db")
    with EventLog(db) as log:
        log.append([DodVerdict(agent="a1", verdict="met", verifier="me", evidence="e", source="cli")], time.time())
    for p in (db + "-wal", db + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    make(db + suffix)
    for cmd in (("verify",), ("silence", "a1", "--for", "1h", "--force"), ("backup", str(tmp_path / "bk.db"))):
        r = fw(*cmd, "--db", db, timeout=30)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert f"the log's {suffix} file is not a regular file" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "bk.db")
