"""`tail -f` started on a log file that exists but is no log yet: 0 bytes (`touch events.db`, or
the instant `fleetwatch run` has created a new log's file and not yet its tables). It read as an
empty log held in memory and followed that copy forever: nothing the watcher then wrote was shown.
Real `fleetwatch tail -f` and `fleetwatch run --once` processes, a real goal.json."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from tests.support.exe import FLEETWATCH



def test_tail_follow_on_an_empty_log_file_shows_what_the_watcher_then_writes(tmp_path):
    goal = tmp_path / "fleet" / "a1" / "goal.json"
    goal.parent.mkdir(parents=True)
    goal.write_text(json.dumps({"agent": "a1", "state": "waiting", "dod_contract": "x"}))
    db = tmp_path / "e.db"
    db.write_bytes(b"")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{db}"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    tail = subprocess.Popen([FLEETWATCH, "tail", "-f", "--json", "--config", str(cfg)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(tail.stdout), daemon=True)
    reader.start()
    try:
        time.sleep(0.5)   # let tail -f open the empty file first (the case under test)
        r = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg)], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 30
        while len(lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        tail.send_signal(signal.SIGTERM)
        tail.wait(timeout=30)
        reader.join(timeout=10)
    assert [json.loads(x)["type"] for x in lines] == ["watcher.started", "agent.classified", "watcher.stopped"]
    assert tail.returncode == 0
