"""Issue 44 with the real Claude Code client (both pinned versions: the current one in make
test, the oldest in make drills) in the window ``fleetwatch launch``
opens, its model the scripted fake of tests/support/fakeapi.py: the model runs
``fleetwatch claim done`` through its Bash tool. A launched agent that did the work is verified met
and closed with no human; one that claims done half-way gets exactly one nudge naming the gap
(typed into its pane: the client takes it as the next prompt) and stays open."""
from __future__ import annotations

import json

import pytest

from tests.support import fakeapi as F
from tests.support.loopworld import World
from tests.support.realclaude import Claude, flavour_params, wait_for

pytestmark = pytest.mark.realclient

TWO_PARTS = [{"id": "part1", "kind": "cmd", "cmd": ["test", "-f", "part1"]},
             {"id": "part2", "kind": "cmd", "cmd": ["test", "-f", "part2"]}]


@pytest.fixture(params=flavour_params())   # the oldest version in make drills
def flavour(request):
    return request.param


def _world(tmp_path, flavour, fake):
    c = Claude(tmp_path, flavour, fake, win="a1")   # the test HOME, trusted work folder, fake API
    c.hook_install()
    # the fleet's agent command: this client, touch and the claim command allowed (no permission
    # dialog), the launch prompt as its first (after --: --allowedTools takes several values)
    w = World(tmp_path, dod={"run_checks": True, "on_met": "close", "on_failed": "nudge"},
              argv=[c.bin, "--allowedTools", "Bash(touch:*),Bash(fleetwatch claim:*)", "--", "{prompt}"])
    w.env.update({k: v for k, v in c.env.items() if k not in ("FLEETWATCH_AGENT", "PATH")})
    w.env["FLEETWATCH_CONFIG"] = str(w.cfg)
    return c, w


@pytest.fixture
def agent_world(tmp_path, flavour):
    """(fake model, client, world): the agent is this client, launched into the world's tmux."""
    with F.FakeAPI() as fake:
        c, w = _world(tmp_path, flavour, fake)
        try:
            yield fake, c, w
        finally:
            w.close()


def _launch(w: World, c: Claude):
    r = w.fw("launch", "a1", "--task", "create part1 and part2", "--contract", json.dumps(TWO_PARTS),
             "--cwd", str(c.work))
    assert r.returncode == 0, r.stderr


def test_real_client_that_does_the_work_and_claims_done_is_verified_met_and_closed(agent_world):
    fake, c, w = agent_world
    fake.script(F.bash("touch part1 part2"), F.bash("fleetwatch claim done"), F.text("done: both parts exist"))
    w.start()
    _launch(w, c)
    acted = wait_for(lambda: w.data("dod.acted"), 120, what="the verdict acted on")
    assert [(a["agent"], a["action"]) for a in acted] == [("a1", "close")]
    assert [(v["verdict"], v["verifier"]) for v in w.data("dod.verdict")] == [("met", "fleetwatch-checks")]
    closed = wait_for(lambda: [d for d in w.data("agent.classified") if d["to"] == "CERRADO"], 60, what="CERRADO")
    assert closed[0]["reason"] == "verified met"
    wait_for(lambda: "a1" not in w.windows(), 30, what="the window closed")


def test_real_client_that_claims_done_half_way_gets_one_nudge_and_stays_open(agent_world):
    fake, c, w = agent_world
    fake.script(F.bash("touch part1"), F.bash("fleetwatch claim done"), F.text("done, I think"))
    w.start()
    _launch(w, c)
    nudged = wait_for(lambda: w.data("dod.acted"), 120, what="the nudge")
    assert [(a["agent"], a["action"], a["detail"]) for a in nudged] == [("a1", "nudge", "part2")]
    # the nudge is the client's next prompt: one more conversation request, answered "ok" (the script
    # is spent), so the requests outnumber the scripted turns served; not counted from now, as the
    # client may have taken the nudge already
    wait_for(lambda: len(fake.conversation_requests()) > len(fake.served), 60, what="the nudge taken as a prompt")
    wait_for(lambda: json.loads((w.goals / "a1" / "goal.json").read_text()).get("state") == "idle", 60,
             what="the turn after the nudge ended")
    goal = json.loads((w.goals / "a1" / "goal.json").read_text())
    assert goal["phase"] == "haciendo"         # the refused claim withdrawn: its stop is no new claim
    wait_for(lambda: w.data("agent.classified")[-1]["to"] == "TRABAJANDO", 30, what="back at work")
    assert len(w.data("dod.acted")) == 1 and len(w.data("dod.verdict")) == 1
    assert "a1" in w.windows()
    assert not [d for d in w.data("agent.classified") if d["to"] == "CERRADO"]


VERIFY = ("You are the independent verifier of a coding agent's claim that its task is done. The JSON "
          "document on stdin gives the agent, its task, its contract (the definition of done) and its "
          "working folder. Check every part of the contract yourself, in that folder; the agent's own "
          "account is not given to you and is not evidence. Answer met only if every required part holds.")


def _verifier_world(tmp_path, flavour, fake):
    from watcher.schema import verdict_schema_text

    c = Claude(tmp_path, flavour, fake, win="v1")   # the verifier's HOME and environment (its API is the fake)
    argv = [c.bin, "-p", VERIFY, "--output-format", "json", "--json-schema", verdict_schema_text()]
    w = World(tmp_path, dod={"run_checks": True, "on_met": "close", "verifier": argv, "verifier_timeout": "120s"},
              argv=["sh", "-c", "fleetwatch claim done; exec sleep 600"])
    w.env.update({k: v for k, v in c.env.items() if k not in ("FLEETWATCH_AGENT", "PATH")})
    w.env["FLEETWATCH_CONFIG"] = str(w.cfg)
    return c, w


@pytest.fixture
def judged(tmp_path, flavour):
    """(fake model, world): Claude Code is the world's [dod] verifier; a stand-in agent "a1" launched
    with a free-text contract claims done at once."""
    with F.FakeAPI() as fake:
        c, w = _verifier_world(tmp_path, flavour, fake)
        try:
            yield fake, w, lambda: w.fw("launch", "a1", "--task", "document launch", "--contract",
                                        "README.md explains how to launch", "--cwd", str(c.work))
        finally:
            w.close()


def test_claude_code_as_the_verifier_judges_a_free_text_contract(judged):
    fake, w, launch = judged
    answer = F.tools(F.call("StructuredOutput", {"verdict": "met", "evidence": [
        {"check": "readme", "says": "README.md explains how to launch an agent"}]}))
    fake.script(answer, F.text("done"), answer, F.text("done"))   # twice: the one retry, if a slow host needs it
    w.start()
    assert launch().returncode == 0
    v = wait_for(lambda: w.data("dod.verdict"), 120, what="the verifier's verdict")
    assert (v[0]["verdict"], v[0]["verifier"]) == ("met", "verifier:claude")
    assert "README.md explains" in v[0]["evidence"]
    assert [a["action"] for a in wait_for(lambda: w.data("dod.acted"), 60, what="acted")] == ["close"]
    assert fake.conversation_requests() and "StructuredOutput" in fake.conversation_requests()[0]["tools"]


def test_claude_code_verifier_without_a_structured_answer_is_unevaluable_never_closed(judged):
    fake, w, launch = judged
    fake.script(*[F.text("looks fine to me")] * 12)   # never the structured answer, whatever it is asked
    w.start()
    assert launch().returncode == 0
    v = wait_for(lambda: w.data("dod.verdict"), 180, what="the verdict")
    assert v[0]["verdict"] == "unevaluable" and "verifier answer invalid" in v[0]["evidence"]
    assert [a["action"] for a in wait_for(lambda: w.data("dod.acted"), 60, what="acted")] == ["escalate"]
    assert "a1" in w.windows()
