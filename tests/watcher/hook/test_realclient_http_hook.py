"""Hooks that cost Claude Code (almost) nothing (issue 43 item 4), on both pinned Claude Code versions
(the current one in make test, the oldest in make drills).

`fleetwatch hook install` with the watcher's endpoint configured writes ``"type": "http"`` hooks
(SessionStart, which Claude Code runs no http hook for, as one exec-form command); the real client
POSTs each payload to the endpoint (its SSRF guard lets a loopback URL through: seen here), the
endpoint applies the hook's own mapping to goal.json, with the exact pane Claude Code's ``$TMUX``
and ``$TMUX_PANE`` name. While the watcher is down the client does not wait: a refused connection
is a non-blocking hook error and the turn goes on. The turn's cost is measured in
tests/bench/bench_hook.py, not here.
"""
from __future__ import annotations

import json
import re

import pytest

from tests.support import fakeapi as F
from tests.support.fleet import free_port
from tests.support.realclaude import Claude, flavour_params, wait_for
from watcher.hook.endpoint import HookEndpoint

pytestmark = pytest.mark.realclient


@pytest.fixture(params=flavour_params())   # the oldest version in make drills
def flavour(request):
    return request.param


def reads(n: int, path: str) -> list:
    """``n`` model turns of one Read call each (a read-only tool: no permission dialog), then text."""
    return [F.tools(F.call("Read", {"file_path": path})) for _ in range(n)] + [F.text("all read")]


def goal(c: Claude) -> dict:
    p = c.goals / "a1" / "goal.json"
    return json.loads(p.read_text()) if p.exists() else {}


def test_http_hooks_reach_the_endpoint_and_record_the_exact_pane(tmp_path, flavour):
    ep = HookEndpoint("127.0.0.1:0")
    with F.FakeAPI() as fake:
        c = Claude(tmp_path, flavour, fake, agent="a1")
        try:
            r = c.hook_install("--form", "http", "--url", ep.url)
            assert "form: http" in r.stderr
            hooks = c.settings()["hooks"]
            assert hooks["SessionStart"][0]["hooks"][0]["args"][0] == "hook"       # exec form, no shell
            assert {h["type"] for e, gs in hooks.items() if e != "SessionStart" for g in gs for h in g["hooks"]} == {"http"}
            assert "PostToolBatch" not in hooks
            (c.work / "notes.txt").write_text("three lines\n")
            c.start()
            fake.script(*reads(3, str(c.work / "notes.txt")))
            c.type("read the notes three times")
            c.wait_screen("all read")
            g = wait_for(lambda: (g := goal(c)).get("hook_event") == "Stop" and g, what="Stop through the endpoint")
            assert g["state"] == "idle" and g["agent"] == "a1"
            got = ep.counts["applied"]
            assert got >= 1 + 3 + 1, ep.counts    # prompt, 3 x PostToolUse (a Read is no long tool), Stop
            assert ep.counts["errors"] == 0 and ep.counts["refused"] == 0
            debug = c.debug_text()
            assert len(re.findall(r"HTTP hook POST to http://127\.0\.0\.1", debug)) >= 5   # not blocked as SSRF
            assert "response status 200" in debug
            where = g.get("tmux")
            if where is not None:      # the hook records the pane where it learns it (watcher/hook/adapter.py)
                assert where["pane"] == c.pane_id()
        finally:
            c.close()
            ep.close()


def test_while_the_watcher_is_down_the_client_does_not_wait(tmp_path, flavour):
    """Nothing listens on the endpoint's port: every http hook is refused at once, Claude Code
    reports a non-blocking hook error and the turn runs to its end."""
    url = f"http://127.0.0.1:{free_port()}/hook"
    with F.FakeAPI() as fake:
        c = Claude(tmp_path, flavour, fake, agent="a1")
        try:
            c.hook_install("--form", "http", "--url", url)
            (c.work / "notes.txt").write_text("x\n")
            c.start()
            fake.script(*reads(2, str(c.work / "notes.txt")))
            c.type("read the notes twice")
            c.wait_screen("all read")
            c.wait_status("idle")
            debug = c.debug_text()
            assert "ECONNREFUSED" in debug
            refused = re.findall(r"HTTP hook POST to (\S+)", debug)
            assert refused and all(u == url for u in refused)
        finally:
            c.close()
