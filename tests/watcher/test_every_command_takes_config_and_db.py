"""Every command takes --config and --db (docs/contract.md: "all take --config, --db"). Real
subprocesses.

`fleetwatch schema goal --config X` and `fleetwatch init --db X` included, so a script can pass
both to every command; `init --db` writes that log path into the config's [store] path.
"""
from __future__ import annotations

import json

from tests.support.fwcli import fw
from watcher.config import load


def test_schema_takes_config_and_db(tmp_path):
    r = fw("schema", "goal", "--config", str(tmp_path / "c.toml"), "--db", str(tmp_path / "e.db"))
    assert r.returncode == 0 and json.loads(r.stdout)["title"] == "goal.json", r.stderr
    assert not list(tmp_path.iterdir())  # neither is created nor read


def test_init_db_writes_the_log_path_into_the_config(tmp_path):
    cfg = tmp_path / "config.toml"
    odd = 'we"ird \\ \x7f\u202e.db'
    r = fw("init", "--config", str(cfg), "--db", str(tmp_path / odd))
    assert r.returncode == 0, r.stderr
    assert load(str(cfg), required=True, check_paths=False).store.path == str(tmp_path / odd)
    assert not (tmp_path / odd).exists()
    d = fw("doctor", "--config", str(cfg))
    assert f"log: {tmp_path}" in d.stdout and "not created yet" in d.stdout, d.stdout
