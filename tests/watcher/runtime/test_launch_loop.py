"""Issue 44's "Done when", each with real tmux (a private socket per test), the real CLI and the real
watcher as subprocesses, stand-in agents as shell scripts that do (part of) the work and run
`fleetwatch claim done` from inside their window ($FLEETWATCH_AGENT set by `launch`)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.loopworld import World
from tests.support.receiver import Sink
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
              pytest.mark.slow]   # real windows, watchers and verifiers: several seconds a test

TWO_PARTS = [{"id": "part1", "kind": "cmd", "cmd": ["test", "-f", "part1"]},
             {"id": "part2", "kind": "cmd", "cmd": ["test", "-f", "part2"], "expected": "part2 exists"}]


@pytest.fixture
def world(tmp_path, request):
    made: list[World] = []

    def make(**kw) -> World:
        w = World(tmp_path, **kw)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def _launch(w: World, agent: str, contract, script: str, *extra: str):
    r = w.fw("launch", agent, "--task", f"task of {agent}", "--contract", json.dumps(contract),
             "--cwd", str(w.work), *extra, "--", script)
    assert r.returncode == 0, r.stderr
    return r


def test_a_launched_agent_that_does_the_work_is_verified_met_and_closed_with_no_human(world):
    w = world(dod={"run_checks": True, "on_met": "close", "on_failed": "nudge"})
    good = w.script("good.sh", "touch part1 part2\nfleetwatch claim done\nexec sleep 600\n")
    w.start()
    _launch(w, "a1", TWO_PARTS, good)
    acted = wait_for(lambda: w.data("dod.acted"), 60)
    assert [(a["agent"], a["action"]) for a in acted] == [("a1", "close")]
    closed = wait_for(lambda: [d for d in w.data("agent.classified") if d["to"] == "CERRADO"], 60)
    assert closed[0]["agent"] == "a1" and closed[0]["reason"] == "verified met"
    wait_for(lambda: "a1" not in w.windows(), 30)
    v = w.data("dod.verdict")
    assert [(x["verdict"], x["verifier"]) for x in v] == [("met", "fleetwatch-checks")]
    launched = w.data("agent.launched")
    assert launched[0]["agent"] == "a1" and launched[0]["cwd"] == str(w.work) and launched[0]["target"].startswith("@")
    st = json.loads(w.fw("status", "--json").stdout)
    assert st["loop"]["acted"] == {"close": 1} and st["loop"]["launch_to_met_s"]["count"] == 1
    rep = json.loads(w.fw("report", "--json").stdout)["loop"]
    assert rep["launched"] == 1 and rep["acted"] == {"close": 1} and rep["launch_to_met"]["count"] == 1
    assert 0 <= rep["launch_to_met"]["p50_s"] < 600
    assert "closed loop: 1 launched" in w.fw("report").stdout


def test_an_agent_that_claims_done_half_way_gets_exactly_one_nudge_naming_the_gap_and_stays_open(world):
    w = world(dod={"run_checks": True, "on_met": "close", "on_failed": "nudge"})
    # it reads what is typed into its pane, a line at a time, into the file "typed"
    half = w.script("half.sh", "touch part1\nfleetwatch claim done\nstty -echo\n"
                    "while IFS= read -r line; do printf '%s\\n' \"$line\" >> typed; done\n")
    typed = w.work / "typed"
    w.start()
    _launch(w, "a2", TWO_PARTS, half)
    wait_for(lambda: typed.exists() and "judged FAILED" in typed.read_text(), 60)
    line = typed.read_text()
    assert "part2" in line and "part1" not in line.split("Failed checks:")[1].split(".")[0]
    # more ticks pass (the watcher records a later claim's events meanwhile): still one nudge, still open
    r = w.fw("claim", "working", "--agent", "a2")
    assert r.returncode == 0
    wait_for(lambda: [d for d in w.data("agent.classified") if d["agent"] == "a2" and d["to"] == "TRABAJANDO"], 30)
    acted = w.data("dod.acted")
    assert [(a["agent"], a["action"], a["detail"]) for a in acted] == [("a2", "nudge", "part2")]
    assert typed.read_text().count("judged FAILED") == 1 and typed.read_text().count("\n") == 1
    assert "a2" in w.windows()
    assert not [d for d in w.data("agent.classified") if d["to"] == "CERRADO"]


def test_a_judgement_contract_goes_to_the_verifier_with_the_launched_contract_only(world, tmp_path):
    seen = tmp_path / "given.json"
    w = world(dod={"run_checks": True, "on_met": "close", "verifier": [str(tmp_path / "judge.sh")],
                   "verifier_timeout": "30s"})
    w.script("judge.sh", f"cat > {seen}\n"
             'echo \'{"verdict": "met", "evidence": [{"check": "readme", "says": "README.md explains launch"}]}\'\n')
    # the agent rewrites its goal.json (its own account, a new contract) before it claims
    agent = w.script("writer.sh", "echo docs > README.md\n"
                     "python3 - \"$FLEETWATCH_AGENT\" <<'EOF'\n"
                     "import json, os, sys\n"
                     f"p = os.path.join({str(w.goals)!r}, sys.argv[1], 'goal.json')\n"
                     "g = json.load(open(p)); g['dod'] = 'I did everything, trust me'; g['dod_contract'] = 'anything goes'\n"
                     "open(p + '.t', 'w').write(json.dumps(g)); os.replace(p + '.t', p)\n"
                     "EOF\n"
                     "fleetwatch claim done --note 'please approve'\nexec sleep 600\n")
    w.start()
    contract = "README.md explains how to launch an agent"
    _launch(w, "a3", contract, agent)
    v = wait_for(lambda: w.data("dod.verdict"), 60)
    assert v[0]["verifier"] == "verifier:judge.sh" and v[0]["verdict"] == "met"
    given = json.loads(seen.read_text())
    assert given == {"agent": "a3", "task": "task of a3", "contract": contract, "cwd": str(w.work)}
    assert "trust me" not in seen.read_text() and "please approve" not in seen.read_text()
    wait_for(lambda: [d for d in w.data("agent.classified") if d["to"] == "CERRADO"], 60)
    assert any(d["agent"] == "a3" for d in w.data("dod.contract_changed"))


def test_garbage_from_the_verifier_is_unevaluable_and_pushed_never_closed(world, tmp_path):
    sink = Sink()
    try:
        calls = tmp_path / "calls"
        w = world(dod={"on_met": "close", "on_failed": "nudge", "verifier": [str(tmp_path / "junk.sh")],
                       "verifier_timeout": "30s"}, notify_url=sink.url())
        w.script("junk.sh", f"cat >/dev/null\necho x >> {calls}\necho 'I think it is fine!'\n")
        agent = w.script("agent.sh", "fleetwatch claim done\nexec sleep 600\n")
        w.start()
        _launch(w, "a4", "the UI looks right (screenshot)", agent)
        v = wait_for(lambda: w.data("dod.verdict"), 60)
        assert v[0]["verdict"] == "unevaluable" and "verifier answer invalid" in v[0]["evidence"]
        assert calls.read_text().count("x") == 2          # one retry, then unevaluable
        wait_for(lambda: any("a4" in json.dumps(b) for b in sink.bodies), 30)
        assert [(a["agent"], a["action"]) for a in wait_for(lambda: w.data("dod.acted"), 30)] == [("a4", "escalate")]
        assert "a4" in w.windows()
        assert not [d for d in w.data("agent.classified") if d["to"] == "CERRADO"]
    finally:
        sink.close()


def test_a_three_task_plan_launches_in_order_one_at_a_time_nothing_twice_across_a_kill_9(world, tmp_path):
    w = world(dod={"run_checks": True, "on_met": "close"}, launch={"follow": True})
    slow = w.script("task.sh", "sleep 1\ntouch \"done-$FLEETWATCH_AGENT\"\nfleetwatch claim done\nexec sleep 600\n")
    plan = {"plan": "p1", "max_parallel": 1, "tasks": [
        {"id": f"t{i}", "task": f"step {i}", "deps": [f"t{i - 1}"] if i > 1 else [], "argv": [slow],
         "dod_contract": [{"id": "done", "kind": "cmd", "cmd": ["test", "-f", f"done-t{i}"]}], "cwd": str(w.work)}
        for i in (1, 2, 3)]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    w.start()
    r = w.fw("launch", "--plan", str(tmp_path / "plan.json"))
    assert r.returncode == 0, r.stderr
    wait_for(lambda: [d for d in w.data("agent.launched") if d["agent"] == "t2"], 60)
    w.kill9()
    w.start()
    wait_for(lambda: len([d for d in w.data("dod.verdict") if d["verdict"] == "met"]) == 3, 90)
    evs = w.events("agent.launched", "dod.verdict", "agent.classified")
    launched = [(r.seq, r.event.agent) for r in evs if r.type == "agent.launched"]
    assert [a for _, a in launched] == ["t1", "t2", "t3"]            # in order, each once
    met = {r.event.agent: r.seq for r in evs if r.type == "dod.verdict" and r.event.verdict == "met"}
    assert launched[1][0] > met["t1"] and launched[2][0] > met["t2"]  # one at a time: after the dep's met
    plans = json.loads(w.fw("status", "--json").stdout)["plans"]
    assert plans["p1"]["by_state"] == {"met": ["t1", "t2", "t3"]}


def test_a_launch_without_a_contract_is_refused_and_leaves_nothing_behind(world):
    w = world()
    for contract in (None, "", "[]", '[{"id": "x"}]', "{not json"):
        args = ["launch", "a5", "--task", "x", "--cwd", str(w.work)] + ([] if contract is None else ["--contract", contract])
        r = w.fw(*args)
        assert r.returncode == 2, (contract, r.stdout, r.stderr)
        assert r.stderr.count("\n") <= 2 and "contract" in r.stderr
    r = w.fw("launch", "a5", "--task", "x", "--contract", "tests pass", "--cwd", str(w.work / "nope"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert not list(w.goals.iterdir()) and not w.db.exists() and w.windows() == []
    assert not (w.tmp / "launched").exists()


def test_a_live_agent_is_not_launched_twice_and_dry_run_writes_nothing(world):
    w = world(argv=["sleep", "600"])
    r = w.fw("launch", "a6", "--task", "x", "--contract", "tests pass", "--cwd", str(w.work), "--dry-run")
    assert r.returncode == 0 and "would open window a6" in r.stdout
    assert not list(w.goals.iterdir()) and w.windows() == []
    assert w.fw("launch", "a6", "--task", "x", "--contract", "tests pass", "--cwd", str(w.work)).returncode == 0
    r = w.fw("launch", "a6", "--task", "x", "--contract", "tests pass", "--cwd", str(w.work))
    assert r.returncode == 2 and "a6" in r.stderr
    assert w.windows().count("a6") == 1 and len(w.data("agent.launched")) == 1
    assert w.tmux("display-message", "-p", "-t", "=fleet:a6", "#{window_name}").stdout.strip() == "a6"


@pytest.mark.parametrize("bad,why", [
    ({"tasks": [{"id": "t1", "task": "x", "deps": ["t2"]}, {"id": "t2", "task": "y", "deps": ["t1"]}]}, "contract"),
    ({"tasks": [{"id": "t1", "task": "x", "dod_contract": "ok", "deps": ["t9"]}]}, "unknown dep"),
    ({"tasks": [{"id": "t1", "task": "x", "dod_contract": "ok", "deps": ["t2"]},
                {"id": "t2", "task": "y", "dod_contract": "ok", "deps": ["t1"]}]}, "cycle"),
    ({"tasks": [{"id": "t1", "task": "x", "dod_contract": "ok"}, {"id": "t1", "task": "y", "dod_contract": "ok"}]},
     "duplicate"),
])
def test_an_invalid_plan_is_refused_whole_and_launches_nothing(world, tmp_path, bad, why):
    w = world(argv=["sleep", "600"])
    (tmp_path / "plan.json").write_text(json.dumps({"plan": "p", "max_parallel": 2, **bad}))
    r = w.fw("launch", "--plan", str(tmp_path / "plan.json"))
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not list(w.goals.iterdir()) and not w.db.exists() and w.windows() == []


def test_claim_sets_the_phase_and_refuses_an_unknown_agent(world):
    w = world(argv=["sleep", "600"])
    assert w.fw("launch", "a7", "--task", "x", "--contract", "ok", "--cwd", str(w.work)).returncode == 0
    g = Path(w.goals / "a7" / "goal.json")
    for what, phase in (("blocked", "bloqueado"), ("question", "preguntando"), ("working", "haciendo"),
                        ("done", "hecho")):
        r = w.fw("claim", what, env={"FLEETWATCH_AGENT": "a7"})
        assert r.returncode == 0, r.stderr
        assert json.loads(g.read_text())["phase"] == phase
    assert json.loads(g.read_text())["state"] == "idle"
    assert w.fw("claim", "done", "--agent", "nobody").returncode == 2
    evil = w.tmp / "evil" / "goal.json"       # an id that is a path never reaches outside goals_dir
    evil.parent.mkdir()
    evil.write_text('{"agent": "x", "state": "busy", "phase": "haciendo", "dod_contract": "x"}')
    before = evil.read_text()
    assert w.fw("claim", "done", "--agent", "../evil").returncode == 2 and evil.read_text() == before
    assert w.fw("claim", "done").returncode == 2            # no agent at all


def test_a_humans_verdict_is_acted_on_the_same_way(world, tmp_path):
    w = world(dod={"on_met": "close"}, argv=["sleep", "600"])
    (tmp_path / "contract.json").write_text(json.dumps("the screenshot shows the new login page"))
    w.start()
    r = w.fw("launch", "a8", "--task", "x", "--contract", f"@{tmp_path / 'contract.json'}", "--cwd", str(w.work))
    assert r.returncode == 0, r.stderr
    wait_for(lambda: [d for d in w.data("agent.classified") if d["agent"] == "a8"], 30)
    r = w.fw("verdict", "a8", "met", "--verifier", "alice", "--evidence", "looked at it")
    assert r.returncode == 0, r.stderr
    acted = wait_for(lambda: w.data("dod.acted"), 30)
    assert [(a["agent"], a["action"], a["verifier"]) for a in acted] == [("a8", "close", "alice")]
    closed = wait_for(lambda: [d for d in w.data("agent.classified") if d["to"] == "CERRADO"], 30)
    assert closed[0]["reason"] == "verified met"
    wait_for(lambda: "a8" not in w.windows(), 30)


def test_a_verifier_that_hangs_is_killed_at_its_timeout_and_unevaluable(world, tmp_path):
    marker = f"fwhang{os.getpid()}"   # this process's own: a suite beside this one runs the same test
    w = world(dod={"verifier": [str(tmp_path / "hang.sh")], "verifier_timeout": "2s"},
              argv=["sh", "-c", "fleetwatch claim done; exec sleep 600"])
    w.script("hang.sh", f"exec bash -c 'cat >/dev/null; (exec -a {marker}-child sleep 600) & "
                        f"exec -a {marker}-leader sleep 600'\n")
    w.start()
    assert w.fw("launch", "a9", "--task", "x", "--contract", "looks right", "--cwd", str(w.work)).returncode == 0
    v = wait_for(lambda: w.data("dod.verdict"), 60)
    assert v[0]["verdict"] == "unevaluable" and "no answer within 2s" in v[0]["evidence"]
    import subprocess as sp
    wait_for(lambda: sp.run(["pgrep", "-f", f"^{marker}-"], capture_output=True).returncode == 1, 30)


def test_a_plan_stops_at_a_failed_task_and_the_stop_is_pushed(world, tmp_path):
    sink = Sink()
    try:
        w = world(dod={"run_checks": True}, launch={"follow": True}, notify_url=sink.url())
        lazy = w.script("lazy.sh", "fleetwatch claim done\nexec sleep 600\n")     # claims without the work
        plan = {"plan": "p2", "max_parallel": 2, "tasks": [
            {"id": "u1", "task": "first", "argv": [lazy], "cwd": str(w.work),
             "dod_contract": [{"id": "made", "kind": "cmd", "cmd": ["test", "-f", "made"]}]},
            {"id": "u2", "task": "second", "deps": ["u1"], "argv": [lazy], "cwd": str(w.work),
             "dod_contract": [{"id": "made", "kind": "cmd", "cmd": ["test", "-f", "made"]}]}]}
        (tmp_path / "plan.json").write_text(json.dumps(plan))
        w.start()
        assert w.fw("launch", "--plan", str(tmp_path / "plan.json")).returncode == 0
        stopped = wait_for(lambda: w.data("plan.stopped"), 60)
        assert [(s["plan"], s["task"], s["verdict"]) for s in stopped] == [("p2", "u1", "failed")]
        wait_for(lambda: any("p2" in json.dumps(b) and "stopped" in json.dumps(b) for b in sink.bodies), 30)
        assert [d["agent"] for d in w.data("agent.launched")] == ["u1"]          # u2 never launched
        st = json.loads(w.fw("status", "--json").stdout)["plans"]["p2"]
        assert st["stopped"]["task"] == "u1" and st["by_state"] == {"failed": ["u1"], "waiting": ["u2"]}
        assert "plan p2: stopped at task u1 (failed)" in w.fw("summary").stdout
    finally:
        sink.close()


def test_an_agent_not_launched_by_fleetwatch_is_closed_the_same_way(world):
    w = world(dod={"run_checks": True, "on_met": "close"})
    w.tmux("-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", "h1", "sleep 600")
    (w.work / "ok").write_text("x")
    d = w.goals / "h1"
    d.mkdir()
    (d / "goal.json").write_text(json.dumps({"agent": "h1", "task": "by hand", "state": "idle", "phase": "hecho",
                                             "cwd": str(w.work), "dod_contract": [
                                                 {"id": "ok", "kind": "cmd", "cmd": ["test", "-f", "ok"]}]}))
    w.start()
    closed = wait_for(lambda: [x for x in w.data("agent.classified") if x["to"] == "CERRADO"], 60)
    assert closed[0]["agent"] == "h1" and closed[0]["reason"] == "verified met"
    assert json.loads((d / "goal.json").read_text())["ended"] is True
    wait_for(lambda: "h1" not in w.windows(), 30)


def test_a_goals_folder_that_cannot_be_written_is_said_and_leaves_nothing(world):
    w = world(argv=["sleep", "600"])
    (w.tmp / "file").write_text("")
    w.cfg.write_text(w.cfg.read_text().replace(f'goals_dir = "{w.goals}"', f'goals_dir = "{w.tmp / "file" / "g"}"'))
    r = w.fw("launch", "a1", "--task", "x", "--contract", "tests pass", "--cwd", str(w.work))
    assert r.returncode == 2 and "cannot write" in r.stderr and "Traceback" not in r.stderr
    assert w.windows() == [] and not w.db.exists() and not (w.tmp / "launched").exists()


def test_verdicts_acted_on_across_a_kill_9_nudge_at_most_once_close_done_by_the_next_watcher(world):
    w = world(dod={"run_checks": True, "on_met": "close", "on_failed": "nudge"})
    half = w.script("half.sh", "touch part1\nfleetwatch claim done\nstty -echo\n"
                    "while IFS= read -r line; do printf '%s\\n' \"$line\" >> typed; done\n")
    good = w.script("good.sh", "touch part1 part2\nfleetwatch claim done\nexec sleep 600\n")
    w.start()
    _launch(w, "n1", TWO_PARTS, half)
    wait_for(lambda: w.data("dod.acted"), 60)
    w.kill9()                                   # right after the nudge is recorded: sent or not, never again
    w.start()
    _launch(w, "c1", TWO_PARTS, good)
    wait_for(lambda: [a for a in w.data("dod.acted") if a["agent"] == "c1"], 60)
    w.kill9()                                   # right after the close is recorded, before it is done
    w.start()
    closed = wait_for(lambda: [d for d in w.data("agent.classified") if d["agent"] == "c1" and d["to"] == "CERRADO"], 60)
    assert closed[0]["reason"] == "verified met"
    wait_for(lambda: "c1" not in w.windows(), 30)
    typed = w.work / "typed"
    assert (typed.read_text().count("judged FAILED") if typed.exists() else 0) <= 1
    assert [(a["agent"], a["action"]) for a in w.data("dod.acted")] == [("n1", "nudge"), ("c1", "close")]
    assert "n1" in w.windows()


def test_on_met_as_an_argv_runs_instead_of_closing_the_window(world, tmp_path):
    out = tmp_path / "reassigned"
    w = world(dod={"run_checks": True, "on_met": ["sh", "-c", f"echo {{agent}} {{target}} >> {out}"]})
    good = w.script("good.sh", "touch part1 part2\nfleetwatch claim done\nexec sleep 600\n")
    w.start()
    _launch(w, "r1", TWO_PARTS, good)
    wait_for(lambda: out.exists() and out.read_text().startswith("r1 @"), 60)
    closed = wait_for(lambda: [d for d in w.data("agent.classified") if d["to"] == "CERRADO"], 60)
    assert closed[0]["reason"] == "verified met"        # goal.json marked ended: CERRADO, window left to the argv
    assert "r1" in w.windows() and [a["action"] for a in w.data("dod.acted")] == ["close"]


def test_a_kill_9_while_the_verifier_judges_gives_exactly_one_verdict(world, tmp_path):
    """The watcher killed -9 while its verifier process runs: that process dies with it (never
    answers into a log nobody folds), the next watcher asks the verifier again, and the claim gets
    exactly one verdict, acted on once."""
    runs, answers = tmp_path / "runs", tmp_path / "answers"
    w = world(dod={"on_met": "close", "verifier": [str(tmp_path / "slow-judge.sh")], "verifier_timeout": "60s"})
    w.script("slow-judge.sh", f"cat > /dev/null\necho run >> {runs}\nsleep 3\necho answered >> {answers}\n"
             'echo \'{"verdict": "met", "evidence": [{"check": "judge", "says": "looked"}]}\'\n')
    agent = w.script("claims.sh", "echo docs > README.md\nfleetwatch claim done\nexec sleep 600\n")
    w.start()
    _launch(w, "k1", "README.md says what the tool does", agent)
    wait_for(lambda: runs.exists() and runs.read_text().count("run") == 1, 60)
    w.kill9()
    assert w.data("dod.verdict") == []
    w.start()
    wait_for(lambda: [d for d in w.data("agent.classified") if d["agent"] == "k1" and d["to"] == "CERRADO"], 60)
    v = w.data("dod.verdict")
    assert [(x["agent"], x["verdict"], x["verifier"]) for x in v] == [("k1", "met", "verifier:slow-judge.sh")]
    assert [(a["agent"], a["action"]) for a in w.data("dod.acted")] == [("k1", "close")]
    assert runs.read_text().count("run") == 2 and answers.read_text().count("answered") == 1
