"""`fleetwatch report --since 0001-01-01` listed one empty day for every day since year 1
(740,000 rows: 17 s and 279 MB of JSON), although no day before the log's first event can hold
anything. Found by a helper attacking the report. The days now start at the later of --since and
the first event. A real log and a real `report --json`."""
from __future__ import annotations

import json
import subprocess
import time

from events.log import EventLog
from events.types import AgentClassified
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


def test_report_since_year_one_lists_only_the_days_the_log_covers(tmp_path):
    db = tmp_path / "e.db"
    now = time.time()
    log = EventLog(str(db))
    log.append([AgentClassified(agent="a1", to="RECLAMA", state="waiting", reason="needs you")], now - 86400)
    log.append([AgentClassified(agent="a1", from_="RECLAMA", to="TRABAJANDO", state="busy", reason="busy")], now)
    log.close()
    r = subprocess.run([EXE, "report", "--since", "0001-01-01T00:00:00Z", "--json", "--db", str(db)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert 2 <= len(out["days"]) <= 3 and out["range"]["days"] == len(out["days"])
    assert out["load"]["reclama"]["episodes"] == 1
    assert len(r.stdout) < 20_000
