"""The real-client harness itself, on both pinned Claude Code versions: the client starts in real
tmux with no first-run dialog, talks only to the fake Messages API on loopback (a streamed text
turn), lists its session in ``claude agents --json``, and runs the hooks ``fleetwatch hook install``
wrote into the test HOME."""
from __future__ import annotations

import json

import pytest

from tests.support import fakeapi as F
from tests.support.realclaude import VERSIONS, Claude, wait_for

pytestmark = pytest.mark.realclient


@pytest.fixture(params=sorted(VERSIONS), ids=lambda f: f"{f}-{VERSIONS[f]}")  # both: ~5 s each
def flavour(request):
    return request.param


def test_client_talks_to_the_fake_and_runs_the_hooks(tmp_path, flavour):
    with F.FakeAPI() as fake:
        c = Claude(tmp_path, flavour, fake, agent="a1")
        try:
            c.hook_install()
            c.start()
            fake.script(F.text("hello from the fake"))
            c.type("say hello")
            c.wait_screen("hello from the fake")
            s = c.wait_status("idle")
            assert s["pid"] == c.claude_pid() and s["kind"] == "interactive"
            goal = wait_for(lambda: (g := c.goals / "a1" / "goal.json").exists() and json.loads(g.read_text())
                            .get("hook_event") == "Stop" and json.loads(g.read_text()), what="the Stop hook")
            assert goal["state"] == "idle"
            conv = fake.conversation_requests()
            assert conv and all(r["stream"] and r["status"] == 200 for r in conv)
            assert "Bash" in conv[0]["tools"]
            assert fake.unexpected == []
        finally:
            c.close()


def test_debug_log_hook_lines_parse():
    """The ``--debug-file`` line format both versions write for a finished command hook."""
    from tests.support.realclaude import parse_hook_runs

    text = ("2026-12-07T19:15:32.387Z [DEBUG] Hooks: SessionStart:startup [/v/bin/fleetwatch hook] finished with "
            "status 0 (297ms)\n2026-12-07T19:15:33.000Z [DEBUG] Hook output does not start with {\n"
            "2026-12-07T19:15:34.000Z [DEBUG] Hooks: PreToolUse:Bash [x y] finished with status 1 (12.5ms)\n")
    assert parse_hook_runs(text) == [("SessionStart", "/v/bin/fleetwatch hook", 297.0), ("PreToolUse", "x y", 12.5)]
