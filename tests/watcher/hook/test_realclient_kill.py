"""Issue 43: `claude` killed (-9) inside a live shell pane fires no SessionEnd and the pane lives on;
the agent stayed TRABAJANDO. On both pinned Claude Code versions (the current one in make test, the
oldest in make drills), in real tmux: claude is typed into a bash window, its hooks record the pane
and its pid (goal.json ``tmux``, ``claude_pid``), and
``fleetwatch run`` (goals + tmux sources) sees the recorded pane's process tree lose it: CERRADO
"claude exited", the shell still alive. Read from /proc, never from the screen. The same rule on
plain processes: tests/watcher/sources/test_exact_panes.py."""
from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest

from tests.support import fakeapi as F
from tests.support.fleet import free_port
from tests.support.realclaude import FLEETWATCH, Claude, base_env, flavour_params, wait_for

pytestmark = pytest.mark.realclient


@pytest.fixture(params=flavour_params())   # the oldest version in make drills
def flavour(request):
    return request.param


def status(cfg, env) -> dict:
    r = subprocess.run([FLEETWATCH, "status", "--json", "--config", str(cfg)], env=env, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        return {}
    return {a["agent"]: a for a in json.loads(r.stdout).get("agents", [])}


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("form", ["exec", "http"])
def test_claude_killed_in_a_live_shell_pane_is_closed(tmp_path, flavour, form):
    """``form``: the hooks as commands (each records the pane and claude's pid), or as http POSTs to
    the watcher's endpoint (the pane from the headers; the pid from SessionStart, a command)."""
    port = free_port()
    with F.FakeAPI() as fake:
        c = Claude(tmp_path, flavour, fake, agent="a1")
        c.hook_install("--form", form, "--url", f"http://127.0.0.1:{port}/hook")
        goal = c.goals / "a1" / "goal.json"
        goal.parent.mkdir(parents=True, exist_ok=True)
        goal.write_text(json.dumps({"agent": "a1", "dod_contract": "tests pass", "cwd": str(c.work), "state": "idle"}))
        cfg = tmp_path / "config.toml"
        cfg.write_text(f'[store]\npath = "{tmp_path}/events.db"\n[watch]\ninterval = "1s"\n'
                       f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{c.goals}/*/goal.json"\n'
                       f'[[sources]]\nname = "tmux"\nkind = "tmux"\nsocket = "{c.socket}"\n'
                       f'[hook]\nlisten = "127.0.0.1:{port}"\n')
        env = {**base_env(), "HOME": str(c.home)}
        run = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if form == "http":   # the endpoint listens before the session's first hook POSTs to it
                wait_for(lambda: run.poll() is not None or listening(port), 60, what="the hook endpoint")
                assert run.poll() is None, run.stderr.read().decode() if run.stderr else ""
            c.start_shell()
            c.type(c.command_line())
            c.wait_ready()
            fake.script(F.text("hello"))
            c.type("say hello")
            c.wait_screen("hello")
            wait_for(lambda: json.loads(goal.read_text()).get("hook_event") == "Stop", what="the Stop hook")
            doc = wait_for(lambda: (d := json.loads(goal.read_text())).get("tmux") and d, what="the pane recorded")
            assert doc["tmux"]["pane"] == c.pane_id()
            pid = c.claude_pid()
            assert pid is not None and doc.get("claude_pid") in (pid, None)
            wait_for(lambda: status(cfg, env).get("a1", {}).get("class") == "TRABAJANDO", timeout=60,
                     what="a1 TRABAJANDO")
            c.kill_claude()
            t0 = time.monotonic()
            a1 = wait_for(lambda: (a := status(cfg, env).get("a1", {})).get("class") == "CERRADO" and a, timeout=60,
                          what="a1 CERRADO after kill -9")
            took = time.monotonic() - t0
            assert a1["reason"].startswith("claude exited"), a1
            assert c.window_alive() and c.claude_pid() is None      # the shell lives on, claude is gone
            print(f"CERRADO {took:.1f} s after kill -9 ({flavour})")
            assert run.poll() is None
        finally:
            run.terminate()
            run.wait(20)
            c.close()
