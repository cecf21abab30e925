"""A reason that states a new cause within the same class is recorded (one ``agent.updated``
carrying ``reason``), so `status` / `summary` do not keep the first one forever; a reason whose
cause stays (ESTANCADO's "busy, silent for 10m" → "… 11m", a too-large file's byte count) writes
nothing. Real files, a real Watcher tick on a virtual clock, the real CLI on the log it wrote."""
from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from events.log import EventLog
from events.types import AgentUpdated, decode_data
from projections.fleet import fold as fleet
from watcher.cli import app
from watcher.config import parse
from watcher.runtime.loop import Watcher
from tests.support.fleetstep import step

NOW = 1_800_000_000.0
LIMIT = 4096  # the source's max_bytes


def _write(path, text: str) -> None:
    tmp = path.parent / ".goal.json.tmp"
    tmp.write_text(text)
    os.replace(tmp, path)


def _watcher(tmp_path, extra: str = "") -> tuple[Watcher, EventLog]:
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n{extra}'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n'
                f"max_bytes = {LIMIT}\n")
    elog = EventLog(str(tmp_path / "e.db"))
    return Watcher(cfg, elog), elog


def _cli(*args: str) -> str:
    r = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.stdout
    return r.stdout


def test_mal_lanzado_reason_follows_the_cause(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("FLEETWATCH_CONFIG", raising=False)
    monkeypatch.delenv("FLEETWATCH_DB", raising=False)
    g = tmp_path / "fleet" / "a1"
    g.mkdir(parents=True)
    goal = g / "goal.json"
    _write(goal, '{"agent": "a1", "state": "bu')                       # cut mid-write
    w, elog = _watcher(tmp_path)
    w.tick(NOW)
    w.tick(NOW + 0.5)                                                  # the two-read rule: read again
    a = w.proj["fleet"]["agents"]["a1"]
    assert (a["class"], a["reason"]) == ("MAL_LANZADO", "not JSON (truncated)")

    _write(goal, json.dumps({"agent": "a1", "state": "busy", "task": "x" * 2 * LIMIT}))
    w.tick(NOW + 1)
    a = w.proj["fleet"]["agents"]["a1"]
    want = f"too large ({goal.stat().st_size} bytes > {LIMIT})"
    assert (a["class"], a["reason"]) == ("MAL_LANZADO", want)
    head = elog.head()[0]
    last = list(elog.read(head - 1))[-1]
    assert last.type == "agent.updated" and last.event.reason == want and last.event.changed == ["reason"]

    w.tick(NOW + 2)                                                    # nothing changed: nothing written
    w.tick(NOW + 3)
    assert elog.head()[0] == head
    # a bigger file, still too large: the same cause, only its size differs: nothing written
    _write(goal, json.dumps({"agent": "a1", "state": "busy", "task": "y" * 3 * LIMIT}))
    w.tick(NOW + 4)
    assert elog.head()[0] == head
    w.close()
    elog.close()

    db = str(tmp_path / "e.db")
    agent = json.loads(_cli("status", "--json", "--db", db))["agents"][0]
    assert (agent["class"], agent["reason"]) == ("MAL_LANZADO", want)
    summary = _cli("summary", "--db", db)
    assert f"a1: {want}" in summary and "truncated" not in summary
    assert "reason=" in _cli("tail", "--db", db)                       # the event's line names it


def test_unknown_state_then_no_contract(tmp_path):
    g = tmp_path / "fleet" / "a1"
    g.mkdir(parents=True)
    goal = g / "goal.json"
    _write(goal, json.dumps({"agent": "a1", "state": "x", "dod_contract": "make test"}))
    w, elog = _watcher(tmp_path)
    w.tick(NOW)
    assert w.proj["fleet"]["agents"]["a1"]["reason"] == "unknown state 'x'"
    _write(goal, json.dumps({"agent": "a1", "state": "busy"}))
    w.tick(NOW + 1)
    a = w.proj["fleet"]["agents"]["a1"]
    assert (a["class"], a["reason"], a["state"]) == ("MAL_LANZADO", "no dod_contract", "busy")
    w.close()
    elog.close()


def test_a_reason_with_a_control_character_is_escaped_in_the_line():
    from projections.present.render import event_text

    line = event_text(AgentUpdated(agent="a1", state="busy", reason="unknown state 'x\x1b]0;t\x07\n'",
                                   changed=["reason"]))
    assert "\x1b" not in line and "\n" not in line and "\\x1b" in line and "reason=" in line


def test_estancado_ageing_reason_writes_no_event_per_tick(tmp_path):
    """busy_silence: ESTANCADO "busy, silent for 10m" ages every tick; the cause stays, so the
    log does not grow (the file is replaced each tick with the same content: read again, the agent
    is classified again, its reason's age is new)."""
    g = tmp_path / "fleet" / "a1"
    g.mkdir(parents=True)
    goal = g / "goal.json"
    body = json.dumps({"agent": "a1", "state": "busy", "phase": "haciendo", "dod_contract": "make test",
                       "last_activity": NOW})
    _write(goal, body)
    os.utime(goal, (NOW, NOW))
    w, elog = _watcher(tmp_path)
    w.tick(NOW + 1)
    w.tick(NOW + 601)
    a = w.proj["fleet"]["agents"]["a1"]
    assert (a["class"], a["reason"]) == ("ESTANCADO", "busy, silent for 10m")
    head = elog.head()[0]
    for i in range(2, 40):
        _write(goal, body)                                             # a new inode: read again
        os.utime(goal, (NOW, NOW))
        w.tick(NOW + 601 + 60 * i)
    assert elog.head()[0] == head
    assert w.proj["fleet"]["agents"]["a1"]["class"] == "ESTANCADO"
    w.close()
    elog.close()


def test_old_rows_without_reason_decode_and_keep_the_reason():
    """An agent.updated written before the field existed decodes (reason None) and leaves the
    recorded reason as it was."""
    ev = decode_data("agent.updated", b'{"agent":"a1","state":"busy","phase":null,"task":null,"target":null,'
                                      b'"last_activity":null,"source":"fleet","changed":["state"]}')
    assert isinstance(ev, AgentUpdated) and ev.reason is None
    state = fleet.initial()
    state["agents"]["a1"] = {"class": "RECLAMA", "reason": "waiting for the human", "state": "waiting"}

    class Rec:
        type, event, seq, time = "agent.updated", ev, 2, "2027-01-15T08:00:00.000Z"

    a = fleet.fold(state, Rec)["agents"]["a1"]
    assert (a["reason"], a["state"]) == ("waiting for the human", "busy")


def test_estancado_ageing_reason_through_step_with_a_new_observation_each_tick():
    """The pure machine, every tick a new (equal) observation: classified again each time, its
    reason's age new each time, no event; a change of cause (idle → busy) is one event."""
    from projections.observations import AgentObs, Snapshot

    def snap(state: str) -> Snapshot:
        return Snapshot(agents={"a1": AgentObs(agent="a1", source="fleet", state=state, phase="haciendo",
                                               contract_sha256="c" * 64, contract_len=9, last_activity=NOW)})

    st = fleet.initial()
    evs, memo = step(st, snap("idle"), NOW + 900, stall_after=900.0, busy_silence=600.0)
    assert [(e.to, e.reason) for e in evs] == [("ESTANCADO", "idle, no activity for 15m")]
    st["agents"]["a1"] = {"class": "ESTANCADO", "reason": evs[0].reason, "state": "idle", "phase": "haciendo",
                          "task": None, "target": None, "last_activity": evs[0].last_activity, "source": "fleet"}
    for i in range(1, 30):
        evs, memo = step(st, snap("idle"), NOW + 900 + 60 * i, stall_after=900.0, busy_silence=600.0,
                         memo=memo)
        assert evs == []
    evs, memo = step(st, snap("busy"), NOW + 4000, stall_after=900.0, busy_silence=600.0, memo=memo)
    assert [(type(e), e.changed, e.reason) for e in evs] == [(AgentUpdated, ["state", "reason"],
                                                             "busy, silent for 66m")]


@pytest.mark.parametrize("a,b,same", [
    ("busy, silent for 10m", "busy, silent for 3h05m", True),          # an age: the same cause
    ("idle, no activity for 15m", "idle, no activity for 2d", True),
    ("idle, no activity for 15m", "busy, silent for 15m", False),
    ("too large (5000 bytes > 4096)", "too large (9000 bytes > 4096)", True),   # a size
    ("too large (5000 bytes > 4096)", "too large (5000 bytes > 8192)", False),  # another limit
    ("too large (> 4096 bytes)", "too large (> 8192 bytes)", False),
    ("too large (> 4096 bytes)", "too large (5000 bytes > 4096)", False),
    ("not JSON (truncated)", "not JSON", False),
    ("unknown state 'x'", "unknown state 'y'", False),
    ("tmux pane dead (exit 1)", "tmux pane dead (exit 2)", False),
    ("busy", "idle within stall_after", False),
    ("disk 10 bytes > 4", "disk 11 bytes > 4", False),                # " bytes > " alone is no size
])
def test_cause_strips_measurements_only(a, b, same):
    assert (fleet.cause(a) == fleet.cause(b)) is same
