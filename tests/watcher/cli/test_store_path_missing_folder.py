"""Regression: `fleetwatch run` on a config whose ``[store] path`` names a folder that does not
exist made the folder and a new empty log there, while ``--db`` and ``$FLEETWATCH_DB`` refuse a
missing folder (a typo must not silently start a new log elsewhere). Now the config's path is
refused the same way (exit 2, nothing created; ``--create`` makes it), `doctor` says so, and only
the default ``$XDG_STATE_HOME`` path gets its folder made. Real processes."""
from __future__ import annotations

import json
import os
import subprocess
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


def fw(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    e.update(env or {})
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60, env=e)


def config(tmp_path, store: str | None) -> str:
    goals = tmp_path / "goals" / "a1"
    goals.mkdir(parents=True)
    (goals / "goal.json").write_text(json.dumps({"agent": "a1", "state": "busy", "dod_contract": "x"}))
    cfg = tmp_path / "c.toml"
    cfg.write_text((f'[store]\npath = "{store}"\n' if store else "")
                   + f'[[sources]]\nname = "g"\nkind = "goals"\nglob = "{tmp_path}/goals/*/goal.json"\n')
    return str(cfg)


def test_a_store_path_in_a_missing_folder_is_refused_like_db(tmp_path):
    typo = tmp_path / "typo"
    cfg = config(tmp_path, str(typo / "events.db"))
    r = fw("run", "--once", "--config", cfg)
    assert r.returncode == 2, r.stderr
    assert f"the folder {typo} does not exist (a typo?); nothing was created" in r.stderr
    assert "hint: " in r.stderr and "Traceback" not in r.stderr and not typo.exists()
    r = fw("silence", "a1", "--for", "1h", "--force", "--config", cfg)     # a command that creates a log
    assert r.returncode == 2 and "does not exist" in r.stderr and not typo.exists(), r.stderr
    d = fw("doctor", "--config", cfg)
    assert d.returncode == 1 and f"log: the folder {typo} does not exist" in d.stdout, d.stdout
    r = fw("run", "--once", "--create", "--config", cfg)
    assert r.returncode == 0, r.stderr
    assert (typo / "events.db").exists()
    assert fw("run", "--once", "--config", cfg).returncode == 0          # it exists now: no flag needed


def test_the_default_path_still_gets_its_folder(tmp_path):
    cfg = config(tmp_path, None)
    r = fw("run", "--once", "--config", cfg, env={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "xdg" / "fleetwatch" / "events.db").exists()
