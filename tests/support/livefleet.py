"""A real ``fleetwatch run`` seen from outside: goal.json files written as an agent's hook writes
them (a whole file renamed into place, one inotify event), and waiting on what the watcher records
for as long as its process lives."""
from __future__ import annotations

import json
import os
import subprocess
import time

T0 = 1_800_000_000.0


def goal(root, agent, **kw) -> None:
    """``root/agent/goal.json``: busy, haciendo, a contract, active at T0, and ``kw``."""
    d = os.path.join(root, agent)
    os.makedirs(d, exist_ok=True)
    doc = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": f"tests for {agent}",
           "last_activity": T0, **kw}
    with open(os.path.join(d, "goal.json.tmp"), "w") as f:
        json.dump(doc, f)
    os.replace(os.path.join(d, "goal.json.tmp"), os.path.join(d, "goal.json"))


def wait_for(pred, what: str, proc: subprocess.Popen, limit: float = 60.0) -> None:
    """Liveness only (no timing asserted): until ``pred()`` or the watcher died."""
    end = time.monotonic() + limit
    while not pred():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < end, f"never saw {what}"
        time.sleep(0.05)
