"""Issue 43 item 2 on the real Claude Code client: the picture ``fleetwatch run`` gives matches the
client's own truth at every step.

One claude per version (the pinned current one and the oldest the README supports) runs in real
tmux against the scripted fake Messages API, with ``fleetwatch hook install`` in its test HOME and
``fleetwatch run`` watching its goals dir, its tmux server and Claude Code's session files. Each step
drives the UI with ``tmux send-keys`` and asserts both sides: ``fleetwatch status --json`` (class,
state, waiting_for) and the client's truth (``claude agents --json`` status; the screen only for a
dialog's presence). Waits are for conditions with generous timeouts, never timed assertions.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import fakeapi as F
from tests.support.realclaude import FLEETWATCH, SCHEMA_EVENTS, Claude, base_env, flavour_params, wait_for

pytestmark = pytest.mark.realclient

# a command that asks for permission in manual mode and runs until the test lets it end
GATED = "python3 -c \"import os,time\nwhile not os.path.exists('go'): time.sleep(0.1)\""
DIALOG = r"Do you want to proceed\?"
QUESTION = {"questions": [{"question": "Which color?", "header": "Color", "multiSelect": False,
                           "options": [{"label": "Red", "description": "red"},
                                       {"label": "Blue", "description": "blue"}]}]}


class World:
    """The fake API, one claude in tmux window a1 (agent a1), and ``fleetwatch run``."""

    def __init__(self, tmp: Path, flavour: str):
        self.flavour = flavour
        self.took: list[tuple[str, float]] = []
        self.fake = F.FakeAPI().start()
        self.c = Claude(tmp, flavour, self.fake, agent="a1")
        self.c.hook_install()
        self.added = self.c.ensure_fleetwatch_on([e for e in ("Interrupt",) if e in SCHEMA_EVENTS[flavour]])
        self.hooklog = self.c.record_hooks()
        goal = self.c.goals / "a1" / "goal.json"
        goal.parent.mkdir(parents=True, exist_ok=True)
        goal.write_text(json.dumps({"agent": "a1", "task": "real client steps", "dod_contract": "the steps pass",
                                    "cwd": str(self.c.work), "state": "idle"}))
        self.cfg = tmp / "config.toml"
        self.cfg.write_text(
            f'[store]\npath = "{tmp}/events.db"\n[watch]\ninterval = "1s"\n'
            f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{self.c.goals}/*/goal.json"\n'
            f'[[sources]]\nname = "cc"\nkind = "claude"\nglob = "{self.c.home}/.claude/sessions/*.json"\n'
            f'[[sources]]\nname = "tmux"\nkind = "tmux"\nsocket = "{self.c.socket}"\n')
        self.env = {**base_env(), "HOME": str(self.c.home)}
        self.run = subprocess.Popen([FLEETWATCH, "run", "--config", str(self.cfg)], env=self.env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.c.start()

    def agents(self) -> dict:
        assert self.run.poll() is None, self.run.stderr.read().decode()[-2000:]
        r = subprocess.run([FLEETWATCH, "status", "--json", "--config", str(self.cfg)], env=self.env,
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            return {}
        return {a["agent"]: a for a in json.loads(r.stdout).get("agents", [])}

    def a1(self) -> dict:
        return self.agents().get("a1") or {}

    def expect(self, what: str, ok, timeout: float = 30.0) -> dict:
        """Until ``ok(agent a1 as status --json shows it)`` holds; that row. How long it took is
        kept in ``took`` (reported, never asserted: speed is not what these tests check)."""
        t0 = time.monotonic()
        try:
            row = wait_for(lambda: (a := self.a1()) and ok(a) and a, timeout, 0.2, f"a1 {what}")
        except AssertionError as e:
            raise AssertionError(f"{e}\nstatus: {self.a1()}\ngoal.json: {self.goal()}\nhooks: "
                                 f"{self.c.recorded_events()[-8:]}\nscreen:\n{self.c.screen()[-1500:]}") from None
        self.took.append((what, round(time.monotonic() - t0, 1)))
        return row

    def goal(self) -> dict:
        return json.loads((self.c.goals / "a1" / "goal.json").read_text())

    def events_since(self, n: int) -> list[str]:
        return self.c.recorded_events()[n:]

    def close(self) -> None:
        self.c.close()
        self.run.terminate()
        try:
            self.run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.run.kill()
        self.fake.close()


@pytest.fixture(params=flavour_params())
def world(request, tmp_path):
    w = World(tmp_path, request.param)
    yield w
    w.close()


def seen_kinds(recs: list[dict]) -> list[str]:
    """Each event the client ran a hook for, with its notification type, source, reason or error."""
    out = set()
    for r in recs:
        sub = next((r[k] for k in ("notification_type", "source", "reason", "error") if isinstance(r.get(k), str)), "")
        out.add(f"{r['event']}:{sub}" if sub else r["event"])
    return sorted(out)


def not_reclama(a: dict) -> bool:
    return a.get("class") not in ("RECLAMA", "MAL_LANZADO", "CERRADO")


def permission_dialog(w: World, command: str = GATED) -> None:
    w.fake.script(F.bash(command), F.text("done"))
    w.c.type("run it")
    w.c.wait_screen(DIALOG)
    w.expect("RECLAMA at the dialog, waiting for a permission for Bash",
             lambda a: a["class"] == "RECLAMA" and a["waiting_for"] == {"kind": "permission", "tool": "Bash"})
    assert w.c.wait_status("waiting").get("waitingFor", "permission prompt") == "permission prompt"  # 2.1.145: none


def test_steps_on_the_real_client(world):
    w, c = world, world.c
    go = c.work / "go"
    # idle at the prompt: not RECLAMA, not MAL_LANZADO
    a = w.expect("idle at its prompt", lambda a: a["state"] == "idle" and a["source"] == "fleet")
    assert not_reclama(a) and a["waiting_for"] is None
    assert c.wait_status("idle")
    g = w.goal()
    assert g["session_id"] == c.session()["sessionId"] and g["tmux"]["pane"] == c.pane_id()
    assert g["claude_pid"] == c.claude_pid()
    assert set(w.agents()) == {"a1"}  # the session joined its agent: no second, auto-named one

    # a permission dialog -> RECLAMA; approved -> not RECLAMA while the tool runs (no hook fires)
    permission_dialog(w)
    c.keys("Enter")
    c.wait_status("busy")
    a = w.expect("busy after the approval", lambda a: a["state"] == "busy" and not_reclama(a))
    assert a["waiting_for"] is None
    assert "PostToolUse" not in w.c.recorded_events()[-3:] and not go.exists()  # the tool still runs
    go.touch()
    w.expect("idle after the turn", lambda a: a["state"] == "idle" and not_reclama(a))
    go.unlink()
    c.wait_status("idle")

    # denied (Esc at the dialog) -> idle
    permission_dialog(w, "touch denied-marker")
    n = len(c.recorded())
    c.keys("Escape")
    w.expect("idle after the denial", lambda a: a["state"] == "idle" and not_reclama(a))
    c.wait_status("idle")
    w.fake.clear()
    assert not (c.work / "denied-marker").exists()
    denial = w.events_since(n)

    # Esc during a tool -> idle
    permission_dialog(w)
    c.keys("Enter")
    w.expect("busy in the tool", lambda a: a["state"] == "busy" and not_reclama(a))
    n = len(c.recorded())
    c.keys("Escape")
    w.expect("idle after Esc in a tool", lambda a: a["state"] == "idle" and not_reclama(a))
    c.wait_status("idle")
    w.fake.clear()
    esc_tool = w.events_since(n)

    # Esc while the model thinks -> idle
    w.fake.script(F.hold())
    held = w.fake.holds
    c.type("think")
    wait_for(lambda: w.fake.holds > held, 30, what="the held turn")
    w.expect("busy thinking", lambda a: a["state"] == "busy")
    n = len(c.recorded())
    c.keys("Escape")
    w.expect("idle after Esc while thinking", lambda a: a["state"] == "idle" and not_reclama(a))
    c.wait_status("idle")
    w.fake.release()
    w.fake.clear()
    esc_think = w.events_since(n)

    # a question -> RECLAMA (a question); answered -> cleared while the work goes on
    w.fake.script(F.tools(F.call("AskUserQuestion", QUESTION)), F.hold(F.text("thanks")))
    c.type("ask me")
    c.wait_screen("Which color")
    w.expect("RECLAMA at the question", lambda a: a["class"] == "RECLAMA"
             and a["waiting_for"] == {"kind": "question", "tool": None})
    held = w.fake.holds
    c.keys("Enter")
    sent = [time.monotonic()]

    def answered() -> bool:   # an Enter the dialog got before it listened is lost: sent again while it shows
        if w.fake.holds > held:
            return True
        if time.monotonic() - sent[0] > 5 and "Which color?" in c.screen():
            c.keys("Enter")
            sent[0] = time.monotonic()
        return False

    try:
        wait_for(answered, 60, what="the turn after the answer")
    except AssertionError as e:
        raise AssertionError(f"{e}\nrequests: {w.fake.requests[-4:]}\nscreen:\n{c.screen()[-1500:]}") from None
    a = w.expect("busy after the answer", lambda a: a["state"] == "busy" and not_reclama(a))
    assert a["waiting_for"] is None
    w.fake.release()
    w.expect("idle after the turn", lambda a: a["state"] == "idle")
    w.fake.clear()

    # a subagent working and finishing: busy while it works, idle after
    sub = F.call("Agent", {"description": "look around", "prompt": "look", "subagent_type": "general-purpose"})
    w.fake.script(F.tools(sub), F.text("started it"), F.text("all done"))
    w.fake.script_sub(F.hold(F.text("sub done")))
    held = w.fake.holds
    c.type("use a subagent")
    wait_for(lambda: w.fake.holds > held, 30, what="the subagent's held turn")
    a = w.expect("busy while the subagent works", lambda a: a["state"] == "busy" and not_reclama(a))
    w.fake.release()
    wait_for(lambda: "SubagentStop" in c.recorded_events(), 60, what="SubagentStop")
    w.expect("idle after the subagent", lambda a: a["state"] == "idle" and not_reclama(a), timeout=60)
    c.wait_status("idle")
    w.fake.clear()

    # an API error ends the turn: idle, and the reason says so
    w.fake.script(F.error(500))
    c.type("this fails")
    c.wait_screen("API Error")
    a = w.expect("the API error in the reason", lambda a: "API error" in a["reason"])
    assert a["state"] == "idle" and not_reclama(a) and "server_error" in a["reason"]
    w.fake.clear()

    # /clear: the agent stays (idle), its new session recorded
    old = w.goal()["session_id"]
    c.type("/clear")
    wait_for(lambda: w.goal().get("session_id") not in (None, old), 30, what="the new session id")
    a = w.expect("idle after /clear", lambda a: a["state"] == "idle" and not_reclama(a))
    assert set(w.agents()) == {"a1"}

    # /exit -> CERRADO
    c.type("/exit")
    w.expect("CERRADO after /exit", lambda a: a["class"] == "CERRADO")
    wait_for(lambda: c.session() is None, 30, what="the session to leave claude agents")

    # started again in a new window of the same name: back; the window killed -> CERRADO
    c.start()
    w.expect("back after a new start", lambda a: a["state"] == "idle" and not_reclama(a))
    wait_for(lambda: w.goal().get("tmux", {}).get("pane") == c.pane_id(), 30, what="the new pane recorded")
    c.tmux("kill-window", "-t", c.target())
    w.expect("CERRADO after the window was killed", lambda a: a["class"] == "CERRADO")

    # claude started in a shell pane, then killed (-9): the pane lives on, the agent is CERRADO
    c.start_shell()
    c.type(c.command_line())
    c.wait_ready()
    w.expect("back in a shell pane", lambda a: a["state"] == "idle" and not_reclama(a))
    wait_for(lambda: w.goal().get("claude_pid") == c.claude_pid(), 30, what="the new claude pid recorded")
    c.kill_claude()
    w.expect("CERRADO after kill -9", lambda a: a["class"] == "CERRADO")
    assert c.window_alive()

    print(f"\n{w.flavour}: denial {denial}\n esc in tool {esc_tool}\n esc thinking {esc_think}\n"
          f" installed besides hook install: {w.added}\n seen after: {w.took}\n hooks: {seen_kinds(c.recorded())}")
