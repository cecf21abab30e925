"""Real tmux (a private ``-L`` socket): tmux prints a window name raw in ``list-windows -F``, a
newline or a U+2028 in it included. The tmux source split its output into lines, so a window named
``"a3\\nx"`` was read as a window ``a3`` (agent a3 linked to it: its nudges typed into that pane),
and a name could even forge a whole record (another index, another window id)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from watcher.config import parse

from tests.support.tmuxserver import tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


@pytest.fixture
def sock():
    name = f"fw-names-{os.getpid()}-{os.urandom(3).hex()}"
    tmux(name, "-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", "a1", "sleep 600")
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)


def goal(root, agent):
    d = root / agent
    d.mkdir(parents=True)
    (d / "goal.json").write_text(json.dumps({"agent": agent, "state": "busy", "dod_contract": "tests"}))


def test_a_window_name_with_a_newline_does_not_mask_an_agent_or_forge_a_window(tmp_path, sock):
    from watcher.sources import build_sources, merge

    forged = "x\nfleet\t$0\t7\t@99\t0\t0\t\t0\ta4"    # a name holding a whole list-windows record
    for name in ("a2\u2028junk", "a3\nx", forged, "a5\tq"):
        tmux(sock, "new-window", "-t", "fleet", "-n", name, "sleep 600")
    fleet = tmp_path / "fleet"
    for agent in ("a1", "a2", "a3", "a4", "a5"):
        goal(fleet, agent)
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\n')
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(0) for s in srcs])
    tm = next(s for s in srcs if s.kind == "tmux")
    assert sorted(w.name for w in tm.wins) == sorted(["a1", "a2\u2028junk", "a3\nx", forged, "a5\tq"])
    assert snap.agents["a1"].target == "=fleet:0" and not snap.agents["a1"].tmux_missing
    for agent in ("a2", "a3", "a4", "a5"):   # no window is named exactly like them
        assert snap.agents[agent].tmux_missing and snap.agents[agent].target is None, agent


def test_a_window_named_in_utf8_is_matched_under_a_locale_that_is_not_utf8(tmp_path, sock, monkeypatch):
    """Without a UTF-8 locale (LANG/LC_ALL of a service, a cron job) tmux printed every non-ASCII
    character of a name as '_': agent café lost its window, and a window 'aé1' could pass for
    'a_1'. The source runs tmux -u."""
    from watcher.sources import build_sources, merge

    for name in ("café", "aé1"):
        tmux(sock, "new-window", "-t", "fleet", "-n", name, "sleep 600")
    fleet = tmp_path / "fleet"
    for agent in ("café", "a__1", "a_1"):
        goal(fleet, agent)
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\n')
    monkeypatch.setenv("LC_ALL", "en_US.ISO-8859-1")   # what the watcher's tmux child inherits
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(0) for s in srcs])
    assert snap.agents["café"].target == "=fleet:1" and not snap.agents["café"].tmux_missing
    assert snap.agents["a__1"].target is None and snap.agents["a_1"].target is None


def test_a_session_scope_with_a_dot_finds_the_session_tmux_made_of_it(tmp_path, sock):
    """`tmux new -s my.proj` makes a session named my_proj (':' and '.' are tmux's separators);
    session = "my.proj" in the config scoped the source to no window at all (doctor: '0 windows
    found'), so no agent ever got its window."""
    from watcher.sources import build_sources, merge

    tmux(sock, "new-session", "-d", "-s", "my.proj", "-n", "a1", "sleep 600")
    fleet = tmp_path / "fleet"
    goal(fleet, "a1")
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\nsession = "my.proj"\n')
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(0) for s in srcs])
    assert snap.agents["a1"].target == "=my_proj:0" and not snap.agents["a1"].tmux_missing


def test_a_dead_split_pane_with_the_focus_does_not_close_the_agent_in_its_window(tmp_path, sock):
    """list-windows gives the values of the window's active pane: with remain-on-exit, a split
    pane whose command had exited (a log tail, a shell) made the agent alive in the other pane
    CERRADO 'tmux pane dead' while it had the focus, and TRABAJANDO again when the user moved the
    focus back. The source reads every pane (list-panes): a window is dead when all its panes are,
    a target naming a pane (fleet:1.0) takes that pane's."""
    from watcher.sources import build_sources, merge

    tmux(sock, "set", "-g", "remain-on-exit", "on")
    tmux(sock, "new-window", "-t", "fleet", "-n", "a2", "sleep 600")           # fleet:1, the agent in pane 0
    tmux(sock, "split-window", "-t", "=fleet:1", "exit 4")                      # pane 1: exits, keeps the focus
    tmux(sock, "new-window", "-t", "fleet", "-n", "a3", "exit 5")              # fleet:2, the only pane dies
    tmux(sock, "split-window", "-t", "=fleet:0", "exit 6")                      # a1's window: pane 1 dies
    for _ in range(200):
        if tmux(sock, "list-panes", "-a", "-F", "#{pane_dead}").split().count("1") == 3:
            break
        time.sleep(0.05)
    fleet = tmp_path / "fleet"
    for agent in ("a1", "a2", "a3"):
        goal(fleet, agent)
    (fleet / "a1" / "goal.json").write_text(json.dumps({"agent": "a1", "state": "busy", "dod_contract": "t",
                                                        "target": "fleet:0.1"}))   # names the dead pane
    (fleet / "a3" / "goal.json").write_text(json.dumps({"agent": "a3", "state": "busy", "dod_contract": "t",
                                                        "target": "fleet:2"}))     # its own window: exact
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\n')
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(0) for s in srcs])
    a = snap.agents
    assert (a["a2"].target, a["a2"].pane_dead) == ("=fleet:1", False)
    assert (a["a3"].target, a["a3"].pane_dead) == ("=fleet:2", True)
    assert (a["a1"].target, a["a1"].pane_dead) == ("=fleet:0.1", True)
