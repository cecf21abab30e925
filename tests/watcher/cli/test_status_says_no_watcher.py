"""`status`, `summary` and the board on a log no watcher holds: the classes are frozen at the last
tick (nothing turns ESTANCADO by time), so saying nothing made a stopped fleet look watched
("TRABAJANDO for 3d", "all quiet"). Real goal.json files, real `fleetwatch run` processes (one
`--once`, one left running), the board headless on the same log."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

import pytest
from tests.support.exe import FLEETWATCH

NOTE = "no watcher is running on this log"


@pytest.fixture
def fleet(tmp_path):
    goal = tmp_path / "fleet" / "a1" / "goal.json"
    goal.parent.mkdir(parents=True)
    goal.write_text(json.dumps({"agent": "a1", "state": "busy", "phase": "haciendo", "dod_contract": "x"}))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    return cfg, str(tmp_path / "e.db")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}


def _fw(cfg, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([FLEETWATCH, *args, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env=_env())
    assert r.returncode == 0, r.stderr
    return r


def _header(db: str) -> str:
    from watcher.board.app import Board
    from watcher.board.feed import Feed

    async def go() -> str:
        app = Board(Feed(db), compact=False)
        async with app.run_test(size=(120, 30)) as pilot:
            for _ in range(40):
                await pilot.pause(0.05)
                if app.rows:
                    break
            return str(app.query_one("#head").render())
    return asyncio.run(go())


def test_status_summary_and_the_board_say_when_no_watcher_holds_the_log(fleet):
    cfg, db = fleet
    _fw(cfg, "run", "--once")
    st = _fw(cfg, "status")
    assert "a1" in st.stdout and NOTE in st.stderr
    assert NOTE in _fw(cfg, "summary").stderr
    assert json.loads(_fw(cfg, "status", "--json").stdout)["watcher"] == {"running": False, "pid": None}
    assert json.loads(_fw(cfg, "summary", "--json").stdout)["watcher"]["running"] is False
    pytest.importorskip("textual")
    assert "watcher NOT RUNNING" in _header(db)


def test_status_and_the_board_say_nothing_while_a_watcher_runs(fleet):
    cfg, db = fleet
    run = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=_env())
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:   # until the watcher holds the log and wrote its start
            if os.path.exists(db) and "watcher.started" in _fw(cfg, "tail", "--type", "watcher.*").stdout:
                break
            time.sleep(0.1)
        st = _fw(cfg, "status", "--json")
        assert json.loads(st.stdout)["watcher"] == {"running": True, "pid": run.pid}
        assert NOTE not in st.stderr and NOTE not in _fw(cfg, "summary").stderr
        pytest.importorskip("textual")
        assert "NOT RUNNING" not in _header(db)
    finally:
        run.terminate()
        run.wait(timeout=30)
