"""Real tmux (a private ``-L`` socket), the watcher in-process: a tmux poll that fails (the
server hangs: SIGSTOP) dropped every fact tmux had given for that tick. An agent CERRADO
"tmux pane dead (exit 3)" was recorded CERRADO -> TRABAJANDO, then back to CERRADO when tmux
answered again; a busy agent alive only through its pane turned ESTANCADO "busy, silent". A
failed source changes nothing: its last known windows stand."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher

from tests.support.tmuxserver import tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def goal(root, agent, last_activity, **extra):
    d = root / agent
    d.mkdir(parents=True)
    p = d / "goal.json"
    p.write_text(json.dumps({"agent": agent, "state": "busy", "dod_contract": "tests",
                             "last_activity": last_activity, **extra}))
    os.utime(p, (last_activity, last_activity))


def classes(elog, agent):
    return [(r.event.to, r.event.reason) for r in elog.read(0, types=["agent.classified"], subject=f"agent:{agent}")
            if r.event.agent == agent]


@pytest.mark.parametrize("restart", [False, True])
def test_a_failed_tmux_poll_neither_reopens_a_dead_pane_nor_stalls_a_busy_agent(tmp_path, restart):
    """restart: the watcher starts again while tmux hangs, so this process never had an answer
    from it: the tmux facts the log recorded stand."""
    sock = f"fw-failpoll-{os.getpid()}-{os.urandom(3).hex()}"
    tmux(sock, "-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", "a1", "sleep 600")
    server = int(tmux(sock, "display", "-p", "#{pid}"))
    try:
        tmux(sock, "set", "-g", "remain-on-exit", "on")
        tmux(sock, "new-window", "-t", "fleet", "-n", "a2", "exit 3")
        for _ in range(200):  # a2's command has exited (the pane stays, dead)
            if "1:" in tmux(sock, "list-windows", "-t", "=fleet", "-F", "#{pane_dead}:"):
                break
            time.sleep(0.05)
        now = time.time()
        fleet = tmp_path / "fleet"
        goal(fleet, "a1", now - 3600)   # busy, silent in goal.json for an hour: alive through its pane
        goal(fleet, "a2", now - 5, target="fleet:1")   # its own window (a name alone closes nothing)
        cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[classify]\nbusy_silence = "10m"\n'
                    f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                    f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\ntimeout = "1s"\n')
        elog = EventLog(str(tmp_path / "e.db"))
        w = Watcher(cfg, elog)
        try:
            w.tick(now)
            assert classes(elog, "a1") == [("TRABAJANDO", "busy")]
            dead = classes(elog, "a2")  # "tmux pane dead (exit 3)" (tmux may not have the status yet)
            assert len(dead) == 1 and dead[0][0] == "CERRADO" and dead[0][1].startswith("tmux pane dead"), dead
            os.kill(server, signal.SIGSTOP)   # tmux hangs: its polls fail (pending, then timed out)
            try:
                if restart:
                    w.close()
                    w = Watcher(cfg, elog)
                for i in range(1, 4):
                    w.tick(now + 2 * i)
                failed = [r.event.source for r in elog.read(0, types=["source.failed"])]
            finally:
                os.kill(server, signal.SIGCONT)
            assert failed == ["tm"]
            assert classes(elog, "a1") == [("TRABAJANDO", "busy")]
            assert classes(elog, "a2") == dead
            assert w.proj["fleet"]["agents"]["a1"]["target"] == "=fleet:0"
            assert [r.event.changed for r in elog.read(0, types=["agent.updated"])] == []
        finally:
            w.close()
            elog.close()
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
