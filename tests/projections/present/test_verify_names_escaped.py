"""`verify`'s report names the head file after the log, escaped: a folder or log name holding
ESC]0;…BEL must not retitle the terminal through "BROKEN at table NAME.head". Real files, real
subprocesses.

Both the stdout line "BROKEN at table …: …" (the table and the problem) and the stderr line
escape what they name; "no head anchor (NAME.head)" names the log's own head file, and does not
tell to pass --expect-head when it was passed.
"""
from __future__ import annotations

import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


def make_log(path: str) -> str:
    with EventLog(path) as log:
        log.append([DodVerdict(agent="a1", verdict="met", verifier="me", evidence="e", source="cli")], time.time())
        seq, h = log.head()
    return f"{seq}:{h.hex()}"


def test_a_broken_verify_prints_the_head_files_name_escaped(tmp_path):
    db = str(tmp_path / "x\x1b]0;PWN\x07.db")
    make_log(db)
    with open(db + ".head", "wb") as f:
        f.write(b"garbage\n")
    r = fw("verify", "--db", db)
    assert r.returncode == 1, r.stderr
    for out in (r.stdout, r.stderr):
        assert "\x1b" not in out and "\x07" not in out, repr(out)
        assert "x\\x1b]0;PWN\\x07.db.head" in out


def test_no_head_anchor_names_the_logs_own_head_file(tmp_path):
    db = str(tmp_path / "fleet.db")
    head = make_log(db)
    (tmp_path / "fleet.db.head").unlink()
    r = fw("verify", "--db", db)
    assert r.returncode == 0 and "no head anchor (fleet.db.head)" in r.stdout and "pass --expect-head" in r.stdout
    r = fw("verify", "--expect-head", head, "--db", db)
    assert r.returncode == 0 and "pass --expect-head" not in r.stdout, r.stdout


def test_a_hub_logs_host_lines_are_printed_escaped(tmp_path):
    """A hub's log names every host as that host sent it (its [forward] host): a forwarded host
    name holding ESC]0;…BEL reached the terminal through verify's per-host lines."""
    import apsw

    from watcher.hub.store import ORIGIN_DDL

    db = str(tmp_path / "hub.db")
    make_log(db)
    c = apsw.Connection(db)
    c.execute(ORIGIN_DDL)
    c.execute("INSERT INTO hub_origin VALUES (?,?,?,?,?,?,?,?,?,?,?)",
              ("vm\x1b]0;PWN\x07\nhost ok", "c1", 1, 1, "id1", "2026-12-01T00:00:00.000Z", "dod.verdict", "dod:a1", 1,
               b"{}", b"\x00" * 32))
    c.close()
    r = fw("verify", "--db", db)
    assert "host vm\\x1b]0;PWN\\x07\\nhost ok chain c1" in r.stdout, r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
