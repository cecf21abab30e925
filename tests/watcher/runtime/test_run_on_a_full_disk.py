"""`fleetwatch run` with its log on a full file system (a real tmpfs, real subprocesses).

Found by a lifecycle pass: `run --once` whose tick could not be written exited 0 (its ERROR line
said the transitions were "kept for the next tick": there is none); a watcher started on a full
disk exited 2, the exit status of a bad config, which the unit does not restart
(RestartPreventExitStatus=2 3) although freeing space is all it takes; and the running watcher
logged the same ERROR on every tick and nothing when appends worked again.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.hostile import fill
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


@pytest.fixture
def full():
    d = tempfile.mkdtemp(prefix="fw-full-")
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", d],
                                           capture_output=True).returncode != 0:
        os.rmdir(d)
        pytest.skip("needs root to mount a small tmpfs")
    yield d
    subprocess.run(["umount", d], check=True)
    os.rmdir(d)


def fleet(tmp_path, n: int, state: str = "busy") -> Path:
    for i in range(n):
        d = tmp_path / "fleet" / f"a{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "goal.json").write_text(json.dumps({"state": state, "dod_contract": "x", "task": "t" * 300}))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[watch]\ninterval = "200ms"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    return cfg


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([FW, *args], capture_output=True, text=True, timeout=timeout)


def rows(db: str) -> list[dict]:
    t = run("tail", "--json", "-n", "100000", "--db", db)
    assert t.returncode == 0, t.stderr
    return [json.loads(line) for line in t.stdout.splitlines()]


@pytest.mark.slow
def test_run_once_whose_tick_cannot_be_written_exits_1_not_0(tmp_path, full):
    cfg = fleet(tmp_path, 400)
    db = os.path.join(full, "e.db")
    assert run("run", "--once", "--config", str(cfg), "--db", db).returncode == 0
    fleet(tmp_path, 400, "waiting")
    filler = fill(full, leave=100_000)   # room to open the log and record watcher.started, not the tick
    r = run("run", "--once", "--config", str(cfg), "--db", db)
    assert r.returncode == 1, r.stderr
    assert "not written" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "kept for the next tick" not in r.stderr
    assert not [e for e in rows(db) if e["data"].get("to") == "RECLAMA"]
    os.unlink(filler)
    r = run("run", "--once", "--config", str(cfg), "--db", db)
    assert r.returncode == 0, r.stderr
    assert len([e for e in rows(db) if e["data"].get("to") == "RECLAMA"]) == 400


def test_run_started_on_a_full_disk_exits_1_which_systemd_restarts(tmp_path, full):
    cfg = fleet(tmp_path, 3)
    filler = fill(full)
    r = run("run", "--config", str(cfg), "--db", os.path.join(full, "e.db"))
    assert r.returncode == 1, r.stderr        # 2 (a bad config or path) is not restarted by the unit
    assert "free space" in r.stderr and "Traceback" not in r.stderr, r.stderr
    os.unlink(filler)
    assert run("run", "--once", "--config", str(cfg), "--db", os.path.join(full, "e.db")).returncode == 0


def test_a_watcher_on_a_full_disk_says_it_once_then_that_appends_work_again(tmp_path, full):
    cfg = fleet(tmp_path, 20)
    db = os.path.join(full, "e.db")
    w = subprocess.Popen([FW, "run", "--config", str(cfg), "--db", db], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while len(rows(db) if os.path.exists(db) else []) < 21:   # the first tick (liveness only)
            assert w.poll() is None and time.monotonic() < end
            time.sleep(0.1)
        filler = fill(full)
        fleet(tmp_path, 20, "waiting")
        time.sleep(2)                          # ~10 ticks of 200 ms, each failing
        os.unlink(filler)
        while len([e for e in rows(db) if e["data"].get("to") == "RECLAMA"]) < 20:
            assert w.poll() is None and time.monotonic() < end
            time.sleep(0.1)
    finally:
        w.send_signal(signal.SIGTERM)
        _, err = w.communicate(timeout=60)
    assert w.returncode == 0, err
    assert err.count("not written") == 1, err  # not one ERROR a tick
    assert "appends work again after" in err, err
    assert len([e for e in rows(db) if e["data"].get("to") == "RECLAMA"]) == 20   # none doubled
