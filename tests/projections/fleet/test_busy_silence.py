"""[classify] busy_silence: busy, with no hook event and no pane activity that long, is ESTANCADO
(an Esc can fire no hook at all; a background task may never end). Longer while a tool call is open."""
from __future__ import annotations

import math
import os

import pytest

from events.log import EventLog
from projections.fleet import fold as fleet
from projections.classes import Cls
from projections.fleet.fold import _due, classify
from projections.observations import AgentObs, Snapshot
from watcher.config import parse
from watcher.runtime.loop import Watcher
from tests.support.fleetstep import step
from watcher.runtime.schedule import FleetTicker

NOW = 1_800_000_000.0
BS, TOOL, STALL = 600.0, 3600.0, 900.0


def obs(**kw) -> AgentObs:
    base = dict(agent="a1", source="fleet", state="busy", phase="haciendo", contract_sha256="x" * 64,
                contract_len=5, last_activity=NOW)
    base.update(kw)
    return AgentObs(**base)


@pytest.mark.parametrize("o,silent,want", [
    (obs(), BS - 1, Cls.TRABAJANDO),
    (obs(), BS, Cls.ESTANCADO),                              # busy, silent for 10m
    (obs(tool_open=True), BS, Cls.TRABAJANDO),               # a tool call is open: the longer limit
    (obs(tool_open=True), TOOL, Cls.ESTANCADO),
    (obs(state="waiting"), 10 * TOOL, Cls.RECLAMA),          # waiting is never a stall
    (obs(phase="bloqueado"), 10 * TOOL, Cls.RECLAMA),
    (obs(last_activity=None), 10 * TOOL, Cls.TRABAJANDO),    # no clock to judge by
])
def test_busy_silence_rows(o, silent, want):
    la = o.last_activity if o.last_activity is not None else NOW
    cls, reason = classify(o, la + silent, STALL, BS, TOOL)
    assert cls is want, reason
    if want is Cls.ESTANCADO:
        assert reason.startswith("busy, silent for ")
    assert classify(o, la + silent, STALL)[0] in (Cls.TRABAJANDO, Cls.RECLAMA)  # off: busy never stalls


@pytest.mark.parametrize("tool_open", [False, True])
def test_window_bound_agrees_with_classify_for_busy(tool_open):
    o = obs(last_activity=NOW + 0.1, tool_open=tool_open)
    hi = _due(o, Cls.TRABAJANDO, STALL, BS, TOOL)
    # hi: the last instant it is still TRABAJANDO (the scheduler looks again from hi on)
    assert classify(o, hi, STALL, BS, TOOL)[0] is Cls.TRABAJANDO
    assert classify(o, math.nextafter(hi, math.inf), STALL, BS, TOOL)[0] is Cls.ESTANCADO
    assert _due(o, Cls.ESTANCADO, STALL, BS, TOOL) == math.inf   # no clock time ends a stall
    assert _due(o, Cls.TRABAJANDO, STALL) == math.inf  # off: no time-driven change


def test_memo_turns_a_silent_busy_agent_estancado_by_time_alone():
    snap = Snapshot(agents={"a1": obs()})
    state = fleet.initial()
    evs, memo = step(state, snap, NOW, stall_after=STALL, busy_silence=BS, busy_silence_tool=TOOL)
    assert [e.to for e in evs] == ["TRABAJANDO"]
    state["agents"]["a1"] = {"class": "TRABAJANDO", "target": None, "state": "busy", "phase": "haciendo",
                             "task": None, "last_activity": None, "source": "fleet"}
    evs, memo = step(state, snap, NOW + BS - 1, stall_after=STALL, busy_silence=BS, busy_silence_tool=TOOL, memo=memo)
    assert [e.to for e in evs if e.__struct_config__.tag == "agent.classified"] == []
    evs, memo = step(state, snap, NOW + BS, stall_after=STALL, busy_silence=BS, busy_silence_tool=TOOL, memo=memo)
    assert [(e.to, e.reason) for e in evs] == [("ESTANCADO", "busy, silent for 10m")]
    assert isinstance(memo, FleetTicker)


def test_config_default_is_ten_minutes_through_the_watcher(tmp_path):
    """A Stop with a never-ending background task left the agent busy: 10 min later it is ESTANCADO."""
    import json

    g = tmp_path / "fleet" / "a1"
    g.mkdir(parents=True)
    (g / "goal.json").write_text(json.dumps({"agent": "a1", "state": "busy", "phase": "haciendo",
                                             "dod_contract": "make test", "last_activity": NOW,
                                             "hook_event": "Stop"}))
    os.utime(g / "goal.json", (NOW, NOW))  # written at NOW on the virtual clock (no activity after the mtime)
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n')
    assert cfg.dur("classify.busy_silence") == 600 and cfg.dur("classify.busy_silence_tool") == 3600
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(NOW + 1)
    w.tick(NOW + 599)
    assert w.proj["fleet"]["agents"]["a1"]["class"] == "TRABAJANDO"
    w.tick(NOW + 601)
    assert (w.proj["fleet"]["agents"]["a1"]["class"], w.proj["fleet"]["agents"]["a1"]["reason"]) == \
        ("ESTANCADO", "busy, silent for 10m")
    elog.close()
