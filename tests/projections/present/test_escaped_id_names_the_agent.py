"""An agent whose id holds a control character (``wt`` ESC ``[1m``) is shown escaped everywhere
(``wt\\x1b[1m``). Typed as shown, `verdict`, `silence` and `check` refused it ("unknown agent",
"did you mean: wt\\x1b[1m?" naming the very text typed): only the raw ESC, typed with $'...', was
accepted. The escaped form now names the agent. Real goal.json, real `fleetwatch` processes."""
from __future__ import annotations

import json
import os
import subprocess
from tests.support.exe import FLEETWATCH

RAW = "wt\x1b[1m"
SHOWN = "wt\\x1b[1m"


def test_the_id_as_status_shows_it_names_the_agent_in_verdict_silence_and_check(tmp_path):
    goal = tmp_path / "fleet" / "wt" / "goal.json"
    goal.parent.mkdir(parents=True)
    goal.write_text(json.dumps({"agent": RAW, "state": "idle", "phase": "hecho", "cwd": str(tmp_path),
                                "dod_contract": [{"id": "t", "kind": "cmd", "cmd": ["true"]}]}))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}

    def fw(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([FLEETWATCH, *args, "--config", str(cfg)], capture_output=True, text=True,
                              timeout=60, env=env)

    assert fw("run", "--once").returncode == 0
    assert SHOWN in fw("status").stdout
    r = fw("verdict", SHOWN, "met", "--verifier", "me", "--evidence", "ran it")
    assert r.returncode == 0, r.stderr
    r = fw("silence", SHOWN, "--for", "1h")
    assert r.returncode == 0, r.stderr
    r = fw("check", SHOWN, "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["agent"] == RAW
    ev = [json.loads(x) for x in fw("tail", "--json", "-n", "2").stdout.splitlines()]
    assert ev[0]["type"] == "dod.verdict" and ev[0]["data"]["agent"] == RAW
    assert ev[1]["type"] == "silence.added" and ev[1]["data"]["subject_match"] == "agent:wt\x1b[[]1m"
    r = fw("verdict", "wt\\x1b[2m", "met", "--verifier", "me", "--evidence", "e")   # no such agent: refused
    assert r.returncode == 2 and "unknown agent" in r.stderr


def test_tail_subject_typed_as_tail_prints_it_finds_that_agents_events(tmp_path):
    from events.log import EventLog
    from events.types import AgentClassified

    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", reason="r") for a in (RAW, "wt", "b\\x")],
               1.8e9)
    log.close()
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}

    def subjects(subject: str) -> list[str]:
        r = subprocess.run([FLEETWATCH, "tail", "--json", "--subject", subject, "--db", db], capture_output=True,
                           text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        return [json.loads(x)["subject"] for x in r.stdout.splitlines()]

    shown = subprocess.run([FLEETWATCH, "tail", "--db", db], capture_output=True, text=True, env=env).stdout
    assert f"agent:{SHOWN} " in shown and "agent:b\\\\x " in shown
    assert subjects(SHOWN) == [f"agent:{RAW}"] == subjects(f"agent:{SHOWN}")
    assert subjects("b\\\\x") == ["agent:b\\x"] == subjects("b\\x")    # as shown, and as written
    assert subjects("wt\\x1b[2m") == []


def test_ack_subject_typed_as_its_hint_prints_it_acknowledges_that_agent(tmp_path):
    from events.log import EventLog
    from events.types import AgentClassified

    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=RAW, to="RECLAMA", state="waiting", reason="r")], 1.8e9)
    log.close()
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}

    def ack(target: str) -> subprocess.CompletedProcess:
        return subprocess.run([FLEETWATCH, "ack", target, "--db", db], capture_output=True, text=True, timeout=60,
                              env=env)

    r = ack("nope")
    assert r.returncode == 2 and f"agent:{SHOWN}" in r.stderr           # the hint names it escaped
    r = ack(SHOWN)
    assert r.returncode == 0 and r.stdout.startswith(f"acknowledged agent:{SHOWN} RECLAMA"), r.stderr
    [rec] = list(EventLog(db, create=False, readonly=True).last(1, types=["notice.acked"]))
    assert rec.event.conditions and all(c.startswith(f"agent:{RAW}|") or RAW in c for c in rec.event.conditions)
