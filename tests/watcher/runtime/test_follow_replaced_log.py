"""`tail -f` and the board must not follow a deleted or replaced log in silence.

Found by a hostile CLI pass: with `fleetwatch tail -f` (or the board) open, the log was replaced
(`mv` of another log onto the path) or deleted; the watcher exits as it should and its restart
writes to the file now at the path, but `tail -f` kept following the old file forever (no new
event, no word) and the board kept showing the old fleet as live. Now `tail -f` exits 1 with one
message and a hint, and the board reloads from the file now at the path.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from watcher.board.feed import Feed
from tests.support.exe import FLEETWATCH



def _log(tmp_path: Path, name: str, agents: list[str]) -> str:
    """A real log made by `fleetwatch run --once` over a fleet of ``agents``."""
    root = tmp_path / f"fleet-{name}"
    for a in agents:
        os.makedirs(root / a)
        (root / a / "goal.json").write_text(json.dumps({"state": "waiting", "dod_contract": "x"}))
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    db = str(tmp_path / f"{name}.db")
    p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return db


def _drop(db: str) -> None:
    for suffix in ("", "-wal", "-shm", ".head", ".lock"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)


@pytest.mark.parametrize("how", ["replaced", "deleted"])
def test_tail_follow_exits_when_its_log_is_replaced_or_deleted(tmp_path, how):
    db = _log(tmp_path, "a", ["a1"])
    other = _log(tmp_path, "b", ["b1", "b2"])
    p = subprocess.Popen([FLEETWATCH, "tail", "-f", "-n", "1", "--db", db],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline()   # following
        if how == "replaced":
            os.replace(other, db)
        else:
            os.rename(db, str(tmp_path / "away.db"))
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 1, err
    assert "the event log was deleted or replaced while `tail -f` followed it" in err
    assert "hint: run `fleetwatch tail -f` again" in err and "Traceback" not in err


def test_board_feed_reloads_a_replaced_log(tmp_path):
    db = _log(tmp_path, "a", ["a1"])
    other = _log(tmp_path, "b", ["b1", "b2"])
    feed = Feed(db)
    try:
        feed.poll()
        assert set(feed.known_agents()) == {"a1"}
        os.replace(other, db)
        feed.poll()
        assert set(feed.known_agents()) == {"b1", "b2"}     # the file now at the path, not the old one
        _drop(db)
        feed.poll()
        assert feed.known_agents() == {} and "no event log yet" in feed.note
        os.replace(_log(tmp_path, "c", ["c1"]), db)
        deadline = time.monotonic() + 5
        while set(feed.known_agents()) != {"c1"}:
            assert time.monotonic() < deadline
            feed.poll()
    finally:
        feed.close()
