"""A log cut short (a partial copy, a disk that filled while it was copied) is refused with a hint
that says it is damaged, not "is it a fleetwatch events.db?" (it is one). Real files, real
subprocesses."""
from __future__ import annotations

import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


def test_a_log_cut_short_is_named_damaged_not_foreign(tmp_path):
    whole = str(tmp_path / "whole.db")
    with EventLog(whole) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="x" * 300, source="cli")
                    for i in range(2000)], time.time())
        log.checkpoint("TRUNCATE")
    cut = tmp_path / "cut.db"
    with open(whole, "rb") as f:
        cut.write_bytes(f.read(65536))
    for cmd in (("verify",), ("export",), ("status",), ("silence", "a1", "--for", "1h", "--force")):
        r = fw(*cmd, "--db", str(cut))
        assert r.returncode == 2 and "Traceback" not in r.stderr, (cmd, r.stderr)
        assert "damaged" in r.stderr and "restore it from a backup" in r.stderr, (cmd, r.stderr)
        assert "is it a fleetwatch events.db" not in r.stderr


def test_a_log_another_process_keeps_locked_gets_a_lock_hint(tmp_path):
    """A log another process keeps locked gets a hint that says so ("keeps the log locked"), not
    "is it a fleetwatch events.db?"."""
    import subprocess
    import sys

    db = str(tmp_path / "events.db")
    with EventLog(db) as log:
        log.append([DodVerdict(agent="a1", verdict="met", verifier="me", evidence="e", source="cli")], time.time())
    holder = subprocess.Popen([sys.executable, "-c", "import apsw, sys, time\n"
                               "c = apsw.Connection(sys.argv[1]); c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
                               "c.execute('BEGIN EXCLUSIVE'); c.execute('CREATE TABLE zz(x)')\n"
                               "print('held', flush=True); time.sleep(120)", db], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        r = fw("verify", "--db", db)
        assert r.returncode == 2 and "BusyError" in r.stderr and "keeps the log locked" in r.stderr, r.stderr
    finally:
        holder.kill()
        holder.wait()
