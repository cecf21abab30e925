"""Real tmux (a private ``-L`` socket): exact window matching, ``{target}`` nudges, the nudge echo,
renamed and vanished windows. The watcher runs in-process (Watcher.tick(now), a virtual clock)
with the real Notifier sending ``tmux -L SOCK send-keys -t {target} …``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.runtime.notifier import Notifier
from tests.support.vclock import written_at

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
TEXT = "NUDGE-close-your-DoD"
STALL = 900.0


def tmux(sock: str, *args: str, check: bool = True) -> str:
    r = subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=10)
    if check and r.returncode:
        raise AssertionError(f"tmux {args}: {r.stderr}")
    return r.stdout


def goal(root, agent, **kw):
    g = {"agent": agent, "state": "idle", "phase": "haciendo", "dod_contract": f"tests for {agent}",
         "last_activity": 1_000_000_000}
    g.update(kw)
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    (d / "goal.json.tmp").write_text(json.dumps(g))
    written_at(d / "goal.json.tmp", g["last_activity"])  # on the virtual clock (tests/support/vclock.py)
    os.replace(d / "goal.json.tmp", d / "goal.json")


def pane(sock: str, target: str) -> str:
    return tmux(sock, "capture-pane", "-p", "-t", target)


def wait_for(pred, what: str, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def sock(tmp_path):
    name = f"fw-nudge-{os.getpid()}-{os.urandom(3).hex()}"
    env = {**os.environ, "TMUX": ""}
    subprocess.run(["tmux", "-L", name, "-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", "a1", "cat >/dev/null"],
                   check=True, env=env)
    try:
        tmux(name, "new-window", "-t", "fleet", "-n", "a2", "cat >/dev/null")            # a RECLAMA agent
        tmux(name, "new-window", "-t", "fleet", "-n", "a1-renamed", "cat >/dev/null")    # a prefix of nothing, an extension of a1
        tmux(name, "new-session", "-d", "-s", "other", "-n", "a1", "cat >/dev/null")     # same name, another session
        tmux(name, "new-session", "-d", "-s", "fleetx", "-n", "a1", "cat >/dev/null")    # a session whose name extends fleet
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)


def classes(elog, agent):  # (the subject filter is a prefix: a1 would also match a1-renamed)
    return [(r.event.to, r.event.reason) for r in elog.read(0, types=["agent.classified"], subject=f"agent:{agent}")
            if r.event.agent == agent]


def nudged(elog, agent):
    return [r.event for r in elog.read(0, types=["agent.nudged"], subject=f"agent:{agent}") if r.event.agent == agent]


def test_target_nudge_reaches_a_stalled_pane_once_per_stall_never_a_reclama_one(tmp_path, sock):
    fleet = tmp_path / "fleet"
    goal(fleet, "a1")
    goal(fleet, "a2", state="waiting")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[classify]\nstall_after = "15m"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\nsession = "fleet"\n'
                f'[nudge]\nenabled = true\nmax_per_stall = 1\ngap = "5m"\n'
                f'argv = ["tmux", "-L", "{sock}", "send-keys", "-t", "{{target}}", "{TEXT}", "Enter"]\n')
    elog = EventLog(str(tmp_path / "e.db"))
    n = Notifier(cfg)
    w = Watcher(cfg, elog, notifier=n)
    pc = max(float(x) for x in tmux(sock, "list-windows", "-t", "=fleet", "-F", "#{window_activity}").split())
    # the nudge must land in a later second than the panes' own start (window_activity has 1 s steps),
    # so that its echo, if counted, would be recent activity
    wait_for(lambda: time.time() >= pc + 3, "3 s of quiet panes")
    t0 = pc + STALL + 1
    w.tick(t0)
    assert classes(elog, "a1")[-1][0] == "ESTANCADO" and classes(elog, "a2")[-1][0] == "RECLAMA"
    assert w.proj["fleet"]["agents"]["a1"]["target"] == "=fleet:0"  # exact, recorded in the log
    assert n.drain(10)
    wait_for(lambda: TEXT in pane(sock, "=fleet:0"), "the nudge in a1's pane")
    for dt in (0.5, 1.0, 2.0, 30.0, 301.0, 900.0):  # echo, gap and max_per_stall: no flip, no second nudge
        w.tick(t0 + dt)
        assert n.drain(10)
    assert [c for c, _ in classes(elog, "a1")] == ["ESTANCADO"]
    assert [(e.attempt, e.ok) for e in nudged(elog, "a1")] == [(1, True)]
    assert pane(sock, "=fleet:0").count(TEXT) == 1
    assert nudged(elog, "a2") == [] and TEXT not in pane(sock, "=fleet:1")            # never a RECLAMA agent
    for decoy in ("=fleet:2", "=other:0", "=fleetx:0"):                              # nor a look-alike window
        assert TEXT not in pane(sock, decoy), decoy
    # a second stall: the agent worked again (hook: busy), then went quiet -> exactly one more nudge
    t1 = t0 + 1000
    goal(fleet, "a1", state="busy", last_activity=t1)
    w.tick(t1 + 1)
    goal(fleet, "a1", state="idle", last_activity=t1 + 2)
    w.tick(t1 + 3)
    w.tick(t1 + 2 + STALL + 1)
    assert n.drain(10)
    wait_for(lambda: pane(sock, "=fleet:0").count(TEXT) == 2, "the second nudge")
    for dt in (2.0, 3.0, 400.0):
        w.tick(t1 + 2 + STALL + dt)
        assert n.drain(10)
    assert [c for c, _ in classes(elog, "a1")] == ["ESTANCADO", "TRABAJANDO", "ESTANCADO"]
    assert len(nudged(elog, "a1")) == 2 and pane(sock, "=fleet:0").count(TEXT) == 2
    assert nudged(elog, "a2") == [] and TEXT not in pane(sock, "=fleet:1")
    n.close()
    elog.close()


def hooked(sock: str, target: str) -> dict:
    """The ``tmux`` record the hook writes into goal.json from inside the pane ($TMUX, $TMUX_PANE),
    with the pane's own process standing for the agent's (alive while the pane is)."""
    out = tmux(sock, "display-message", "-p", "-t", target, "#{socket_path}\t#{pane_id}\t#{pane_pid}").strip()
    path, pane_id, pid = out.split("\t")
    return {"socket": path, "pane": pane_id, "pid": int(pid)}


def test_renamed_window_keeps_its_agent_and_a_gone_window_closes_it(tmp_path, sock):
    """The agents' hooks recorded their panes: a renamed window keeps its agent, a window (or a
    session) gone closes it (a window matched by name alone would close nothing, issue 47)."""
    fleet = tmp_path / "fleet"
    now = time.time()
    goal(fleet, "a1", state="busy", last_activity=now, tmux=hooked(sock, "=fleet:0"))
    goal(fleet, "a2", state="waiting", last_activity=now, tmux=hooked(sock, "=fleet:1"))
    goal(fleet, "a9", state="busy", last_activity=now)   # never in tmux
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\nsession = "fleet"\n')
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(now)
    agents = w.proj["fleet"]["agents"]
    assert (agents["a1"]["target"], agents["a2"]["target"]) == ("=fleet:0.0", "=fleet:1.0")  # the exact panes
    tmux(sock, "rename-window", "-t", "=fleet:1", "renamed-by-user")
    w.tick(now + 2)
    assert classes(elog, "a2")[-1][0] == "RECLAMA"  # still linked, not gone
    tmux(sock, "kill-window", "-t", "=fleet:0")     # a1's window is gone: fleet:a1-renamed does not mask it
    w.tick(now + 4)
    assert classes(elog, "a1")[-1] == ("CERRADO", "tmux window gone")
    w.tick(now + 6)
    assert classes(elog, "a1")[-1] == ("CERRADO", "tmux window gone")  # edge-triggered: once
    assert len(classes(elog, "a1")) == 2
    tmux(sock, "kill-session", "-t", "=fleet")     # the whole session: a2 too
    w.tick(now + 8)
    assert classes(elog, "a2")[-1] == ("CERRADO", "tmux window gone")
    assert classes(elog, "a9") == [("TRABAJANDO", "busy")]  # never seen in tmux: not closed by it
    elog.close()


def test_goal_target_wins_and_is_exact(tmp_path, sock):
    """A target in goal.json names the window; a window merely named like the agent never masks it."""
    from watcher.sources import build_sources, merge

    fleet = tmp_path / "fleet"
    goal(fleet, "a1", target="other:0")              # the agent lives in session other
    goal(fleet, "a3", target="fleet:a3")             # by name; only fleet:a1-renamed and others exist
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\n')
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(0) for s in srcs])
    assert snap.agents["a1"].target == "=other:0" and not snap.agents["a1"].tmux_missing
    assert snap.agents["a3"].tmux_missing and snap.agents["a3"].target is None  # no prefix match, not passed on
    scoped = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                   f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\nsession = "fleet"\n')
    srcs = build_sources(scoped)
    snap = merge(srcs, [s.poll(0) for s in srcs])
    # outside the configured session: not this source's window, and its target is not passed on
    assert snap.agents["a1"].tmux_missing and snap.agents["a1"].target is None
