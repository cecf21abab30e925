"""Transition lines stay within the journal's rate limit (watcher/runtime/logs.py LineBudget).

What broke: with the default INFO level, the first tick of 10,000 agents logged 10,000
transition lines at once. journald drops a service's lines past its rate limit (10,000 per 30 s
by default, 1,000 on older systemd), warnings included, so the warnings after a big first tick
could be lost, and formatting them cost ~1 s of the first tick. A virtual clock for the window;
a real ``fleetwatch run`` for the end to end."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time

from events.log import EventLog
from watcher.runtime.logs import LineBudget
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.msgs: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.msgs.append(record.getMessage())


def _logger(name: str, level: int = logging.INFO) -> tuple[logging.Logger, Lines]:
    lg = logging.getLogger(f"fleetwatch.test_budget.{name}")
    lg.propagate = False
    lg.handlers[:] = [h := Lines()]
    lg.setLevel(level)
    return lg, h


def test_a_burst_past_the_budget_is_counted_and_said_once_then_summed_up():
    lg, h = _logger("burst")
    clock = Clock()
    b = LineBudget(lg, lines=5, window_s=30, clock=clock)
    assert b.take(3) == 3 and b.take(4) == 2     # 5 in this window
    assert len(h.msgs) == 1 and "more than 5 transitions in 30 s" in h.msgs[0]
    assert b.take(10_000) == 0                   # counted, not said again
    assert len(h.msgs) == 1
    clock.t += 29.9
    assert b.take(1) == 0
    clock.t += 0.1                               # the next window: the count, then lines again
    assert b.take(2) == 2
    assert len(h.msgs) == 2 and h.msgs[1].startswith("10003 transition line(s) were not logged in the last 30 s")
    assert b.take(3) == 3 and b.take(1) == 0     # 5 again, and a new "more than" line
    assert len(h.msgs) == 3 and "more than 5" in h.msgs[2]


def test_a_quiet_window_says_nothing_and_a_clock_stepping_back_starts_a_new_window():
    lg, h = _logger("quiet")
    clock = Clock()
    b = LineBudget(lg, lines=5, window_s=30, clock=clock)
    assert b.take(5) == 5
    clock.t += 31
    assert b.take(5) == 5 and h.msgs == []       # nothing was left out: no summary
    clock.t -= 500                               # monotonic never does this; a test clock may
    assert b.take(5) == 5 and b.take(1) == 0


def test_debug_level_logs_every_line():
    lg, h = _logger("debug", logging.DEBUG)
    b = LineBudget(lg, lines=5, window_s=30, clock=Clock())
    assert b.take(10_000) == 10_000 and h.msgs == []


def _goal(root: str, agent: str, state: str = "busy") -> None:
    d = os.path.join(root, agent)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "goal.json.tmp"), "w") as f:
        json.dump({"agent": agent, "state": state, "phase": "haciendo", "dod_contract": "pytest passes",
                   "last_activity": time.time()}, f)
    os.replace(os.path.join(d, "goal.json.tmp"), os.path.join(d, "goal.json"))


def test_first_tick_of_many_agents_does_not_flood_the_journal_and_warnings_still_come(tmp_path):
    """`fleetwatch run` at INFO on 1,200 agents: at most the budget's 500 agent transition lines
    plus the line saying the rest are counted; every transition is in the log; a source's
    transition after the burst (a source failing) is still logged."""
    fleet = str(tmp_path / "fleet")
    for i in range(1200):
        _goal(fleet, f"a{i:04d}")
    broken = tmp_path / "broken"
    broken.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "200ms"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                   f'[[sources]]\nname = "other"\nkind = "goals"\nglob = "{broken}/*/goal.json"\n')
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    p = subprocess.Popen([EXE, "run", "--config", str(cfg), "--log-level", "info"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        db = str(tmp_path / "e.db")
        end = time.monotonic() + 120

        def classified() -> int:
            if not os.path.exists(db):
                return 0
            lg = EventLog(db, readonly=True)
            try:
                return sum(1 for _ in lg.read(0, types=["agent.classified"]))
            finally:
                lg.close()

        while classified() < 1200:
            assert p.poll() is None and time.monotonic() < end, "the watcher died or never classified the fleet"
            time.sleep(0.1)
        broken.rmdir()   # the second source's folder is missing now: source.failed, a warning
        while p.poll() is None and time.monotonic() < end:
            lg = EventLog(db, readonly=True)
            try:
                if any(True for _ in lg.read(0, types=["source.failed"])):
                    break
            finally:
                lg.close()
            time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    lines = err.decode().splitlines()
    assert p.returncode == 0, err.decode()[-2000:]
    transitions = [ln for ln in lines if " INFO " in ln and "agent.classified" in ln]
    assert 400 <= len(transitions) <= 500, len(transitions)
    assert sum("the rest of this window's are counted" in ln for ln in lines) == 1
    assert any("source:other source.failed" in ln for ln in lines), lines[-20:]
    assert len(lines) < 600
