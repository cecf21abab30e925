"""A goal.json that is JSON to the eye but not UTF-8 (Latin-1 bytes, an editor's UTF-16): the
agent is MAL_LANZADO, and the reason a person reads in `status`/`summary` must say why; a bare
"not JSON" sent them looking for a syntax error that is not there. Real files, `run --once`."""
from __future__ import annotations

import json
import os
import subprocess
from tests.support.exe import FLEETWATCH



def test_a_goal_json_that_is_not_utf8_says_so_in_status_and_summary(tmp_path):
    doc = {"state": "busy", "phase": "haciendo", "task": "café", "dod_contract": "x"}
    latin1 = json.dumps(doc, ensure_ascii=False).encode("latin-1")
    for name, raw in (("latin1", latin1), ("utf16", json.dumps(doc, ensure_ascii=False).encode("utf-16"))):
        (tmp_path / "fleet" / name).mkdir(parents=True)
        (tmp_path / "fleet" / name / "goal.json").write_bytes(raw)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}

    def fw(*args: str) -> str:
        r = subprocess.run([FLEETWATCH, *args, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                           env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    fw("run", "--once")
    rows = {a["agent"]: a for a in json.loads(fw("status", "--json"))["agents"]}
    assert rows["latin1"]["class"] == rows["utf16"]["class"] == "MAL_LANZADO"
    assert rows["latin1"]["reason"] == f"not JSON (not UTF-8 text: byte {latin1.index('é'.encode('latin-1'))})"
    assert rows["utf16"]["reason"] == "not JSON (not UTF-8 text: byte 0, UTF-16? save it as UTF-8)"
    assert "latin1: not JSON (not UTF-8 text" in fw("summary")
