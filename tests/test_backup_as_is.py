"""`fleetwatch backup --as-is`: a damaged log can be copied as it is. Real logs, real subprocesses.

Before: a backup of a log that does not verify was refused, nothing kept, and the hint only said
to run `verify`; the one tool that makes a consistent copy of a live log (WAL included) could
not copy the very log a user most needs kept before starting a new one (`cp` misses the WAL).
Without --as-is that refusal stands; with it the copy is kept, every row as it is, and said.
"""
from __future__ import annotations

import json
import os
import stat

import apsw

from events.log import EventLog
from events.types import DodVerdict
from tests.fwcli import fw
from tests.test_log_integrity import raw

NOW = 1_764_443_000.0


def damaged_log(path: str, n: int = 8, bad: int = 5) -> None:
    """A log whose row ``bad`` was altered by someone who dropped the guards and put them back."""
    with EventLog(path) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                    for i in range(n)], NOW)
    raw(path, "UPDATE events SET data = CAST('{}' AS BLOB) WHERE seq = ?", bad)


def rows(path: str) -> list[tuple]:
    c = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return c.execute("SELECT seq, id, time, type, subject, version, data, hash FROM events ORDER BY seq").fetchall()
    finally:
        c.close()


def test_a_damaged_log_is_refused_without_as_is_and_the_hint_names_it(tmp_path):
    log, dest = str(tmp_path / "events.db"), str(tmp_path / "copy.db")
    damaged_log(log)
    r = fw("backup", dest, "--db", log)
    assert r.returncode == 1, r.stderr
    assert "the copy does not verify, nothing kept: seq 5" in r.stderr
    assert "fleetwatch backup --as-is PATH" in r.stderr
    assert not os.path.exists(dest) and not os.path.exists(dest + ".head")


def test_a_damaged_log_is_copied_as_it_is_with_as_is(tmp_path):
    log, dest = str(tmp_path / "events.db"), str(tmp_path / "copy.db")
    damaged_log(log)
    r = fw("backup", dest, "--as-is", "--db", log)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"backed up to {dest} as it is, NOT verified; last good row 4:")
    assert "warning: the copy does not verify, kept as it is (--as-is): seq 5: hash mismatch" in r.stderr
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600
    assert rows(dest) == rows(log)          # every row, the altered one too
    v = fw("verify", "--db", dest)
    assert v.returncode == 1 and "BROKEN at seq 5" in v.stdout
    with EventLog(dest, create=False, readonly=True) as copy:   # its anchor names its own head
        assert copy.verify().bad_seq == 5
        assert copy.head()[0] == 8


def test_as_is_json_says_it_does_not_verify(tmp_path):
    log, dest = str(tmp_path / "events.db"), str(tmp_path / "copy.db")
    damaged_log(log)
    r = fw("backup", dest, "--as-is", "--json", "--db", log)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["path"], doc["ok"], doc["bad_seq"], doc["head_seq"]) == (dest, False, 5, 4)
    assert "seq 5" in r.stderr


def test_as_is_on_a_sound_log_is_a_verified_backup(tmp_path):
    log, dest = str(tmp_path / "events.db"), str(tmp_path / "copy.db")
    with EventLog(log) as elog:
        elog.append([DodVerdict(agent="a", verdict="met", verifier="me", evidence="e", source="cli")], NOW)
    r = fw("backup", dest, "--as-is", "--db", log)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith(f"backed up 1 events to {dest}: verified, head 1:")


def test_as_is_never_overwrites(tmp_path):
    log, dest = str(tmp_path / "events.db"), tmp_path / "copy.db"
    damaged_log(log)
    dest.write_bytes(b"keep me")
    r = fw("backup", str(dest), "--as-is", "--db", log)
    assert r.returncode == 2 and dest.read_bytes() == b"keep me"
