"""One bad key in one section: `run` refuses the config (exit 2), the read-only commands warn on
stderr and go on with that section left out (issue 45: `tail` and `status` exited 2 while the
watcher ran on its old config). Real CLI processes, a real log."""
from __future__ import annotations

import json
import time

import pytest

from events.log import EventLog
from events.types import AgentClassified
from tests.support.fwcli import fw


@pytest.fixture
def world(tmp_path):
    db = tmp_path / "e.db"
    log = EventLog(str(db), durability="normal")
    log.append([AgentClassified(agent="a7", to="RECLAMA", state="waiting", source="fleet")], time.time())
    log.close()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{db}"\n[notify]\ngroup_wait = "soon"\n')
    return cfg


def test_run_refuses_a_bad_key(world):
    r = fw("run", "--once", "--config", str(world))
    assert r.returncode == 2 and "notify.group_wait" in r.stderr


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["summary"], ["tail", "-n", "5"],
                                  ["tail", "--json"], ["report", "--json"]])
def test_read_only_commands_warn_and_go_on(world, args):
    r = fw(*args, "--config", str(world))
    assert r.returncode == 0, r.stderr
    assert "warning: notify.group_wait" in r.stderr and "[notify] left out here" in r.stderr
    assert "a7" in r.stdout or args == ["report", "--json"]
    if "--json" in args and args[0] != "tail":
        json.loads(r.stdout)                       # stdout stays the document alone


def test_a_bad_store_section_is_still_refused(tmp_path):
    """[store] names the log: reading another one (the default) would show the wrong fleet."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[store]\ndurability = "sometimes"\n')
    r = fw("status", "--config", str(cfg))
    assert r.returncode == 2 and "store.durability" in r.stderr


def test_toml_that_does_not_parse_is_still_refused(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[notify\n")
    r = fw("status", "--config", str(cfg))
    assert r.returncode == 2 and "not valid TOML" in r.stderr
