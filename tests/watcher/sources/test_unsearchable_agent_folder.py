"""An agent folder the watcher may not search is reported (MAL_LANZADO "unreadable"), not CERRADO.

Found by a hostile CLI pass (as an unprivileged user): `chmod 000` on one agent's folder made a
live agent `agent.classified TRABAJANDO -> CERRADO "no longer seen by any source"`: the stat of
its goal.json failed with EACCES, and ``os.path.lexists`` (False on EACCES too) took it for a file
that is gone. A RECLAMA agent would have been hidden the same way. Now it is
MAL_LANZADO "unreadable: Permission denied", and back in its class once the folder is readable.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.fwcli import AS_NOBODY, as_nobody_env
from tests.support.exe import FLEETWATCH



@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root searches any folder")
def test_unsearchable_agent_folder_is_mal_lanzado_not_cerrado():
    base = Path(tempfile.mkdtemp(prefix="fw-unsearchable-"))   # reachable by the unprivileged user
    try:
        os.chmod(base, 0o777)
        for a in ("a1", "a2"):
            os.makedirs(base / "fleet" / a)
            (base / "fleet" / a / "goal.json").write_text(json.dumps({"state": "waiting", "dod_contract": "x"}))
            os.chmod(base / "fleet" / a / "goal.json", 0o644)
        cfg = base / "cfg.toml"
        cfg.write_text(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{base}/fleet/*/goal.json"\n')
        os.chmod(cfg, 0o644)
        db = str(base / "e.db")
        env = as_nobody_env(base)

        def once() -> None:
            p = subprocess.run([*AS_NOBODY, FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db],
                               capture_output=True, text=True, timeout=60, env=env)
            assert p.returncode == 0, p.stderr

        def classified(agent: str) -> list[tuple[str, str]]:
            p = subprocess.run([*AS_NOBODY, FLEETWATCH, "export", "--db", db], capture_output=True, text=True,
                               timeout=60, env=env)
            evs = [json.loads(line) for line in p.stdout.splitlines()]
            return [(e["data"]["to"], e["data"]["reason"]) for e in evs
                    if e["type"] == "agent.classified" and e["data"]["agent"] == agent]

        once()
        os.chmod(base / "fleet" / "a2", 0o000)
        once()
        os.chmod(base / "fleet" / "a2", 0o755)
        once()
        assert [c for c, _ in classified("a1")] == ["RECLAMA"]
        assert classified("a2") == [("RECLAMA", "waiting for the human"),
                                    ("MAL_LANZADO", "unreadable: Permission denied"),
                                    ("RECLAMA", "waiting for the human")]
    finally:
        for d, _, _ in os.walk(base):
            os.chmod(d, 0o755)
        shutil.rmtree(base)
