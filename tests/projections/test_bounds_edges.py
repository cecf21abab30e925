"""The other bounds, reached (issue 23): the hook's open requests (MAX_PENDING) and open tool calls
(MAX_TOOLS_OPEN) through the real hook on a real goal.json, the fan-out's birth list (KEEP), a
mission's violations (KEEP_VIOLATIONS), and the sqlite source's row cap (MAX_ROWS) on a real
database: at each bound nothing goes, past it the oldest goes, and the agent stays waiting."""
from __future__ import annotations

import json

import apsw

from events.log import Recorded, iso
from events.types import AgentClassified, FleetFanout, WpChanged, WpViolated, tag_of
from projections.fleet import fanout
from projections.missions import fold as missions
from projections.missions.fold import KEEP_VIOLATIONS
from watcher.config import parse
from watcher.hook.adapter import run_hook
from watcher.hook.mapping import MAX_PENDING, MAX_TOOLS_OPEN
from watcher.sources import build_sources
from watcher.sources.sqlite import MAX_ROWS

from tests.support.hookinput import A01, BASE, NOW

T0 = 1_800_000_000.0


def hook(goals, payload: dict) -> dict:
    assert run_hook(["--agent", "a01", "--goals-dir", str(goals)], stdin=json.dumps(payload), env={}, now=NOW) == 0
    return json.loads((goals / "a01" / "goal.json").read_text())


def seed(goals) -> None:
    p = goals / "a01" / "goal.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(A01))


def ask(actor: str) -> dict:
    return {**BASE, "hook_event_name": "PermissionRequest", "agent_id": actor, "agent_type": "general",
            "tool_name": "Bash", "tool_input": {"command": f"echo {actor}"}}


def test_open_requests_past_max_pending_drop_the_oldest_and_stay_waiting(tmp_path):
    seed(tmp_path)
    for i in range(MAX_PENDING):
        doc = hook(tmp_path, ask(f"sa_{i:02d}"))
    assert len(doc["pending"]) == MAX_PENDING and doc["state"] == "waiting"      # at the bound: all kept
    doc = hook(tmp_path, ask("sa_last"))
    actors = [p.partition("|")[0] for p in doc["pending"]]
    assert len(actors) == MAX_PENDING and actors[0] == "sa_01" and actors[-1] == "sa_last"   # the oldest went
    assert doc["state"] == "waiting"
    # the newest one answered: the others still wait
    done = {**ask("sa_last"), "hook_event_name": "PostToolUse", "tool_use_id": "t1", "tool_response": {}}
    doc = hook(tmp_path, done)
    assert doc["state"] == "waiting" and len(doc["pending"]) == MAX_PENDING - 1


def test_open_tool_calls_past_max_tools_open_drop_the_oldest(tmp_path):
    seed(tmp_path)
    for i in range(MAX_TOOLS_OPEN):
        doc = hook(tmp_path, {**BASE, "hook_event_name": "PreToolUse", "tool_use_id": f"t{i:03d}",
                              "tool_name": "Bash", "tool_input": {"command": "x"}})
    assert len(doc["tools_open"]) == MAX_TOOLS_OPEN
    doc = hook(tmp_path, {**BASE, "hook_event_name": "PreToolUse", "tool_use_id": "tlast",
                          "tool_name": "Bash", "tool_input": {"command": "x"}})
    assert doc["tools_open"][0] == "t001" and doc["tools_open"][-1] == "tlast"
    assert len(doc["tools_open"]) == MAX_TOOLS_OPEN and doc["state"] == "busy"


def _rec(seq: int, ev, t: float) -> Recorded:
    return Recorded(seq, f"id{seq}", iso(t), tag_of(ev), ev.subject, 1, ev, b"", b"")


def test_fanout_births_past_keep_are_the_newest_and_a_burst_is_reported_once():
    st = fanout.initial()
    for i in range(fanout.KEEP):
        st = fanout.fold(st, _rec(i + 1, AgentClassified(agent=f"a{i:03d}", to="TRABAJANDO"), T0))
    assert len(st["births"]) == fanout.KEEP and st["births"][0][2] == "a000"
    for i in range(fanout.KEEP, fanout.KEEP + 88):
        st = fanout.fold(st, _rec(i + 1, AgentClassified(agent=f"a{i:03d}", to="TRABAJANDO"), T0))
    assert len(st["births"]) == fanout.KEEP and st["n"] == fanout.KEEP + 88
    assert st["births"][0][2] == "a088" and st["births"][-1][2] == f"a{fanout.KEEP + 87:03d}"

    class Snap:
        agents: dict = {}

    [ev] = fanout.detect(st, Snap(), T0 + 1, fanout_max=8, fanout_window=60.0)
    assert ev.upto == fanout.KEEP + 88                       # covers every agent, also the forgotten births
    st = fanout.fold(st, _rec(10_000, FleetFanout(count=ev.count, window=60.0, agents=ev.agents, upto=ev.upto),
                              T0 + 1))
    assert fanout.detect(st, Snap(), T0 + 2, fanout_max=8, fanout_window=60.0) == []   # not reported twice


def test_mission_violations_past_keep_violations_are_the_newest():
    st = missions.initial()
    seq = 1
    st = missions.fold(st, _rec(seq, WpChanged(mission="m1", wp="w1", to="READY"), T0))
    for i in range(KEEP_VIOLATIONS + 5):
        seq += 1
        st = missions.fold(st, _rec(seq, WpViolated(mission="m1", wp="w1", rule="attempts-decreased",
                                                    detail=f"v{i}"), T0 + i))
        if i == KEEP_VIOLATIONS - 1:
            assert len(st["missions"]["m1"]["violations"]) == KEEP_VIOLATIONS
    v = st["missions"]["m1"]["violations"]
    assert [x["detail"] for x in v] == [f"v{i}" for i in range(5, KEEP_VIOLATIONS + 5)]


def test_sqlite_source_at_max_rows_is_read_and_one_more_is_too_large(tmp_path):
    db = tmp_path / "m.db"
    c = apsw.Connection(str(db))
    c.execute("CREATE TABLE wp(mission, wp, state)")
    with c:
        c.executemany("INSERT INTO wp VALUES ('m1', ?, 'READY')", ((f"w{i}",) for i in range(MAX_ROWS)))
    cfg = parse(f'[[sources]]\nname = "m"\nkind = "sqlite"\nentity = "wp"\npath = "{db}"\n'
                f'query = "SELECT mission, wp, state FROM wp"\nkey = ["mission", "wp"]\ntimeout = "15s"\n')
    src = build_sources(cfg)[0]
    r = src.poll(T0)
    assert r.ok and len(r.rows) == MAX_ROWS
    with c:
        c.execute("INSERT INTO wp VALUES ('m1', 'one-more', 'READY')")
    c.close()
    r = src.poll(T0 + 1)
    assert not r.ok and r.error_class == "too-large" and f"more than {MAX_ROWS} rows" in r.error
    src.close()
