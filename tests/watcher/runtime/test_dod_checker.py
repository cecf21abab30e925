"""The DoD checker: structured contracts validated, real commands run (pass, fail, hang, flood,
forking, missing), one verdict per claim through the real watcher (also across a kill -9),
the contract pinned at launch, nothing the agent writes turns a failing check into ``met``, and
the seed's own example (an sqlite3 count over a real database)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from events.log import EventLog
from projections.dod.checks import compare, decide, parse_contract
from watcher.config import parse
from watcher.runtime.checker import Checker, run_check
from watcher.runtime.loop import Watcher
from tests.support.exe import FLEETWATCH
from tests.support.waiting import tick_until

FW = FLEETWATCH
PASS = {"id": "ok", "kind": "cmd", "cmd": ["sh", "-c", "echo all green; exit 0"], "required": True}
FAIL = {"id": "tests", "kind": "cmd", "cmd": ["sh", "-c", "echo '1 failed, 9 passed'; exit 1"],
        "expect": {"exit": 0}, "required": True}


# ---- the contract's shape -----------------------------------------------------------------------
@pytest.mark.parametrize("value, error", [
    ([PASS], None),
    ("free text criteria", None),
    ([{"id": "demo", "kind": "screenshot", "expected": "board shows 10 agents", "required": False}], None),
    ([{"kind": "cmd", "cmd": ["true"]}], "id must be a non-empty string"),
    ([PASS, PASS], "duplicate id"),
    ([{"id": "t", "kind": "cmd", "cmd": "make test"}], "cmd must be a non-empty list of strings"),
    ([{"id": "t", "kind": "cmd", "cmd": ["make"], "expect": {"exit": "0"}}], "expect.exit must be an integer"),
    ([{"id": "t", "kind": "cmd", "cmd": ["make"], "expect": {"stdout_gt": "x"}}], "expect.stdout_gt must be a number"),
    ([{"id": "t", "kind": "cmd", "cmd": ["make"], "expect": {"stdout_re": "("}}], "does not compile"),
    ([{"id": "t", "kind": "cmd", "cmd": ["make"], "expect": {"exit_code": 0}}], "unknown expect key"),
    ([{"id": "t", "kind": "cmd", "cmd": ["make"], "required": "yes"}], "required must be true or false"),
    ([7], "is not an object"),
    (7, "wrong type"),
])
def test_contract_validation(value, error):
    c = parse_contract(value)
    if error is None:
        assert c.error is None and c.digest
    else:
        assert c.error and error in c.error


def test_a_malformed_contract_is_mal_lanzado_with_the_reason(tmp_path):
    fleet, cfg = _world(tmp_path)
    _goal(fleet, "a1", dod_contract=[{"id": "t", "kind": "cmd", "cmd": "make test"}])
    w = Watcher(cfg, EventLog(cfg.store.path))
    tick_until(w, lambda: "a1" in w.proj["fleet"]["agents"])
    a = w.proj["fleet"]["agents"]["a1"]
    assert a["class"] == "MAL_LANZADO" and "cmd must be a non-empty list of strings" in a["reason"]
    w.close()


@pytest.mark.parametrize("expect, code, out, ok", [
    ({"exit": 0}, 0, "", True),
    ({"exit": 0}, 1, "", False),
    ({"stdout_gt": 0}, 0, "12\n", True),
    ({"stdout_gt": 0}, 0, "0\n", False),
    ({"stdout_gt": 0}, 0, "none\n", False),
    ({"stdout_lt": 5}, 0, "3", True),
    ({"stdout_eq": "ok"}, 0, " ok\n", True),
    ({"stdout_eq": "ok"}, 0, "ok!", False),
    ({"stdout_re": r"\b0 failed"}, 0, "10 passed, 0 failed", True),
    ({"exit": 0, "stdout_gt": 0}, 1, "5", False),      # all given must hold
])
def test_comparisons(expect, code, out, ok):
    assert compare({"expect": expect}, code, out)[0] is ok


@pytest.mark.parametrize("statuses, verdict", [
    ([("pass", True), ("pass", True)], "met"),
    ([("pass", True), ("fail", True)], "failed"),
    ([("fail", True), ("unevaluable", True)], "failed"),
    ([("pass", True), ("unevaluable", True)], "unevaluable"),
    ([("pass", True), ("fail", False)], "met"),          # optional checks do not decide
    ([("skipped", False)], "unevaluable"),               # nothing required could be run
])
def test_decide(statuses, verdict):
    assert decide([{"status": s, "required": r} for s, r in statuses]) == verdict


# ---- real commands --------------------------------------------------------------------------------
def test_pass_and_fail_with_evidence(tmp_path):
    r = run_check(PASS, str(tmp_path), 10, 1 << 20)
    assert r["status"] == "pass" and r["exit"] == 0 and r["lines"] == ["all green"] and len(r["digest"]) == 16
    r = run_check(FAIL, str(tmp_path), 10, 1 << 20)
    assert r["status"] == "fail" and r["exit"] == 1 and "exit 1 != 0" in r["comparison"]
    assert r["lines"] == ["1 failed, 9 passed"]


def test_a_hanging_check_is_unevaluable_at_the_timeout(tmp_path):
    r = run_check({"id": "h", "kind": "cmd", "cmd": ["sleep", "60"]}, str(tmp_path), 0.5, 1 << 20)
    # "timed out" is the proof it did not wait: `sleep 60` run to its end would be a pass
    assert r["status"] == "unevaluable" and "timed out" in r["why"]


def test_a_flooding_check_is_cut_and_unevaluable(tmp_path):
    r = run_check({"id": "f", "kind": "cmd", "cmd": ["yes"]}, str(tmp_path), 10, 100_000)
    assert r["status"] == "unevaluable" and "too large" in r["why"]


def test_a_forking_check_leaves_nothing_running(tmp_path):
    marker = f"fw-check-fork-{os.getpid()}"
    r = run_check({"id": "k", "kind": "cmd", "cmd": ["sh", "-c", f"(exec -a {marker} sleep 120) & echo 1"],
                   "expect": {"stdout_gt": 0}}, str(tmp_path), 10, 1 << 20)
    assert r["status"] == "pass"

    def left() -> str:
        return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.strip()

    end = time.monotonic() + 30   # gone (killed, not its 120 s run out): waited, generous under load
    while left() and time.monotonic() < end:
        time.sleep(0.1)
    assert left() == ""


def test_a_missing_binary_or_folder_is_never_met(tmp_path):
    r = run_check({"id": "m", "kind": "cmd", "cmd": ["no-such-binary-fw"]}, str(tmp_path), 5, 1 << 20)
    assert r["status"] == "unevaluable"
    r = run_check(PASS, str(tmp_path / "nope"), 5, 1 << 20)
    assert r["status"] == "unevaluable" and "cwd" in r["why"]


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 command-line tool is not installed")
def test_the_seeds_example_an_sqlite3_count(tmp_path):
    db = sqlite3.connect(tmp_path / "ops.db")
    db.execute("CREATE TABLE fleet_events (id INTEGER)")
    check = {"id": "events", "kind": "cmd", "cmd": ["sqlite3", "ops.db", "SELECT count(*) FROM fleet_events"],
             "expect": {"stdout_gt": 0}, "required": True}
    db.commit()
    assert run_check(check, str(tmp_path), 10, 1 << 20)["status"] == "fail"     # empty table: not done
    db.executemany("INSERT INTO fleet_events VALUES (?)", [(i,) for i in range(3)])
    db.commit()
    db.close()
    r = run_check(check, str(tmp_path), 10, 1 << 20)
    assert r["status"] == "pass" and r["lines"] == ["3"]


# ---- through the watcher ---------------------------------------------------------------------------
def _world(tmp_path, checks: bool = True, timeout: str = "20s"):
    fleet = tmp_path / "fleet"
    fleet.mkdir(exist_ok=True)
    text = (f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
            f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
            f'[dod]\nrun_checks = {"true" if checks else "false"}\ncheck_timeout = "{timeout}"\n')
    (tmp_path / "config.toml").write_text(text)
    return fleet, parse(text)


def _goal(fleet: Path, agent: str, **kw) -> None:
    d = fleet / agent
    d.mkdir(parents=True, exist_ok=True)
    g = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": [PASS], "cwd": str(d),
         "dod": "private session text", "last_activity": time.time()}
    g.update(kw)
    (d / "g.tmp").write_text(json.dumps(g))
    os.replace(d / "g.tmp", d / "goal.json")


def _claim(fleet: Path, agent: str, **kw) -> None:
    _goal(fleet, agent, state="idle", phase="hecho", **kw)


def _verdicts(path) -> list:
    log = EventLog(str(path), create=False, readonly=True)
    try:
        return [r.event for r in log.read(types=["dod.verdict"])]
    finally:
        log.close()


def _watcher(cfg) -> Watcher:
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    w.checker = Checker.from_config(cfg)
    return w


def test_failing_tests_get_failed_with_evidence_and_a_real_done_gets_met(tmp_path):
    fleet, cfg = _world(tmp_path)
    _goal(fleet, "liar", dod_contract=[FAIL])
    _goal(fleet, "honest", dod_contract=[PASS])
    w = _watcher(cfg)
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) >= 1)
    _claim(fleet, "liar", dod_contract=[FAIL])
    _claim(fleet, "honest", dod_contract=[PASS])
    tick_until(w, lambda: len(_verdicts(cfg.store.path)) == 2)
    v = {e.agent: e for e in _verdicts(cfg.store.path)}
    assert v["liar"].verdict == "failed" and v["liar"].verifier == "fleetwatch-checks"
    assert v["liar"].checks[0]["exit"] == 1 and len(v["liar"].checks[0]["digest"]) == 16
    assert "lines" not in v["liar"].checks[0]          # the output is never stored unless asked for
    assert v["honest"].verdict == "met"
    assert "private session text" not in json.dumps([e.evidence for e in v.values()])
    # the liar rewrites its own file: met, verified by "someone"; the DoD stays failed
    _claim(fleet, "liar", dod_contract=[FAIL], dod_status="met", dod_verifier="human-lead")
    for _ in range(5):
        w.tick(time.time())
    assert w.proj["dod"]["agents"]["liar"]["verdict"]["verdict"] == "failed"
    assert len([e for e in _verdicts(cfg.store.path) if e.source == "checks"]) == 2   # exactly one each
    w.checker.close()
    w.close()


def test_a_contract_rewritten_after_launch_is_refused(tmp_path):
    fleet, cfg = _world(tmp_path)
    _goal(fleet, "a1", dod_contract=[FAIL])
    w = _watcher(cfg)
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) >= 1)
    _claim(fleet, "a1", dod_contract=[PASS])      # the agent swapped its failing test for `exit 0`
    tick_until(w, lambda: any(e.source == "checks" for e in _verdicts(cfg.store.path)))
    v = [e for e in _verdicts(cfg.store.path) if e.source == "checks"][0]
    assert v.verdict == "unevaluable" and "contract changed since launch" in v.evidence and v.checks == []
    w.checker.close()
    w.close()


def test_a_required_screenshot_needs_a_human(tmp_path):
    fleet, cfg = _world(tmp_path)
    shot = {"id": "demo", "kind": "screenshot", "expected": "board shows 10 agents", "required": True}
    _goal(fleet, "a1", dod_contract=[PASS, shot])
    w = _watcher(cfg)
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) >= 1)
    _claim(fleet, "a1", dod_contract=[PASS, shot])
    tick_until(w, lambda: bool(_verdicts(cfg.store.path)))
    v = _verdicts(cfg.store.path)[0]
    assert v.verdict == "unevaluable" and "needs a human or a verifier agent" in v.evidence
    assert "screenshot 'demo'" in json.dumps(v.checks)
    w.checker.close()
    w.close()


def test_checks_are_off_unless_asked(tmp_path):
    fleet, cfg = _world(tmp_path, checks=False)
    _claim(fleet, "a1", dod_contract=[PASS])
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    w.checker = Checker.from_config(cfg)
    assert w.checker is None
    w.tick(time.time())
    assert _verdicts(cfg.store.path) == []
    w.close()


def test_kill_between_claim_and_verdict_gives_exactly_one_verdict(tmp_path):
    """A real `fleetwatch run`, killed -9 while a slow check runs: the restart does not run it
    again (it may be what killed the watcher) and the log holds one checker verdict for the
    claim, unevaluable."""
    started = tmp_path / "check-started"   # this test's own check (a suite beside it runs the same one)
    slow = {"id": "slow", "kind": "cmd", "cmd": ["sh", "-c", f"touch {started}; sleep 10; echo done"],
            "required": True}
    fleet, cfg = _world(tmp_path)
    (tmp_path / "config.toml").write_text((tmp_path / "config.toml").read_text() + '[watch]\ninterval = "200ms"\n')
    _claim(fleet, "a1", dod_contract=[slow])
    args = [FW, "run", "--config", str(tmp_path / "config.toml")]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not started.exists():
            time.sleep(0.05)
        assert started.exists(), "the check never started"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        assert _verdicts(cfg.store.path) == []
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 60
        while time.monotonic() < end and not _verdicts(cfg.store.path):
            time.sleep(0.1)
        time.sleep(1.0)          # a few more ticks: nothing is checked twice
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(20)
    vs = [e for e in _verdicts(cfg.store.path) if e.source == "checks"]
    assert len(vs) == 1 and vs[0].verdict == "unevaluable" and "it stopped the watcher" in vs[0].evidence


def test_the_output_s_last_lines_are_kept_only_when_asked(tmp_path):
    fleet, cfg = _world(tmp_path)
    cfg = parse((tmp_path / "config.toml").read_text() + "check_output_lines = 2\n")
    _goal(fleet, "a1", dod_contract=[FAIL])
    w = _watcher(cfg)
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) >= 1)
    _claim(fleet, "a1", dod_contract=[FAIL])
    tick_until(w, lambda: len(_verdicts(cfg.store.path)) == 1)
    assert _verdicts(cfg.store.path)[0].checks[0]["lines"] == ["1 failed, 9 passed"]
    w.checker.close()
    w.close()


def test_check_by_hand(tmp_path):
    fleet, cfg = _world(tmp_path, checks=False)
    _goal(fleet, "a1", dod_contract=[FAIL])
    cfgp = str(tmp_path / "config.toml")
    subprocess.run([FW, "run", "--once", "--config", cfgp], check=True, capture_output=True, timeout=60)
    r = subprocess.run([FW, "check", "a1", "--dry-run", "--config", cfgp], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "tests (cmd, required)" in r.stdout and "expect" in r.stdout
    assert _verdicts(cfg.store.path) == []
    r = subprocess.run([FW, "check", "a1", "--config", cfgp], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "recorded dod.verdict failed" in r.stdout and "1 failed, 9 passed" in r.stdout
    r = subprocess.run([FW, "check", "nosuch", "--config", cfgp], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nosuch" in r.stderr


def test_status_shows_the_per_check_results(tmp_path):
    fleet, cfg = _world(tmp_path)
    _goal(fleet, "liar", dod_contract=[FAIL, PASS])
    w = _watcher(cfg)
    tick_until(w, lambda: len(w.proj["fleet"]["agents"]) >= 1)
    _claim(fleet, "liar", dod_contract=[FAIL, PASS])
    tick_until(w, lambda: bool(_verdicts(cfg.store.path)))
    w.checker.close()
    w.close()
    cfgp = str(tmp_path / "config.toml")
    r = subprocess.run([FW, "status", "--json", "--config", cfgp], capture_output=True, text=True, timeout=60)
    doc = json.loads(r.stdout)
    liar = [a for a in doc["agents"] if a["agent"] == "liar"][0]
    assert liar["dod_status"] == "failed"
    assert liar["dod"]["checks"] == [{"id": "tests", "status": "fail"}, {"id": "ok", "status": "pass"}]
    r = subprocess.run([FW, "status", "--config", cfgp], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "200"})
    assert "failed (tests ✗ ok ✓)" in r.stdout, r.stdout


def test_a_relative_cwd_is_never_run_and_no_cwd_means_the_goal_folder(tmp_path):
    r = run_check(PASS, "relative/dir", 5, 1 << 20)
    assert r["status"] == "unevaluable" and "absolute" in r["why"]
    from types import SimpleNamespace as NS

    from watcher.runtime.checker import work_dir
    assert work_dir(NS(cwd=None, path=str(tmp_path / "a1" / "goal.json"))) == str(tmp_path / "a1")
    assert work_dir(NS(cwd="/srv/x", path=str(tmp_path / "a1" / "goal.json"))) == "/srv/x"
