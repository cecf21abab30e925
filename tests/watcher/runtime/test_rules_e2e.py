"""Every rule of issue 22 end to end: a real ``fleetwatch run`` over real steps.json files, a real
missions database, a real swarm command source and a real tmux server on a private socket,
pushing to a real HTTP receiver on 127.0.0.1.

One world holds every breach next to its legal neighbour; a second phase of file and database
changes holds the breaches that are transitions. The log must hold each rule exactly once (and
nothing for a neighbour), the pushes must name them, and ``rebuild --check`` must stay clean.
Waits poll for the expected state under a deadline; nothing asserts a duration.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections import Counter

import pytest

from events.log import EventLog
from tests.support.notifyloop import Receiver
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def at(day: int, minute: int) -> str:
    return f"2026-11-{day:02d}T{10 + minute // 60:02d}:{minute % 60:02d}:00Z"


def S(status, day, minute, **data):
    e = {"status": status, "at": at(day, minute)}
    if data:
        e["data"] = data
    return e


def audited(day):
    return {"facts": S("done", day, 1), "audit": S("done", day, 2, verdict="pass", tainted=False)}


def to_deploy(day):
    return {**audited(day), "analyze": S("done", day, 3), "apply": S("done", day, 4), "validate": S("done", day, 5),
            "deploy": S("done", day, 6)}


def sha(n: int) -> str:
    return f"{n:064x}"


def uploaded(day, minute, n, **extra):
    return {"upload_intent": S("done", day, minute, sha256=sha(n), candidate=f"c{n}", **extra),
            "upload_confirmed": S("done", day, minute + 1)}


def doc(rid, steps, board, done=True, **kw):
    return {"event_id": f"ev:{rid}", "kind": "run_finished", "run": rid, "board": board, "branch": "full",
            "steps": steps, "failures": 0, "work_complete": done, **kw}


def phase1() -> list[dict]:
    d = []
    # reconciled-no-reupload (day 10): RNU breaks it in phase 2, RNN (reconciled no) is the neighbour
    d.append(doc("RNU", {**audited(10), "upload_intent": S("fail", 10, 10, sha256=sha(1), candidate="c", reconciled="yes")}, "B-rnu"))
    d.append(doc("RNN", {**audited(10), "upload_intent": S("fail", 10, 12, sha256=sha(2), candidate="c", reconciled="no")}, "B-rnn"))
    # launch-request-stable (day 11)
    d.append(doc("LRS", {**to_deploy(11), "launch_intent": S("fail", 11, 10, request_id="req-J-1")}, "B-l"))
    d.append(doc("LRN", {**to_deploy(11), "launch_intent": S("fail", 11, 12, request_id="req-K-1")}, "B-l"))
    # upload-needs-audit (day 12): no audit; the neighbour passed it
    d.append(doc("UNA", {"facts": S("done", 12, 1), **uploaded(12, 10, 3)}, "B-una"))
    d.append(doc("UNN", {**audited(12), **uploaded(12, 12, 4)}, "B-unn"))
    # board-daily-quota (day 13): a 4th confirmed upload on BQ; the 5th is the next day (the neighbour)
    for i in range(4):
        d.append(doc(f"Q{i + 1}", {**audited(13), **uploaded(13, 10 + 5 * i, 10 + i)}, "BQ"))
    d.append(doc("Q5", {**audited(14), **uploaded(14, 10, 14)}, "BQ"))
    # duplicate-upload (day 15): D1 uploads D0's sha256 to BD; D2 the same sha256 to another board
    d.append(doc("D0", {**audited(15), **uploaded(15, 10, 20)}, "BD"))
    d.append(doc("D1", {**audited(15), **uploaded(15, 20, 20)}, "BD"))
    d.append(doc("D2", {**audited(15), **uploaded(15, 30, 20)}, "BE"))
    # session-concurrency (day 16): C1 starts while C0 is in flight; the rest are finished
    d.append(doc("C0", {"facts": S("begin", 16, 1)}, "B-c", done=False))
    d.append(doc("C1", {"facts": S("begin", 16, 5)}, "B-c", done=False))
    # session-daily-cap (day 1): a 13th outer-loop event in one UTC day
    for i in range(13):
        d.append(doc(f"DC{i + 1:02d}", {"facts": S("done", 1, i)}, "B-dc"))
    # inactive-board (day 17)
    d.append(doc("IB", {**to_deploy(17), "launch_intent": S("done", 17, 10, request_id="r-ib")}, "B-off"))
    d.append(doc("IBN", {**to_deploy(17), "launch_intent": S("done", 17, 12, request_id="r-ibn")}, "B-on"))
    # audit-branch through launch_intent.data.continue_from (day 18): AB1 continues a tainted run
    d.append(doc("AB0", {"facts": S("done", 18, 1), "audit": S("done", 18, 2, verdict="fail", tainted=True)}, "B-ab"))
    d.append(doc("AB1", {**to_deploy(18), "launch_intent": S("done", 18, 10, request_id="r1", continue_from="AB0")}, "B-ab"))
    d.append(doc("AB2", {**to_deploy(18), "launch_intent": S("done", 18, 12, request_id="r2", continue_from="UNN")}, "B-ab"))
    return d


def phase2(docs: list[dict]) -> list[dict]:
    by = {x["run"]: x for x in docs}
    by["RNU"]["steps"]["upload_intent"] = S("done", 10, 30, sha256=sha(1), candidate="c")     # re-uploaded
    by["RNU"]["steps"]["upload_confirmed"] = S("done", 10, 31)                                  # (not left open)
    by["RNN"]["steps"]["upload_intent"] = S("done", 10, 32, sha256=sha(2), candidate="c")     # allowed
    by["RNN"]["steps"]["upload_confirmed"] = S("done", 10, 33)
    by["LRS"]["steps"]["launch_intent"] = S("done", 11, 30, request_id="req-J-2")              # id changed
    by["LRN"]["steps"]["launch_intent"] = S("done", 11, 32, request_id="req-K-1")              # same id
    return list(by.values())


EXPECTED_STEP = {"reconciled-no-reupload": "RNU", "launch-request-stable": "LRS", "upload-needs-audit": "UNA",
                 "board-daily-quota": "Q4", "duplicate-upload": "D1", "session-concurrency": "C1",
                 "session-daily-cap": "DC13", "inactive-board": "IB", "audit-branch": "AB1"}

SCHEMA = """CREATE TABLE work_packages (id TEXT PRIMARY KEY, mission_id TEXT NOT NULL, state TEXT NOT NULL,
  risk TEXT, deps TEXT, attempts INTEGER NOT NULL DEFAULT 0, last_error_sig TEXT,
  same_sig_count INTEGER NOT NULL DEFAULT 0);
CREATE TABLE circuits (scope TEXT PRIMARY KEY, state TEXT NOT NULL);"""
WPS = [  # id, mission, state, risk, deps, attempts, sig, same
    ("mA-w1", "mA", "READY", "LOW", "[]", 0, None, 0),          # -> RUNNING under an OPEN circuit
    ("mB-w1", "mB", "DONE", "LOW", "[]", 1, None, 0),           # -> RUNNING again
    ("mB-w2", "mB", "READY", "LOW", "[]", 0, None, 0),
    ("mC-w1", "mC", "READY", "LOW", "[]", 0, None, 0),
    ("mC-w2", "mC", "READY", "LOW", '["mC-w1"]', 0, None, 0),   # -> RUNNING before its dep
    ("mD-w1", "mD", "READY", "CRITICAL", "[]", 0, None, 0),     # -> RUNNING without approval
    ("mE-w1", "mE", "APPROVAL_REQUIRED", "CRITICAL", "[]", 0, None, 0),  # neighbour: approved path
    ("mF-w1", "mF", "FAILED", "LOW", "[]", 4, "E:io", 3),        # flagged; attempts 4 -> 2
    *[(f"mG-w{i}", "mG", "READY", "LOW", "[]", 0, None, 0) for i in range(5)],  # -> 5 RUNNING (cap 3)
    ("mH-w1", "mH", "DONE", "LOW", "[]", 1, None, 0),           # completed; a new WP reopens it
    ("mI-w1", "mI", "ESCALATED", "LOW", "[]", 0, None, 0),
    ("mI-w2", "mI", "BLOCKED", "LOW", "[]", 0, None, 0),
]
PHASE2_SQL = """UPDATE work_packages SET state='RUNNING' WHERE id IN ('mA-w1','mB-w1','mC-w2','mD-w1','mE-w1');
UPDATE work_packages SET state='READY', attempts=2, same_sig_count=0 WHERE id='mF-w1';
UPDATE work_packages SET state='RUNNING' WHERE mission_id='mG';
INSERT INTO work_packages VALUES ('mH-w2','mH','READY','LOW','[]',0,NULL,0);"""
EXPECTED_WP = {"circuit-open-mutation": "mA-w1", "done-redone": "mB-w1", "deps-not-done": "mC-w2",
               "critical-needs-approval": "mD-w1", "attempts-decreased": "mF-w1", "children-active-cap": "mG",
               "completed-reopened": "mH"}


def write_runs(root, docs):
    for d in docs:
        p = root / d["run"]
        p.mkdir(exist_ok=True)
        tmp = p / ".steps.json.tmp"
        tmp.write_text(json.dumps(d))
        os.replace(tmp, p / "steps.json")


def goal(root, agent, **kw):
    p = root / agent
    p.mkdir(exist_ok=True)
    g = {"agent": agent, "task": "t", "state": "busy", "phase": "haciendo", "dod_contract": "make test passes",
         "last_activity": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **kw}
    (p / ".g.tmp").write_text(json.dumps(g))
    os.replace(p / ".g.tmp", p / "goal.json")


def wait_for(pred, timeout=60.0, what="", show=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}" + (f": {show()}" if show else ""))


@pytest.fixture
def world(tmp_path):
    sock = f"fw22-{os.getpid()}"
    rx = Receiver()
    runs, goals = tmp_path / "runs", tmp_path / "goals"
    runs.mkdir()
    goals.mkdir()
    db = tmp_path / "missions.db"
    con = sqlite3.connect(db)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO work_packages VALUES (?,?,?,?,?,?,?,?)", WPS)
    con.executemany("INSERT INTO circuits VALUES (?,?)", [("mA", "OPEN")] + [(m, "CLOSED") for m in "BCDEFGHI"])
    con.commit()
    con.close()
    swarm = tmp_path / "swarm.json"
    swarm.write_text(json.dumps([{"group": "g-busy", "child": f"c{i}", "status": "running"} for i in range(9)]
                                + [{"group": "g-done", "child": f"c{i}", "status": "done"} for i in range(60)]))
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'''[store]
path = "{tmp_path}/events.db"
durability = "normal"
[watch]
interval = "1s"
[steps]
inactive_boards = ["B-off"]
[[sources]]
name = "fleet"
kind = "goals"
glob = "{goals}/*/goal.json"
[[sources]]
name = "runs"
kind = "steps"
glob = "{runs}/*/steps.json"
[[sources]]
name = "wps"
kind = "sqlite"
entity = "wp"
path = "{db}"
query = "SELECT mission_id AS mission, id AS wp, state, risk, deps, attempts, last_error_sig, same_sig_count FROM work_packages"
key = ["mission", "wp"]
[[sources]]
name = "circuits"
kind = "sqlite"
entity = "circuit"
path = "{db}"
query = "SELECT scope, state FROM circuits"
key = ["scope"]
[[sources]]
name = "swarm"
kind = "command"
entity = "swarm"
argv = ["cat", "{swarm}"]
[[sources]]
name = "tmux"
kind = "tmux"
socket = "{sock}"
agent_windows = ["x*"]
[notify]
urls = ["{rx.url()}"]
group_wait = "1s"
group_interval = "1s"
''')
    tmux = ["tmux", "-L", sock]
    subprocess.run([*tmux, "-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", "a1", "sleep 600"], check=True)
    subprocess.run([*tmux, "new-window", "-d", "-t", "fleet:", "-n", "x9", "sleep 600"], check=True)
    goal(goals, "a1")
    goal(goals, "a2")
    yield {"tmp": tmp_path, "cfg": cfg, "runs": runs, "goals": goals, "db": db, "rx": rx, "tmux": tmux}
    subprocess.run([*tmux, "kill-server"], capture_output=True)
    rx.close()


def events(path):
    log = EventLog(str(path), create=False)
    try:
        return list(log.read(0))
    finally:
        log.close()


def test_every_rule_fires_once_pushed_and_rebuild_is_clean(world):
    w = world
    docs = phase1()
    write_runs(w["runs"], docs)
    env = dict(os.environ)
    proc = subprocess.Popen([EXE, "run", "--config", str(w["cfg"])], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    dbp = w["tmp"] / "events.db"
    try:
        def classified(agent, reason):
            return dbp.exists() and any(r.type == "agent.classified" and r.event.agent == agent and
                                        r.event.to == "MAL_LANZADO" and r.event.reason == reason
                                        for r in events(dbp))
        wait_for(lambda: classified("x9", "no goal.json"), what="x9 MAL_LANZADO no goal.json")
        wait_for(lambda: len({r.event.run for r in events(dbp) if r.type == "rule.violated"}) >= 7,
                 what="the phase 1 rules", show=lambda: [(r.type, r.event) for r in events(dbp)
                                                         if r.type in ("rule.violated", "source.failed")][:40])
        # phase 2: the transitions
        write_runs(w["runs"], phase2(docs))
        con = sqlite3.connect(w["db"])
        con.executescript(PHASE2_SQL)
        con.close()
        os.remove(w["goals"] / "a1" / "goal.json")  # its window lives on
        staging = w["tmp"] / "staging"
        staging.mkdir()
        for i in range(12):  # a splitter's fan-out: 12 new agents at once
            goal(staging, f"n{i:02d}")
        for i in range(12):
            os.rename(staging / f"n{i:02d}", w["goals"] / f"n{i:02d}")
        r = subprocess.run([EXE, "verdict", "a2", "met", "--verifier", "v9", "--evidence", "", "--config", str(w["cfg"])],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        r = subprocess.run([EXE, "verdict", "a2", "met", "--verifier", "\u0430\u0032", "--evidence", "ok",
                            "--config", str(w["cfg"])], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr                      # Cyrillic а2 is a2 itself
        r = subprocess.run([EXE, "verdict", "a2", "unevaluable", "--verifier", "v9", "--evidence",
                            "the verifier cannot read the output", "--config", str(w["cfg"])],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr

        def all_there():
            evs = events(dbp)
            step = Counter(r.event.rule for r in evs if r.type == "rule.violated")
            wp = Counter(r.event.rule for r in evs if r.type == "wp.violated")
            return (set(EXPECTED_STEP) <= set(step) and set(EXPECTED_WP) <= set(wp)
                    and any(r.type == "fleet.fanout" for r in evs) and classified("a1", "goal.json missing"))
        wait_for(all_there, what="every phase 2 rule")
        wait_for(lambda: "needs a human" in " ".join(w["rx"].raw), what="the unevaluable push")
        # a few more ticks: nothing fires twice
        time.sleep(3)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    evs = events(dbp)
    step = [(r.event.rule, r.event.run) for r in evs if r.type == "rule.violated"]
    assert sorted(step) == sorted(EXPECTED_STEP.items()), step
    wp = [(r.event.rule, r.event.wp if r.event.rule not in ("children-active-cap", "completed-reopened") else r.event.mission)
          for r in evs if r.type == "wp.violated"]
    assert sorted(wp) == sorted(EXPECTED_WP.items()), wp
    flagged = sorted((r.event.wp, r.event.flag) for r in evs if r.type == "wp.flagged")
    assert flagged == [("mF-w1", "retries"), ("mF-w1", "same-error")]
    capped = [(r.event.group, r.event.cap, r.event.count) for r in evs if r.type == "swarm.capped"]
    assert capped == [("g-busy", "max-concurrent", 9)]          # g-done (60 settled children) is not over
    fan = [r.event for r in evs if r.type == "fleet.fanout"]
    # one fan-out, over fanout_max (8): the watcher's tick may fall between the 12 renames (a CI run
    # saw 11: x9 and n00..n09), so the count is how many it had seen when the rule fired
    assert len(fan) == 1 and 8 < fan[0].count <= 13, fan
    verdicts = [r.event for r in evs if r.type == "dod.verdict"]
    assert [(v.agent, v.verdict) for v in verdicts] == [("a2", "unevaluable")]
    # pushes: every rule named, with the severities stated
    body = "\n".join(w["rx"].raw)
    for rule in list(EXPECTED_STEP) + list(EXPECTED_WP):
        assert rule in body, rule
    for text in ("ESCALATED", "BLOCKED", "APPROVAL_REQUIRED", "CIRCUIT_OPEN", "9 running > max_concurrent 8",
                 "retries", "new agents within 60s", "needs a human: the verifier cannot read", "no goal.json",
                 "goal.json missing"):
        assert text in body, text
    types = {p.get("type") for p in w["rx"].posts}
    assert "failure" in types                                     # urgent pushes went out as urgent
    r = subprocess.run([EXE, "rebuild", "--check", "--config", str(w["cfg"])], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
