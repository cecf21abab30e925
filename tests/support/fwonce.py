"""A real ``fleetwatch run --once`` on a config, then its log as ``tail --json`` rows: the shared
step of the tests that feed a source hostile input and read what the watcher recorded."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from tests.support.exe import FLEETWATCH

FW = [FLEETWATCH]


def once_and_tail(cfg: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """(the run's completed process, every event of the log, oldest first)."""
    r = subprocess.run(FW + ["run", "--once", "--config", str(cfg), "--create"], capture_output=True,
                       text=True, timeout=120)
    t = subprocess.run(FW + ["tail", "--json", "-n", "100000", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=60)
    assert t.returncode == 0, t.stderr
    return r, [json.loads(line) for line in t.stdout.splitlines()]


def sqlite_config(tmp_path: Path, db: Path, query: str) -> Path:
    """A config with one ``sqlite`` source of work packages (keyed by mission, wp) on ``db``."""
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "missions"\nkind = "sqlite"\n'
                   f'entity = "wp"\npath = "{db}"\nkey = ["mission", "wp"]\nquery = "{query}"\n')
    return cfg
