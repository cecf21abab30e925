"""A last activity before year 1000 (``"0001-01-01T00:00:00Z"`` in a goal.json: valid ISO-8601, a
wrong clock or a placeholder) through a real `fleetwatch run --once`, `status --json` and `tail --json`."""
from __future__ import annotations

import json
import os
import subprocess

from events.timefmt import iso, parse_iso
from tests.support.exe import FLEETWATCH



def test_iso_pads_years_before_1000_to_four_digits():
    for text in ("0001-01-01T00:00:00.000Z", "0385-07-25T07:06:40.000Z", "0999-12-31T23:59:59.999Z"):
        assert iso(parse_iso(text)) == text


def test_a_last_activity_in_year_one_is_printed_as_iso_and_read_back(tmp_path):
    goal = tmp_path / "fleet" / "old" / "goal.json"
    goal.parent.mkdir(parents=True)
    goal.write_text(json.dumps({"agent": "old", "state": "idle", "phase": "haciendo", "dod_contract": "x",
                                "last_activity": "0001-01-01T00:00:00Z"}))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}

    def fw(*args: str) -> str:
        r = subprocess.run([FLEETWATCH, *args, "--config", str(cfg)], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    fw("run", "--once")
    [row] = json.loads(fw("status", "--json"))["agents"]
    assert row["class"] == "ESTANCADO"
    assert row["last_activity"] == "0001-01-01T00:00:00.000Z"
    assert row["activity_age_s"] is not None and row["activity_age_s"] > 700_000 * 86400
    ev = [json.loads(line) for line in fw("tail", "--json", "--subject", "old").splitlines()]
    assert ev[-1]["data"]["last_activity"] == "0001-01-01T00:00:00.000Z"
    assert f"{int(row['activity_age_s'] // 86400)}d" in fw("status")  # the active column: its age, not '-'
