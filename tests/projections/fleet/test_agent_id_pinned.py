"""An agent escaping its pinned contract by renaming itself (issue 47): agent r (contract
``["false"]``) rewrote its own goal.json with ``"agent": "r2"`` and the contract of agent r2
(``["true"]``) and claimed done: r became CERRADO "no longer seen" and a ``met`` was recorded for r2.
Real goal.json files, a real log, real checks."""
from __future__ import annotations

import time

from events.log import EventLog
from tests.support.hostile import check, goal
from watcher.config import parse
from watcher.runtime.checker import Checker
from watcher.runtime.loop import Watcher


def _watcher(tmp_path):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[dod]\nrun_checks = true\ncheck_timeout = "30s"\n')
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    w.checker = Checker.from_config(cfg)
    return fleet, w


def _ticks(w, n: int = 15) -> None:
    for _ in range(n):
        w.tick(time.time())
        time.sleep(0.05)


def test_an_agent_renaming_itself_changes_nobody_s_verdict(tmp_path):
    fleet, w = _watcher(tmp_path)
    try:
        goal(fleet, "r", [check(["false"])], claim=False)
        goal(fleet, "r2", [check(["true"])], claim=False)
        _ticks(w, 3)
        assert {a: s["class"] for a, s in w.proj["fleet"]["agents"].items()} == {"r": "TRABAJANDO", "r2": "TRABAJANDO"}
        goal(fleet, "r", [check(["true"])], agent="r2")   # r's own folder: r2's id and contract, done
        _ticks(w)
        agents = w.proj["fleet"]["agents"]
        assert set(agents) == {"r", "r2"}
        assert agents["r"]["class"] == "MAL_LANZADO" and "agent id changed" in agents["r"]["reason"]
        assert agents["r2"]["class"] == "TRABAJANDO"
        rows = list(w.log.read(0))
        assert not [r for r in rows if r.type == "dod.verdict"]
        assert not [r for r in rows if r.type == "agent.classified" and r.event.to == "CERRADO"]
        assert not [r for r in rows if r.type == "dod.check_started"]
        # a spelling of the bound id is the bound agent; an unreadable file stays its folder's agent
        goal(fleet, "r", [check(["false"])], claim=False, agent="R")
        _ticks(w, 5)
        assert w.proj["fleet"]["agents"]["r"]["class"] == "TRABAJANDO" and "R" not in w.proj["fleet"]["agents"]
    finally:
        w.checker.close()
        w.close()


def test_a_launched_agent_s_folder_stays_its_own_across_a_restart(tmp_path):
    """The first sight after a restart is no first sight for a launched agent: ``agent.launched``
    binds ``[launch] goals_dir/AGENT/goal.json`` to AGENT."""
    import json

    from events.types_launch import AgentLaunched
    from tests.support.fwcli import fw

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n[launch]\ngoals_dir = "{fleet}"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    elog.append([AgentLaunched(agent="r", contract_sha256="x", cwd=str(fleet / "r"))], time.time())
    elog.close()
    goal(fleet, "r", [check(["true"])], agent="r2")      # renamed while the watcher was stopped
    r = fw("run", "--once", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    got = [json.loads(ln)["data"] for ln in fw("tail", "--json", "--db", str(tmp_path / "e.db")).stdout.splitlines()
           if '"agent.classified"' in ln]
    assert [(g["agent"], g["to"]) for g in got] == [("r", "MAL_LANZADO")] and "agent id changed" in got[0]["reason"]


def test_an_agent_the_fleet_knows_keeps_its_folder_across_a_restart(tmp_path):
    import json

    from tests.support.fwcli import fw

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    goal(fleet, "r", [check(["false"])], claim=False)
    assert fw("run", "--once", "--config", str(cfg)).returncode == 0
    goal(fleet, "r", [check(["true"])], agent="r2")      # renamed while the watcher was stopped
    r = fw("run", "--once", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    got = [json.loads(ln)["data"] for ln in fw("tail", "--json", "--db", str(tmp_path / "e.db")).stdout.splitlines()
           if '"agent.classified"' in ln]
    assert [(g["agent"], g["to"]) for g in got] == [("r", "TRABAJANDO"), ("r", "MAL_LANZADO")], got
    assert "agent id changed" in got[1]["reason"]
