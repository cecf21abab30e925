"""`fleetwatch report` for a big fleet: the per-agent rich Table measured every cell, 4 s of CPU
for 5,000 agents. Above RICH_ROWS agents it is aligned text, one line per agent, ids escaped and
never parsed as markup. A real log, a real `fleetwatch report` process."""
from __future__ import annotations

import os
import subprocess
import time

from events.log import EventLog
from events.types import AgentClassified
from watcher.cli.render import RICH_ROWS
from tests.support.exe import FLEETWATCH



def test_report_per_agent_section_of_a_big_fleet_is_one_aligned_line_per_agent(tmp_path):
    db = str(tmp_path / "e.db")
    ids = ["mk[/]", "esc\x1b]0;X\x07", "L" * 60] + [f"a{i:04d}" for i in range(RICH_ROWS)]
    log = EventLog(db, durability="normal")
    now = time.time()
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", reason="r") for a in ids], now - 600)
    log.append([AgentClassified(agent=a, to="TRABAJANDO", state="busy", reason="r") for a in ids], now - 60)
    log.close()
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    r = subprocess.run([FLEETWATCH, "report", "--db", db], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Per agent\n", 1)[1].split("\nruns:", 1)[0].splitlines()
    assert section[0].split() == ["agent", "working", "waiting", "on", "you", "stalled", "claims", "met", "failed"]
    assert len(section) == 1 + len(ids) and len({len(x.rstrip()) for x in section[1:]}) == 1   # aligned
    assert any(x.startswith("mk[/] ") for x in section) and any(x.startswith("esc\\x1b]0;X\\x07 ") for x in section)
    assert "\x1b" not in r.stdout and "┃" not in "\n".join(section)
