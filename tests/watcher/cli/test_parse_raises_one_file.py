"""One goal.json blinded its whole source: a contract check with a 400-digit ``stdout_gt`` made
the parser raise OverflowError (``math.isfinite`` of an int beyond the float range), and a
``stdout_re`` of 1,000 nested groups RecursionError (``re.compile``; only ``re.error`` was
caught): the poll raised, the goals source was ``source.failed "internal error: ..."`` and every
agent of it went unseen. Found checking a helper's note on the command source. Now a huge
integer is a number (compared exactly) and a regex too deep to compile is that check's error;
and whatever a parser raises is that one file's MAL_LANZADO (GlobSource._observed), never the
source's. Real files, a real ``fleetwatch run --once`` and ``status --json``."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from tests.support.exe import FLEETWATCH

FW = [FLEETWATCH]


def _goal(root: Path, agent: str, expect: dict) -> None:
    (root / agent).mkdir(parents=True)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (root / agent / "goal.json").write_text(json.dumps({
        "agent": agent, "state": "busy", "phase": "working", "last_activity": now,
        "dod_contract": [{"id": "t", "kind": "cmd", "required": True, "cmd": ["true"], "expect": expect}]}))


def _fleet(tmp_path: Path) -> dict:
    root = tmp_path / "fleet"
    _goal(root, "huge", {"stdout_gt": int("9" * 400)})
    _goal(root, "deep", {"stdout_re": "(" * 1000 + ")" * 1000})
    _goal(root, "good", {"exit": 0})
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{root}/*/goal.json"\n')
    for _ in range(2):  # the two-read rule: a file's error counts on its second read
        r = subprocess.run(FW + ["run", "--once", "--config", str(cfg), "--create"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "source.failed" not in r.stderr, r.stderr
    r = subprocess.run(FW + ["status", "--json", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {a["agent"]: a for a in json.loads(r.stdout)["agents"]}


def test_one_goal_file_the_parser_chokes_on_does_not_blind_its_source(tmp_path):
    got = _fleet(tmp_path)
    assert sorted(got) == ["deep", "good", "huge"]
    assert got["good"]["class"] == "TRABAJANDO"
    assert got["huge"]["class"] == "TRABAJANDO"            # a huge integer is a number
    assert got["deep"]["class"] == "MAL_LANZADO"
    assert "expect.stdout_re does not compile" in got["deep"]["reason"]
