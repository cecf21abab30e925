"""Only agents are agents (issue 43 item 3): on the fleet's tmux server every window used to become
an agent, MAL_LANZADO "no goal.json": a plain shell, an editor, the board itself, each pushed and
listed. A window is an agent only when something says so: a goal.json that maps to it, a Claude
Code process in it, or the source's ``agent_windows`` rule; ``exclude_windows`` names windows that
never are. Real tmux, real processes, the watcher in-process on a virtual clock."""
from __future__ import annotations

import shutil
import time

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher

from tests.support.tmuxserver import Server, goal
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def named(tmp_path, name: str) -> str:
    """A real long-running process whose name (comm) is ``name``: a link to sleep."""
    p = tmp_path / "bin" / name
    p.parent.mkdir(exist_ok=True)
    p.symlink_to(shutil.which("sleep"))
    return str(p)


def test_shells_editors_and_the_board_are_not_agents(tmp_path):
    srv = Server("fw-only", first="a1")
    try:
        srv.window("sh", "bash --norc --noprofile")
        srv.window("vim", f"{named(tmp_path, 'vim')} 600")
        srv.window("board", f"{named(tmp_path, 'claude')} 600")     # excluded by name, whatever runs there
        srv.window("cc", f"bash -c '{tmp_path}/bin/claude 600'")    # a Claude Code session, no goal.json
        srv.window("exec-7", "sleep 600")                           # named by agent_windows
        goal(tmp_path / "fleet", "a1", state="busy", last_activity=time.time())
        cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                    f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n'
                    f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{srv.name}"\n'
                    f'agent_windows = ["exec-*"]\nexclude_windows = ["board", "scratch*"]\n')
        elog = EventLog(str(tmp_path / "e.db"))
        w = Watcher(cfg, elog)
        now = time.time()

        def agents():
            return {r.event.agent: (r.event.to, r.event.reason) for r in elog.read(0, types=["agent.classified"])}

        tick = iter(range(1000))
        wait_for(lambda: w.tick(now + 2 * next(tick)) is not None and "cc" in agents(), timeout=60)
        for _ in range(3):
            w.tick(now + 2 * next(tick))
        assert agents() == {"a1": ("TRABAJANDO", "busy"), "cc": ("MAL_LANZADO", "no goal.json"),
                            "exec-7": ("MAL_LANZADO", "no goal.json")}
        assert set(w.proj["fleet"]["agents"]) == {"a1", "cc", "exec-7"}
        w.close()
    finally:
        srv.close()


def test_an_excluded_window_is_never_matched_to_an_agent_by_name(tmp_path):
    """``exclude_windows`` also keeps a window out of name matching: agent "board" (a goal.json)
    gets no target, and so no nudge is ever typed into the board's pane."""
    srv = Server("fw-only-x", first="board")
    try:
        goal(tmp_path / "fleet", "board", state="busy", last_activity=time.time())
        cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n'
                    f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{srv.name}"\nexclude_windows = ["board"]\n')
        from watcher.sources import build_sources, merge

        srcs = build_sources(cfg)
        snap = merge(srcs, [s.poll(0) for s in srcs])
        assert snap.agents["board"].target is None
    finally:
        srv.close()
