"""``kind = "claude"``: Claude Code's session list (``claude agents --json``, Claude Code >= 2.1.145)
as a source, with a stand-in ``claude`` script on PATH printing the documented shape."""
from __future__ import annotations

import json
import os
import stat

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.sources import build_sources, merge
from watcher.sources.claude import entry_to_obs

NOW = 1_800_000_000.0
# the documented entry: pid, cwd, kind, startedAt always; sessionId, name, status (busy|waiting|idle)
# and state (working|blocked|done) when set
LIST = [
    {"pid": 4101, "cwd": "/w/a7", "kind": "background", "startedAt": "2026-12-01T08:00:00Z",
     "sessionId": "9f1c2d3e-0000-4000-8000-000000000007", "name": "a7", "status": "waiting", "state": "blocked"},
    {"pid": 4102, "cwd": "/w/b2", "kind": "interactive", "startedAt": "2026-12-01T08:01:00Z",
     "sessionId": "9f1c2d3e-0000-4000-8000-0000000000b2", "status": "busy", "state": "working"},
    {"pid": 4103, "cwd": "/w/c3", "kind": "background", "startedAt": "2026-12-01T08:02:00Z",
     "name": "c3", "state": "done"},
    {"pid": 4104, "cwd": "/w/x", "kind": "interactive", "startedAt": "2026-12-01T08:03:00Z"},  # nothing set yet
]


def stand_in(tmp_path, monkeypatch, body: str):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    p = bindir / "claude"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_documented_entries_map_to_agents():
    got = [entry_to_obs(e, "cc") for e in LIST]
    assert [(o.agent, o.state, o.phase) for o in got[:3]] == [
        ("a7", "waiting", "bloqueado"), ("9f1c2d3e-0000-4000-8000-0000000000b2", "busy", "haciendo"),
        ("c3", "idle", "hecho")]
    assert got[3] is None  # no id yet: not trackable
    assert entry_to_obs("junk", "cc") is None and entry_to_obs({"name": "z"}, "cc").error


def test_claude_on_path_feeds_the_fleet(tmp_path, monkeypatch):
    stand_in(tmp_path, monkeypatch, f"[ \"$1 $2\" = 'agents --json' ] || exit 3\ncat <<'J'\n{json.dumps(LIST)}\nJ\n")
    goals = tmp_path / "goals"
    (goals / "a7").mkdir(parents=True)
    (goals / "a7" / "goal.json").write_text(json.dumps(
        {"agent": "a7", "state": "waiting", "dod_contract": "make test", "last_activity": NOW}))
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n'
                f'[[sources]]\nname = "cc"\nkind = "claude"\n')
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(NOW)
    agents = w.proj["fleet"]["agents"]
    assert agents["a7"]["class"] == "RECLAMA" and agents["a7"]["source"] == "fleet"   # goal.json gives the agent
    assert agents["c3"]["class"] == "MAL_LANZADO" and agents["c3"]["reason"] == "no dod_contract"
    assert agents["9f1c2d3e-0000-4000-8000-0000000000b2"]["state"] == "busy"
    # the session list shrinks: the session that left is CERRADO after the usual two misses
    stand_in(tmp_path, monkeypatch, f"cat <<'J'\n{json.dumps(LIST[:2])}\nJ\n")
    w.tick(NOW + 2)
    w.tick(NOW + 4)
    assert w.proj["fleet"]["agents"]["c3"]["class"] == "CERRADO"
    elog.close()


def test_claude_failures_are_a_failed_source(tmp_path, monkeypatch):
    cfg = parse('[[sources]]\nname = "cc"\nkind = "claude"\ntimeout = "1s"\n')
    for body, want in (("echo 'not json'\n", "bad output"), ("echo '{}'\n", "not a JSON array"),
                       ("exit 2\n", "exit status 2"), ("sleep 30\n", "timed out")):
        stand_in(tmp_path, monkeypatch, body)
        (src,) = build_sources(cfg)
        res = merge([src], [src.poll(NOW)]).results[0]
        assert not res.ok and want in (res.error or ""), (body, res.error)
