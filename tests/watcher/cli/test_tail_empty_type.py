"""`tail --type ''` (a script's unset variable: --type "$TYPE") or `--type ,` printed nothing at
all, without a word, while `--subject ''` prints everything. Empty type values are no filter.
A real log, real `fleetwatch tail` processes (the fast path and typer's)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from events.log import EventLog
from events.types import AgentClassified
from tests.support.exe import FLEETWATCH

TYPER = "import sys; sys.argv[0] = 'fleetwatch'; from watcher.cli import app; app()"


@pytest.mark.parametrize("how", ["fast", "typer"])
@pytest.mark.parametrize("value", ["", ",", " , "])
def test_an_empty_type_value_is_no_filter_not_an_empty_answer(tmp_path, how, value):
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=f"a{i}", to="RECLAMA", state="waiting", reason="r") for i in range(3)],
               time.time())
    log.close()
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    argv = [FLEETWATCH] if how == "fast" else [sys.executable, "-c", TYPER]
    r = subprocess.run([*argv, "tail", "--type", value, "--db", db], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 3 and "agent:a2" in r.stdout
