"""A fleet of goal.json files on a virtual clock and the watcher config that reads it (the
watcher's end-to-end tests and the tests built on them)."""
from __future__ import annotations

import json
import os
import time

from events.log import EventLog
from tests.support.vclock import written_at
from watcher.config import parse

T0 = 1_800_000_000.0


def goal(root, agent, **kw):
    g = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": f"tests for {agent}",
         "dod": "private session text", "last_activity": T0}
    g.update(kw)
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "goal.json.tmp"
    tmp.write_text(json.dumps(g))
    written_at(tmp, g["last_activity"])  # on the virtual clock (tests/support/vclock.py)
    os.replace(tmp, d / "goal.json")


def make(tmp_path, stall="15m"):
    fleet = tmp_path / "fleet"
    fleet.mkdir(exist_ok=True)
    # busy agents here keep a fixed last_activity for hours of virtual time: no busy_silence backstop
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[classify]\nstall_after = "{stall}"\nbusy_silence = "30d"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    return fleet, cfg


def classes(elog: EventLog, agent: str) -> list[str]:
    return [r.event.to for r in elog.read(0, types=["agent.classified"], subject=f"agent:{agent}")]


def wait_for(waker, want: str, timeout: float = 60.0) -> set:
    """Wait for inotify to report ``want``; returns every path noted meanwhile."""
    got: set = set()
    end = time.monotonic() + timeout
    while want not in got and time.monotonic() < end:
        waker.wait(0.2)
        got |= waker.take() or set()
    assert want in got, sorted(got)
    return got
