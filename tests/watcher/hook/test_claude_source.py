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


def session_file(home, pid: int, **doc) -> None:
    d = home / ".claude" / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{pid}.json").write_text(json.dumps({"pid": pid, "kind": "interactive", "startedAt": 1, **doc}))


def files_world(tmp_path, goal: dict):
    """A goals source and a claude source reading Claude Code's session files (the real layout:
    ~/.claude/sessions/<pid>.json, a <pid>.<hash>.key beside it) in one watcher."""
    goals = tmp_path / "goals"
    (goals / "a1").mkdir(parents=True)
    (goals / "a1" / "goal.json").write_text(json.dumps({"agent": "a1", "dod_contract": "make test", **goal}))
    os.utime(goals / "a1" / "goal.json", (NOW, NOW))  # written at the virtual clock's now
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n'
                f'[[sources]]\nname = "cc"\nkind = "claude"\nglob = "{tmp_path}/.claude/sessions/*.json"\n')
    elog = EventLog(str(tmp_path / "e.db"))
    return Watcher(cfg, elog), elog


def test_a_session_joins_its_agent_by_session_id_never_as_a_second_agent(tmp_path):
    """Regression: each interactive session got an automatic name (a1-32) and became a second,
    MAL_LANZADO agent beside the goal.json one."""
    w, elog = files_world(tmp_path, {"state": "idle", "session_id": "S1", "last_activity": NOW - 5})
    session_file(tmp_path, 501, sessionId="S1", cwd="/elsewhere", name="a1-32", nameSource="derived",
                 status="idle", statusUpdatedAt=int((NOW - 5) * 1000))
    (tmp_path / ".claude" / "sessions" / "501.0123abcd.key").write_text("{}")
    session_file(tmp_path, 502, sessionId="S2", cwd="/w/other", name="b7", status="busy")
    session_file(tmp_path, 503, sessionId="S3", cwd="/w/third", name="c3-1f", status="idle", tmux="fleet:@4.%9")
    w.tick(NOW)
    agents = w.proj["fleet"]["agents"]
    assert set(agents) == {"a1", "b7"}  # S2 has no agent: its own, under its name; S3's window is tmux's
    assert agents["a1"]["source"] == "fleet" and agents["b7"]["class"] == "MAL_LANZADO"
    elog.close()


def test_an_approval_shows_as_busy_once_the_session_says_so_after_the_hook(tmp_path):
    """No hook fires when a permission is approved: the session's own status, set after the hook's
    last write (hook_at), turns waiting into busy; one set before it does not."""
    goal = {"state": "waiting", "session_id": "S1", "last_activity": NOW - 3, "hook_at": NOW - 2.5,
            "waiting_for": {"kind": "permission", "tool": "Bash"}}
    w, elog = files_world(tmp_path, goal)
    session_file(tmp_path, 501, sessionId="S1", status="busy", statusUpdatedAt=int((NOW - 2.6) * 1000))
    w.tick(NOW)
    assert w.proj["fleet"]["agents"]["a1"]["class"] == "RECLAMA"  # busy before the request: stale
    session_file(tmp_path, 501, sessionId="S1", status="busy", statusUpdatedAt=int((NOW - 1) * 1000))
    w.tick(NOW + 1)
    a = w.proj["fleet"]["agents"]["a1"]
    assert (a["class"], a["state"], a.get("waiting_for")) == ("TRABAJANDO", "busy", None)
    elog.close()


def test_a_status_without_a_time_is_timed_by_the_poll_that_first_saw_it(tmp_path):
    """Claude Code 2.1.145 writes no statusUpdatedAt and fires no hook for a denial or an Esc: an
    idle status first seen after the hook's last write makes the waiting agent idle."""
    w, elog = files_world(tmp_path, {"state": "waiting", "session_id": "S1", "hook_at": NOW + 0.5,
                                     "last_activity": NOW})
    session_file(tmp_path, 501, sessionId="S1", status="waiting")
    w.tick(NOW)
    w.tick(NOW + 1)
    assert w.proj["fleet"]["agents"]["a1"]["class"] == "RECLAMA"
    session_file(tmp_path, 501, sessionId="S1", status="idle")
    w.tick(NOW + 2)
    assert w.proj["fleet"]["agents"]["a1"]["state"] == "idle"
    elog.close()


def test_idle_never_becomes_busy_from_the_session(tmp_path):
    w, elog = files_world(tmp_path, {"state": "idle", "session_id": "S1", "hook_at": NOW - 9, "last_activity": NOW - 9})
    session_file(tmp_path, 501, sessionId="S1", status="busy", statusUpdatedAt=int(NOW * 1000))
    w.tick(NOW + 1)
    a = w.proj["fleet"]["agents"]["a1"]
    assert a["state"] == "idle"
    elog.close()


def test_hostile_session_files_are_skipped(tmp_path):
    d = tmp_path / ".claude" / "sessions"
    d.mkdir(parents=True)
    os.mkfifo(d / "9.json")                                  # would block a plain open
    (d / "8.json").write_text("x" * 100_000)                 # over the cap
    os.symlink("/etc/passwd", d / "7.json")
    (d / "6.json").write_text("[1, 2]")                      # not an object
    cfg = parse(f'[[sources]]\nname = "cc"\nkind = "claude"\nglob = "{d}/*.json"\n')
    (src,) = build_sources(cfg)
    snap = merge([src], [src.poll(NOW)])
    assert snap.results[0].ok and snap.agents == {}


def test_session_files_are_read_again_only_when_their_stat_changed(tmp_path, monkeypatch):
    """Every tick polls the session files: one unchanged since the last poll is not read again;
    a rewritten one (same size, a later mtime) is."""
    from watcher.sources import claude
    d = tmp_path / ".claude" / "sessions"
    d.mkdir(parents=True)
    f = d / "501.json"

    def write(status: str, mtime_ns: int) -> None:
        f.write_text(json.dumps({"pid": 501, "sessionId": "S1", "name": "a1", "status": status}))
        os.utime(f, ns=(mtime_ns, mtime_ns))

    write("busy", 1_700_000_000_123_456_789)
    cfg = parse(f'[[sources]]\nname = "cc"\nkind = "claude"\nglob = "{d}/*.json"\n')
    (src,) = build_sources(cfg)
    reads: list[str] = []
    real = claude._read_session_file
    monkeypatch.setattr(claude, "_read_session_file", lambda p, cap: reads.append(p) or real(p, cap))
    src.poll(NOW)
    src.poll(NOW + 2)
    assert len(reads) == 1 and [s.status for s in src.sessions] == ["busy"]
    write("idle", 1_700_000_001_123_456_789)  # "busy" and "idle": same size
    src.poll(NOW + 4)
    assert len(reads) == 2 and [s.status for s in src.sessions] == ["idle"]
    f.unlink()
    src.poll(NOW + 6)
    assert src.sessions == []
