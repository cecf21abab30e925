"""`fleetwatch backup --as-is`: a damaged log can be copied as it is. Real logs, real subprocesses.

`backup` is the one tool that makes a consistent copy of a live log (WAL included; `cp` misses
the WAL), and a damaged log is the one a user most needs kept before starting a new one. Without
--as-is a log that does not verify is refused, nothing kept; with it the copy is kept, every row
as it is, and the result says so.
"""
from __future__ import annotations

import json
import os
import stat

import apsw

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw
from tests.support.tamper import raw

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


# ---- the log rewritten under the copy ------------------------------------------------------------
def rewrite_from(path: str, first: int) -> None:
    """Another history from row ``first`` on, chained like the real one (so the log itself still
    verifies its rows): what a writer that dropped the guards and re-chained leaves."""
    from events import schema as evschema
    from events.chain import GENESIS, row_hash

    c = apsw.Connection(path)
    c.execute("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP TRIGGER events_no_replace")
    prev = c.execute("SELECT hash FROM events WHERE seq = ?", (first - 1,)).fetchall()
    prev = prev[0][0] if prev else GENESIS
    for seq, id_, time_, type_, subject, version in c.execute(
            "SELECT seq, id, time, type, subject, version FROM events WHERE seq >= ? ORDER BY seq", (first,)).fetchall():
        data = b'{"agent":"x","verdict":"failed","verifier":"w%d","evidence":"e","source":"cli"}' % first
        prev = row_hash(prev, seq, id_, time_, type_, subject, version, data)
        c.execute("UPDATE events SET data = ?, hash = ? WHERE seq = ?", (data, prev, seq))
    evschema.restore_guards(c)
    c.close()


class RewrittenUnderTheCopy(EventLog):
    """The log's class, which ``backup`` opens its finished copy with: that open first lets
    another writer rewrite the log from row FIRST on (between the copy and its check)."""

    source, first, done = "", 6, False

    def __init__(self, path: str, **kw):
        cls = type(self)
        if kw.get("readonly") and path != cls.source and not cls.done:
            cls.done = True
            rewrite_from(cls.source, cls.first)
        super().__init__(path, **kw)


def test_a_log_rewritten_under_the_copy_names_the_last_row_both_agree_on(tmp_path):
    """A log rewritten while it is copied: the copy is kept (--as-is) with every row as it was
    copied, and the result names seq 5, the last row the copy and the log agree on, and seq 6,
    the first where they part (never the copy's head, seq 8, the row that differs)."""
    from events.errors import BackupFailed

    log, dest = str(tmp_path / "events.db"), str(tmp_path / "copy.db")
    with EventLog(log) as elog:
        elog.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                     for i in range(8)], NOW)
        copied = [r[7] for r in rows(log)]
    RewrittenUnderTheCopy.source, RewrittenUnderTheCopy.done, RewrittenUnderTheCopy.first = log, False, 6
    with RewrittenUnderTheCopy(log, create=False) as src:
        res = src.backup(dest, as_is=True)
    assert RewrittenUnderTheCopy.done
    assert (res.ok, res.head_seq, res.bad_seq) == (False, 5, 6)
    assert res.head_hash == copied[4].hex() and res.count == 8
    assert res.problem == "seq 6 of the copy differs from the log (the two agree up to seq 5)"
    assert [r[7] for r in rows(dest)] == copied              # the copy holds the rows as they were copied
    assert [r[7] for r in rows(log)][:5] == copied[:5] and [r[7] for r in rows(log)][5:] != copied[5:]
    RewrittenUnderTheCopy.done, RewrittenUnderTheCopy.first = False, 3   # without --as-is, nothing is kept
    with RewrittenUnderTheCopy(log, create=False) as src:
        try:
            src.backup(str(tmp_path / "refused.db"))
            raise AssertionError("a copy that differs from the log was kept")
        except BackupFailed as e:
            assert "seq 3 of the copy differs from the log (the two agree up to seq 2)" in str(e)
    assert not os.path.exists(tmp_path / "refused.db")
