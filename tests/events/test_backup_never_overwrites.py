"""`fleetwatch backup` never replaces a file, never sits on the log's own companions, and cleans
up after a backup killed mid-way. Real logs, real subprocesses.

A backup to ``X`` beside a log named ``X.head`` is refused and the log kept (the backup's anchor
would be renamed over it); a backup to ``LOG.head`` (a log without an anchor yet) is refused, so
the writer's next anchor cannot overwrite it; an existing ``DEST.head`` is never replaced; the
hidden ``.DEST.PID.partial`` a ``kill -9`` of a backup leaves is removed by the next backup.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw

NOW = 1_764_443_000.0


def make_log(path: str, n: int = 5, anchor: bool = True) -> tuple[int, bytes]:
    with EventLog(path) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                    for i in range(n)], NOW)
        head = log.head()
    if not anchor:
        os.unlink(path + ".head")
    return head


def test_a_backup_beside_a_log_named_x_head_does_not_replace_the_log(tmp_path):
    log = str(tmp_path / "log.head")
    head = make_log(log)
    r = fw("backup", str(tmp_path / "log"), "--db", log)
    assert r.returncode == 2 and "head file log.head exists" in r.stderr, r.stderr
    assert not (tmp_path / "log").exists()
    with EventLog(log, create=False, readonly=True) as again:  # still the log, whole
        assert again.head() == head and again.verify(use_anchor=False).ok


def test_a_backup_at_the_logs_own_head_file_is_refused(tmp_path):
    log = str(tmp_path / "events.db")
    make_log(log, anchor=False)  # a log copied with cp, or from before anchors: no events.db.head
    for name in ("events.db.head", "events.db.head.lost-20261201T000000Z", "events.db-wal.orphan-1", "events.db-x"):
        r = fw("backup", str(tmp_path / name), "--db", log)
        assert r.returncode == 2 and "-wal/-shm/.head" in r.stderr, (name, r.stderr)
        assert not (tmp_path / name).exists()
    assert fw("verify", "--db", log).returncode == 0


def test_a_backup_never_replaces_an_existing_head_file(tmp_path):
    log = str(tmp_path / "events.db")
    make_log(log)
    (tmp_path / "bk.db.head").write_text("precious\n")
    r = fw("backup", str(tmp_path / "bk.db"), "--db", log)
    assert r.returncode == 2 and "bk.db.head exists" in r.stderr and "nothing written" in r.stderr, r.stderr
    assert (tmp_path / "bk.db.head").read_text() == "precious\n" and not (tmp_path / "bk.db").exists()


def test_a_killed_backups_partial_file_is_removed_by_the_next_backup(tmp_path):
    log = str(tmp_path / "events.db")
    head = make_log(log)
    # what a backup killed with kill -9 leaves: its partial copy (and journal), nobody holding it
    dead = tmp_path / ".bk.db.999999.partial"
    dead.write_bytes(b"\0" * 65536)
    (tmp_path / ".bk.db.999999.partial-journal").write_bytes(b"\0" * 512)
    # a backup to that name that is still running holds its partial's flock: kept
    live = tmp_path / ".bk.db.1.partial"
    live.write_bytes(b"")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(60)", str(live)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        r = fw("backup", str(tmp_path / "bk.db"), "--db", log)
        assert r.returncode == 0, r.stderr
        left = sorted(n for n in os.listdir(tmp_path) if "partial" in n)
        assert left == [".bk.db.1.partial"]
    finally:
        holder.kill()
        holder.wait()
    with EventLog(str(tmp_path / "bk.db"), create=False, readonly=True) as bk:
        assert bk.head() == head and bk.verify().ok


def test_a_backup_holds_its_own_partial_while_it_runs(tmp_path):
    """The flock the clean-up relies on: a partial being written is never taken for a dead one."""
    from events.backup import remove_stale_partials

    p = tmp_path / ".x.db.5.partial"
    p.write_bytes(b"")
    fd = os.open(p, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        remove_stale_partials(str(tmp_path), "x.db")
        assert p.exists()
    finally:
        os.close(fd)
    remove_stale_partials(str(tmp_path), "x.db")
    assert not p.exists()


def test_the_backup_path_is_printed_escaped(tmp_path):
    log = str(tmp_path / "events.db")
    make_log(log)
    dest = str(tmp_path / "e\x1b]0;PWN\x07\nx.db")
    r = fw("backup", dest, "--db", log)
    assert r.returncode == 0 and "\x1b" not in r.stdout and "\x07" not in r.stdout, repr(r.stdout)
    assert r.stdout.count("\n") == 1 and "e\\x1b]0;PWN\\x07\\nx.db" in r.stdout
    assert os.path.exists(dest)


def test_the_backup_path_expands_variables_and_json_names_the_file_written(tmp_path):
    log = str(tmp_path / "events.db")
    make_log(log)
    env = {"FW_BACKUP_DIR": str(tmp_path)}
    r = fw("backup", "$FW_BACKUP_DIR/bk\u202e.db", "--json", "--db", log, env=env)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(tmp_path / "bk\u202e.db") and not os.path.exists(tmp_path / "$FW_BACKUP_DIR")
    assert '"path":"' + str(tmp_path) + '/bk\\u202e.db"' in r.stdout  # the file written, its bidi override inert


def test_the_clean_up_touches_only_names_a_backup_makes(tmp_path):
    from events.backup import remove_stale_partials

    for n in (".x.db.notes.partial", ".x.db..partial", ".x.db.12.partial.txt", ".x.db.\u0661.partial"):
        (tmp_path / n).write_text("mine")
    (tmp_path / ".x.db.12.partial").write_text("")
    remove_stale_partials(str(tmp_path), "x.db")
    assert sorted(os.listdir(tmp_path)) == sorted([".x.db.notes.partial", ".x.db..partial", ".x.db.12.partial.txt",
                                                   ".x.db.\u0661.partial"])


def test_a_backup_path_ending_in_a_slash_is_a_folder_not_a_file(tmp_path):
    """`backup newdir/` (or `newdir/.`) names a folder: refused (exit 2), nothing named newdir
    written, although os.path.abspath drops the slash."""
    log = str(tmp_path / "events.db")
    make_log(log)
    for dest in (str(tmp_path / "newdir") + "/", str(tmp_path / "newdir") + "/."):
        r = fw("backup", dest, "--db", log)
        assert r.returncode == 2 and "names a folder" in r.stderr, r.stderr
    assert not os.path.lexists(tmp_path / "newdir") and not os.path.lexists(tmp_path / "newdir.head")
