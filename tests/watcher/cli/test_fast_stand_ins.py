"""The fast start path's lean msgspec import (watcher/cli/fast.py: msgspec imported without
typing_extensions) leaves every answer as with the usual imports: checked in fresh real processes
(the block only acts before msgspec is first imported), on a real log."""
from __future__ import annotations

import os
import subprocess
import sys

from events.log import EventLog
from events.types import AgentClassified, DodVerdict
from watcher.runtime.state import rebuild
from tests.support.exe import FLEETWATCH

T0 = 1_800_000_000.0


def test_fast_status_prints_what_the_real_modules_print(tmp_path):
    """`status` (table and --json) and `summary` through the console script's fast path, against
    the same functions in a process that imported datetime and msgspec as usual."""
    db = str(tmp_path / "e.db")
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent="a1", to="RECLAMA", state="waiting", phase="haciendo", reason="waiting",
                                 source="fleet", last_activity="2027-01-15T08:00:50.000Z"),
                 AgentClassified(agent="a2", to="DICE_TERMINADO", state="idle", phase="hecho", reason="done",
                                 source="fleet")], T0)
    elog.append([DodVerdict(agent="a2", verdict="met", verifier="v1", evidence="pytest -q: green")], T0 + 30)
    rebuild(elog)
    elog.close()
    env = dict(os.environ, FLEETWATCH_DB=db, XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    exe = FLEETWATCH
    usual = ("import datetime, msgspec, msgspec.inspect, sys, time\n"
             "time.time = lambda: 1_800_000_600.0\n"
             "from watcher.cli import status\n"
             "getattr(status, sys.argv[1])(json='--json' in sys.argv)\n")
    clock = "import time; time.time = lambda: 1_800_000_600.0\n"
    fast = clock + ("import sys; from watcher.cli import fast; rc = fast.main(sys.argv[1:])\n"
                    "sys.exit(rc)\n")
    for args in (["status"], ["status", "--json"], ["summary"], ["summary", "--json"]):
        a = subprocess.run([sys.executable, "-c", fast, *args], capture_output=True, env=env)
        b = subprocess.run([sys.executable, "-c", usual, *args], capture_output=True, env=env)
        assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
        assert a.stdout == b.stdout and a.stdout, args
    r = subprocess.run([exe, "status"], capture_output=True, env=env)   # the console script itself
    assert r.returncode == 0 and r.stdout.startswith(b"fleet: 2 agent(s)"), r.stderr
