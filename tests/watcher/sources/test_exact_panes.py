"""Exact panes, not names (issue 47 item 5, issue 43's "claude killed inside a live shell pane").

Real tmux (private ``-L`` servers), real processes, the watcher in-process on a virtual clock.
The hook records the pane it runs in (goal.json ``tmux``: ``$TMUX``'s socket path, ``$TMUX_PANE``,
the claude pid when known); the watcher judges liveness by that pane only. A window matched by
its name alone never closes an agent; a stranger's dead window named like an agent closes nothing.
A Claude Code process killed inside a pane whose shell lives on is seen from the pane's process
tree (``/proc``), never from the screen. The real-client kill -9 is in test_realclient_kill.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.sources import panes

from tests.support.tmuxserver import Server, goal
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


@pytest.fixture
def srv():
    s = Server("fw-exact")
    yield s
    s.close()


def watcher(tmp_path, srv, session: str | None = None) -> tuple[Watcher, EventLog]:
    fleet = tmp_path / "fleet"
    scope = f'session = "{session}"\n' if session else ""
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{srv.name}"\n{scope}')
    elog = EventLog(str(tmp_path / "e.db"))
    return Watcher(cfg, elog), elog


def classes(elog, agent):
    return [(r.event.to, r.event.reason) for r in elog.read(0, types=["agent.classified"], subject=f"agent:{agent}")
            if r.event.agent == agent]


def fake_claude(tmp_path) -> str:
    """A real process named ``claude`` (``comm``), as Claude Code's own: a link to sleep."""
    p = tmp_path / "bin" / "claude"
    p.parent.mkdir(exist_ok=True)
    p.symlink_to(shutil.which("sleep"))
    return str(p)


def child_named(pid: int, name: str, timeout: float = 20.0) -> int:
    def find():
        for c in panes.children(pid):
            if panes._read(f"/proc/{c}/comm").strip() == name.encode():
                return c
        return None
    return wait_for(find, timeout=timeout)


def test_a_strangers_dead_window_named_like_an_agent_closes_nothing(tmp_path, srv):
    """Issue 47 #6: a window a1 in another session, whose pane exited, made agent a1 CERRADO "tmux
    pane dead" while a1's goal.json said waiting (the name-matching rule)."""
    srv.run("set", "-g", "remain-on-exit", "on")
    srv.run("new-session", "-d", "-s", "other", "-n", "a1", "exit 3")
    wait_for(lambda: "1" in srv.run("list-panes", "-t", "=other", "-F", "#{pane_dead}"))
    goal(tmp_path / "fleet", "a1", state="waiting")
    w, elog = watcher(tmp_path, srv)
    now = time.time()
    for i in range(3):
        w.tick(now + 2 * i)
    assert classes(elog, "a1") == [("RECLAMA", "waiting for the human")]
    w.close()


def test_a_window_matched_by_name_alone_never_closes_its_agent(tmp_path, srv):
    srv.window("a1")
    goal(tmp_path / "fleet", "a1", state="busy", last_activity=time.time())
    w, elog = watcher(tmp_path, srv, session="fleet")
    now = time.time()
    w.tick(now)
    assert w.proj["fleet"]["agents"]["a1"]["target"] == "=fleet:1"   # activity and a target, by name
    srv.run("kill-window", "-t", "=fleet:a1")
    for i in range(1, 4):
        w.tick(now + 2 * i)
    assert classes(elog, "a1") == [("TRABAJANDO", "busy")]
    w.close()


def test_the_recorded_pane_wins_over_a_namesake_and_its_end_closes_the_agent(tmp_path, srv):
    """a1's hook recorded pane %N in window 'work'; a window named a1 (a stranger's) is not a1's.
    Killing the namesake changes nothing; the recorded pane going closes a1."""
    mine = srv.window("work")
    srv.window("a1")
    pid = int(srv.fmt(mine, "#{pane_pid}"))
    goal(tmp_path / "fleet", "a1", state="busy", last_activity=time.time(), tmux=srv.record(mine, pid))
    w, elog = watcher(tmp_path, srv)
    now = time.time()
    w.tick(now)
    assert w.proj["fleet"]["agents"]["a1"]["target"] == "=fleet:1.0"
    srv.run("kill-window", "-t", "=fleet:a1")
    w.tick(now + 2)
    assert classes(elog, "a1") == [("TRABAJANDO", "busy")]
    srv.run("kill-pane", "-t", mine)
    w.tick(now + 4)
    assert classes(elog, "a1")[-1] == ("CERRADO", "tmux window gone")
    w.close()


def test_a_pane_recorded_on_another_server_is_not_this_sources(tmp_path, srv):
    other = Server("fw-exact-other")
    try:
        pane = other.window("a1")
        srv.window("a1", "exit 0")          # this server's namesake: gone at once
        goal(tmp_path / "fleet", "a1", state="busy", last_activity=time.time(), tmux=other.record(pane))
        w, elog = watcher(tmp_path, srv)
        now = time.time()
        for i in range(3):
            w.tick(now + 2 * i)
        assert classes(elog, "a1") == [("TRABAJANDO", "busy")]
        assert w.proj["fleet"]["agents"]["a1"].get("target") is None   # nothing typed into a stranger's pane
        w.close()
    finally:
        other.close()


@pytest.mark.parametrize("with_pid", [False, True])
def test_claude_killed_inside_a_live_shell_pane_closes_the_agent(tmp_path, srv, with_pid):
    """Issue 43: `claude` killed (-9) in a shell pane fires no SessionEnd and the pane lives on; it
    stayed TRABAJANDO. The recorded pane's process tree has no claude process left: CERRADO.
    ``with_pid``: the hook recorded claude's pid (else any claude process of the pane counts)."""
    exe = fake_claude(tmp_path)
    pane = srv.window("work", "bash --norc --noprofile")
    shell = int(srv.fmt(pane, "#{pane_pid}"))
    srv.run("send-keys", "-t", pane, f"{exe} 600", "Enter")
    claude = child_named(shell, "claude")
    goal(tmp_path / "fleet", "a1", state="busy", last_activity=time.time(),
         tmux=srv.record(pane, claude if with_pid else None))
    w, elog = watcher(tmp_path, srv)
    now = time.time()
    for i in range(3):   # the first poll is asked about the pane, the next ones answer
        w.tick(now + 2 * i)
    assert classes(elog, "a1") == [("TRABAJANDO", "busy")]
    os.kill(claude, signal.SIGKILL)
    wait_for(lambda: not panes.alive(claude))
    for i in range(3, 5):
        w.tick(now + 2 * i)
    assert classes(elog, "a1")[-1] == ("CERRADO", "claude exited: no claude process left in its tmux pane")
    assert srv.fmt(pane, "#{pane_dead}") == "0"     # the shell lives on
    # claude started again in the same pane (its SessionStart hook rewrites goal.json): back
    srv.run("send-keys", "-t", pane, f"{exe} 600", "Enter")
    again = child_named(shell, "claude")
    goal(tmp_path / "fleet", "a1", state="idle", last_activity=time.time(),
         tmux=srv.record(pane, again if with_pid else None))
    for i in range(5, 8):
        w.tick(now + 2 * i)
    assert classes(elog, "a1")[-1][0] == "TRABAJANDO"
    w.close()


def test_claude_in_finds_the_pane_process_itself_and_descendants(tmp_path, srv):
    exe = fake_claude(tmp_path)
    direct = srv.window("direct", f"{exe} 600")                       # tmux new-window claude
    nested = srv.window("nested", f"bash -c '{exe} 600; sleep 600'")  # a child of the pane's shell
    plain = srv.window("plain", "sleep 600")
    pid = {p: int(srv.fmt(p, "#{pane_pid}")) for p in (direct, nested, plain)}
    wait_for(lambda: panes.claude_in(pid[nested]))
    assert panes.claude_in(pid[direct]) is True
    assert panes.claude_in(pid[plain]) is False
    assert panes.claude_in(pid[plain], pid[plain]) is True       # a recorded pid alive in the pane's tree
    assert panes.claude_in(pid[plain], os.getpid()) is False     # alive, but not in that pane
    assert panes.claude_in(2 ** 22 + 7) is None                  # no such pane process: nothing said


def test_on_the_default_server_unscoped_no_window_is_an_agents_by_its_name(tmp_path, monkeypatch):
    """A tmux source with neither socket nor session reads the default server, every session of
    it: a window named a1 there (a stranger's) is not agent a1's (no target, so no nudge typed
    into it); the pane a1's hook recorded still is. The default server is made private to the
    test through $TMUX_TMPDIR."""
    import subprocess

    from watcher.sources import build_sources, merge

    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    monkeypatch.delenv("TMUX", raising=False)
    subprocess.run(["tmux", "-f", "/dev/null", "new-session", "-d", "-s", "other", "-n", "a1", "sleep 600"], check=True)
    try:
        mine = subprocess.run(["tmux", "new-window", "-d", "-P", "-F", "#{pane_id}\t#{socket_path}", "-t", "=other:",
                               "-n", "work", "sleep 600"], check=True, capture_output=True, text=True).stdout.strip()
        pane, path = mine.split("\t")
        goal(tmp_path / "fleet", "a1", state="waiting")
        goal(tmp_path / "fleet", "a2", state="busy", tmux={"socket": path, "pane": pane})
        cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n'
                    f'[[sources]]\nname = "tm"\nkind = "tmux"\n')
        srcs = build_sources(cfg)
        snap = merge(srcs, [s.poll(0) for s in srcs])
        assert snap.agents["a1"].target is None and not snap.agents["a1"].tmux_exact
        assert snap.agents["a2"].target == "=other:1.0" and snap.agents["a2"].tmux_exact
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True)
