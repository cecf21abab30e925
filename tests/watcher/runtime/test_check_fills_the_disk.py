"""A DoD check that fills the log's disk (issue 47): the verdict could not be appended, so the claim
was checked again (5 to 7 runs in 16 s), a re-run after the space was freed filled it again, and
nothing more was recorded, not even `watcher.stopped`. A real tmpfs, a real `fleetwatch run`."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.fwcli import fw
from tests.support.hostile import check, fill, goal, rows, small_fs, start, stop, verdicts, world
from tests.support.receiver import Sink
from tests.support.waiting import wait_for


@pytest.fixture
def disk():
    with small_fs("4m") as d:
        if d is None:
            pytest.skip("needs root to mount a small tmpfs (the log's disk, filled for real)")
        yield Path(d)


def _filler_check(counter: Path) -> dict:
    """Counts its runs outside the small disk, then writes until the disk is full."""
    return check(["sh", "-c", f"echo run >> {counter}; head -c 100000000 /dev/zero > big; exit 1"])


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.mark.slow
def test_the_verdict_waits_for_space_and_the_check_never_runs_again(tmp_path, disk):
    sink = Sink()
    counter = tmp_path / "runs"
    db = str(disk / "e.db")
    fleet, cfg = world(tmp_path, db, notify=sink.url())
    agent = goal(disk / "fleet", "a1", [_filler_check(counter)], claim=False)
    fleet.rmdir()
    (tmp_path / "config.toml").write_text(cfg.read_text().replace(str(fleet), str(disk / "fleet")))
    p = start(cfg)
    try:
        wait_for(lambda: rows(db, ("agent.classified",)), timeout=60)
        goal(disk / "fleet", "a1", [_filler_check(counter)])
        wait_for(lambda: _runs(counter) == 1 and (agent / "big").exists(), timeout=60)
        wait_for(lambda: any("disk is full" in str(b) for b in sink.bodies), timeout=60)   # the push
        doctor = fw("doctor", "--config", str(cfg)).stdout
        assert "is full" in doctor, doctor
        time.sleep(3)                    # ~15 ticks on a full disk
        assert _runs(counter) == 1 and verdicts(db) == [] and p.poll() is None
        os.unlink(agent / "big")         # space again: the verdict kept in memory is appended
        (v,) = wait_for(lambda: verdicts(db), timeout=60)
        assert v["verdict"] == "failed"
        time.sleep(1)
        assert _runs(counter) == 1 and len(verdicts(db)) == 1
    finally:
        assert stop(p) == 0
        sink.close()
    assert rows(db)[-1]["type"] == "watcher.stopped"


@pytest.mark.slow
def test_a_stop_on_a_full_disk_keeps_its_verdict_and_watcher_stopped_for_the_next_start(tmp_path, disk):
    counter = tmp_path / "runs"
    db = str(disk / "e.db")
    _, cfg = world(tmp_path, db)
    (tmp_path / "config.toml").write_text(cfg.read_text().replace(str(tmp_path / "fleet"), str(disk / "fleet")))
    agent = goal(disk / "fleet", "a1", [_filler_check(counter)], claim=False)
    p = start(cfg)
    try:
        wait_for(lambda: rows(db, ("agent.classified",)), timeout=60)
        goal(disk / "fleet", "a1", [_filler_check(counter)])
        wait_for(lambda: _runs(counter) == 1 and (agent / "big").exists(), timeout=60)
        time.sleep(2)
    finally:
        assert stop(p) == 0
    assert verdicts(db) == [] and rows(db)[-1]["type"] != "watcher.stopped"
    assert "wait in" in fw("doctor", "--config", str(cfg)).stdout
    os.unlink(agent / "big")
    filler = fill(str(disk), leave=600_000)   # room for the next start, not for a re-run's output
    p = start(cfg)
    try:
        (v,) = wait_for(lambda: verdicts(db), timeout=60)
        time.sleep(1)
    finally:
        assert stop(p) == 0
    os.unlink(filler)
    assert v["verdict"] == "failed" and _runs(counter) == 1
    types = [r["type"] for r in rows(db) if r["type"].startswith("watcher.")]
    assert types == ["watcher.started", "watcher.stopped", "watcher.started", "watcher.stopped"], types
