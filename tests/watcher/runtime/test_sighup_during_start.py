"""A SIGHUP while `fleetwatch run` starts (the log opening, the projections loading) killed it:
the handler was installed after the projections had loaded, and SIGHUP's default action ends
the process (exit 129, nothing said, no watcher.stopped). It is now installed with the
SIGTERM one, before the log opens, and the reload runs after the first tick."""
from __future__ import annotations

import signal
import subprocess
import threading
import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def holds_lock(pid: int) -> bool:
    with open("/proc/locks") as f:
        return any(" FLOCK " in line and f" {pid} " in line for line in f)


def test_a_sighup_while_the_watcher_starts_is_a_reload_not_its_end(tmp_path):
    db = str(tmp_path / "e.db")
    with EventLog(db) as log:   # a log without snapshots: the start replays it (time for a signal)
        for k in range(6):
            log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                        for i in range(k * 5000, (k + 1) * 5000)], time.time())
    (tmp_path / "fleet" / "a1").mkdir(parents=True)
    (tmp_path / "fleet" / "a1" / "goal.json").write_text('{"state": "busy", "dod_contract": "x"}')
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{db}"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    p = subprocess.Popen([FW, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        end = time.monotonic() + 60
        while not holds_lock(p.pid):   # the log is open: the projections load now
            assert p.poll() is None and time.monotonic() < end, p.stderr.read() if p.stderr else ""
            time.sleep(0.002)
        p.send_signal(signal.SIGHUP)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
        reader.start()
        while not any("config reloaded" in x for x in lines):   # the start went on, then the reload
            assert p.poll() is None, f"the watcher ended with {p.returncode}: {lines}"
            assert time.monotonic() < end, lines
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    reader.join(10)
    err = "".join(lines)
    assert p.returncode == 0, (p.returncode, err)
    assert "watcher.stopped" in err and "watching 1 sources" in err, err
