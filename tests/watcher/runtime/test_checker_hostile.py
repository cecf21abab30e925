"""The DoD checker attacked by hostile checks and a hostile run of the watcher: real `fleetwatch
run` processes, real goal.json files, real check processes (found by a marker in their argv)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.checker import Checker
from tests.support.waiting import tick_until
from watcher.runtime.loop import Watcher
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def _world(tmp_path: Path, timeout: str = "120s") -> tuple[Path, Path]:
    fleet = tmp_path / "fleet"
    fleet.mkdir(exist_ok=True)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                   f'[dod]\nrun_checks = true\ncheck_timeout = "{timeout}"\n[watch]\ninterval = "200ms"\n')
    return fleet, cfg


def _goal(fleet: Path, agent: str, checks: list, claim: bool = True) -> None:
    d = fleet / agent
    d.mkdir(parents=True, exist_ok=True)
    g = {"agent": agent, "state": "idle" if claim else "busy", "phase": "hecho" if claim else "haciendo",
         "dod_contract": checks, "cwd": str(d), "last_activity": time.time()}
    (d / "g.tmp").write_text(json.dumps(g))
    os.replace(d / "g.tmp", d / "goal.json")


def _pids(marker: str) -> list[int]:
    """The check's own processes (named ``marker-…`` by ``exec -a``), not its sandbox's."""
    out = subprocess.run(["pgrep", "-f", f"^{marker}-"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _wait(pred, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _hanging(marker: str) -> dict:
    """A check whose leader hangs and whose grandchild (same process group) hangs too."""
    return {"id": "hang", "kind": "cmd", "required": True,
            "cmd": ["bash", "-c", f"(exec -a {marker}-grandchild sleep 600) & exec -a {marker}-leader sleep 100000"]}


def _verdicts(db: Path) -> list:
    log = EventLog(str(db), create=False, readonly=True)
    try:
        return [r.event for r in log.read(types=["dod.verdict"])]
    finally:
        log.close()


def _run_with_hanging_check(tmp_path: Path, marker: str, env: dict) -> subprocess.Popen:
    fleet, cfg = _world(tmp_path)
    _goal(fleet, "a1", [_hanging(marker)])
    p = subprocess.Popen([FW, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    assert _wait(lambda: len(_pids(marker)) == 2), "the check never started"
    return p


def test_a_watcher_stopped_mid_check_leaves_no_check_running(tmp_path):
    """A watcher stopped by SIGTERM (exit 0) in the middle of a check leaves nothing of it
    running: the check's leader and its grandchild (sleep 100000) are killed with it, not left to
    a timeout that died with the process."""
    marker = f"fw-hostile-term-{os.getpid()}"
    p = _run_with_hanging_check(tmp_path, marker, dict(os.environ))
    try:
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
        assert _wait(lambda: not _pids(marker), 5), f"left running: {_pids(marker)}"
    finally:
        for pid in _pids(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_watcher_killed_9_mid_check_has_its_checks_killed_and_not_run_again(tmp_path):
    """After kill -9 mid-check, the restart kills what the dead watcher started and does not run
    those checks again (a check that kills its parent would kill every start): the claim is
    ``unevaluable: it stopped the watcher``."""
    marker = f"fw-hostile-kill-{os.getpid()}"
    env = dict(os.environ)
    p = _run_with_hanging_check(tmp_path, marker, env)
    try:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        p = subprocess.Popen([FW, "run", "--config", str(tmp_path / "config.toml")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
        assert _wait(lambda: bool(_verdicts(tmp_path / "e.db"))), "no verdict after the restart"
        assert _wait(lambda: not _pids(marker), 10), f"the dead watcher's check still runs: {_pids(marker)}"
        time.sleep(1.0)
        assert not _pids(marker)                       # not run again
        (v,) = _verdicts(tmp_path / "e.db")
        assert v.verdict == "unevaluable" and "it stopped the watcher" in v.evidence
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        for pid in _pids(marker):
            os.kill(pid, signal.SIGKILL)


def test_the_restart_never_kills_a_group_that_is_not_the_recorded_one(tmp_path):
    """A record left by a dead watcher whose group number now names a stranger's process (another
    start time) is forgotten, the stranger left alone."""
    from watcher.runtime import checkgroups

    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        folder = tmp_path / "groups"
        folder.mkdir()
        (folder / str(stranger.pid)).write_text("1 999999999 1\n")   # wrong start, dead owner
        assert checkgroups.reap(str(folder)) == 0
        assert stranger.poll() is None and not list(folder.iterdir())
    finally:
        stranger.kill()
        stranger.wait()


def test_a_verdict_for_an_ended_claim_is_never_the_next_claims(tmp_path):
    """A verdict belongs to the claim whose checks produced it: an agent claims done, its slow
    check starts, it goes back to work, breaks the tests and claims again; the first run's `met`,
    arriving after the second claim (or even after its `failed`), is dropped, and the DoD's
    verdict is the second claim's `failed`."""
    fleet, cfgp = _world(tmp_path)
    flag, started = tmp_path / "broken", tmp_path / "started"
    slow = {"id": "tests", "kind": "cmd", "required": True,
            "cmd": ["sh", "-c", f"test ! -e {flag} || exit 1; touch {started}; sleep 1.5"]}
    cfg = parse(cfgp.read_text())
    _goal(fleet, "a1", [slow], claim=False)
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    w.checker = Checker.from_config(cfg)
    try:
        tick_until(w, lambda: "a1" in w.proj["fleet"]["agents"])
        _goal(fleet, "a1", [slow])                                   # claim 1: the check starts
        tick_until(w, started.exists)                               # ... and has passed its test
        _goal(fleet, "a1", [slow], claim=False)                      # back to work
        tick_until(w, lambda: w.proj["dod"]["agents"]["a1"]["claim_seq"] == 0)
        flag.write_text("")                                          # ... and breaks the tests
        _goal(fleet, "a1", [slow])                                   # claim 2
        tick_until(w, lambda: w.proj["dod"]["agents"]["a1"]["claim_seq"] != 0)
        tick_until(w, lambda: any(e.source == "checks" for e in _verdicts(tmp_path / "e.db")), 30)
        for _ in range(10):
            w.tick(time.time())
            time.sleep(0.05)
        vs = [e for e in _verdicts(tmp_path / "e.db") if e.source == "checks"]
        assert [v.verdict for v in vs] == ["failed"], [v.verdict for v in vs]
        assert w.proj["dod"]["agents"]["a1"]["verdict"]["verdict"] == "failed"
    finally:
        w.checker.close()
        w.close()


def test_hanging_checks_do_not_hold_the_others(tmp_path):
    """Checks run side by side (bounded): three agents whose checks hang do not hold a fourth
    agent's passing check until their timeouts: it is met while the three still run (no verdict
    yet), well before their 120 s timeout."""
    fleet, cfgp = _world(tmp_path, timeout="120s")
    slow = [f"slow{i}" for i in range(3)]
    for a in slow:
        _goal(fleet, a, [{"id": "h", "kind": "cmd", "cmd": ["sleep", "600"]}])
    _goal(fleet, "zquick", [{"id": "q", "kind": "cmd", "cmd": ["true"]}])
    cfg = parse(cfgp.read_text())
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    w.checker = Checker.from_config(cfg)

    def verdict(agent: str) -> str | None:
        return (w.proj["dod"]["agents"].get(agent, {}).get("verdict") or {}).get("verdict")

    try:
        tick_until(w, lambda: verdict("zquick") == "met", 90)
        assert [verdict(a) for a in slow] == [None] * len(slow)
    finally:
        w.checker.close()
        w.close()


def test_a_backtracking_stdout_re_does_not_freeze_the_watcher(tmp_path):
    """A catastrophically backtracking `stdout_re` (`^(a+)+$` over 40 a's and a '!') does not
    freeze the watcher: that claim is `unevaluable` (its stdout_re named), another agent's claim
    still gets its verdict, and SIGTERM still stops the watcher."""
    fleet, cfg = _world(tmp_path, timeout="3s")
    bad = {"id": "re", "kind": "cmd", "cmd": [sys.executable, "-c", "print('a' * 40 + '!')"],
           "expect": {"exit": 0, "stdout_re": "^(a+)+$"}}
    good = {"id": "re", "kind": "cmd", "cmd": ["echo", "all 12 passed"], "expect": {"stdout_re": r"all \d+ passed"}}
    _goal(fleet, "redos", [bad])
    _goal(fleet, "other", [good], claim=False)
    p = subprocess.Popen([FW, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait(lambda: (tmp_path / "e.db").exists() and bool(_verdicts(tmp_path / "e.db")), 20)
        _goal(fleet, "other", [good])
        assert _wait(lambda: len(_verdicts(tmp_path / "e.db")) == 2, 20), "the watcher froze"
        v = {e.agent: e for e in _verdicts(tmp_path / "e.db")}
        assert v["redos"].verdict == "unevaluable" and "stdout_re" in v["redos"].checks[0]["why"]
        assert v["other"].verdict == "met" and v["other"].checks[0]["comparison"] == "stdout matches"
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_a_claim_that_moves_its_cwd_is_not_checked_elsewhere(tmp_path):
    """goal.json's `cwd` is the agent's to write: an agent that claims done with `cwd` moved to a
    folder where its pinned check passes is not checked there; the claim is `unevaluable`
    ("cwd changed")."""
    fleet, cfgp = _world(tmp_path)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "ok").write_text("")
    check = [{"id": "t", "kind": "cmd", "cmd": ["test", "-f", "ok"]}]
    _goal(fleet, "a1", check, claim=False)
    cfg = parse(cfgp.read_text())
    w = Watcher(cfg, EventLog(cfg.store.path, durability="normal"))
    w.checker = Checker.from_config(cfg)
    try:
        tick_until(w, lambda: "a1" in w.proj["fleet"]["agents"])
        d = fleet / "a1"
        g = {"agent": "a1", "state": "idle", "phase": "hecho", "dod_contract": check, "cwd": str(fake),
             "last_activity": time.time()}
        (d / "g.tmp").write_text(json.dumps(g))
        os.replace(d / "g.tmp", d / "goal.json")
        tick_until(w, lambda: bool(_verdicts(tmp_path / "e.db")))
        v = _verdicts(tmp_path / "e.db")[0]
        assert v.verdict == "unevaluable" and "cwd changed" in v.evidence, (v.verdict, v.evidence)
    finally:
        w.checker.close()
        w.close()


def test_an_unwritable_groups_folder_warns_once_and_checks_still_run(tmp_path, caplog):
    """A check-groups folder that cannot be written is warned about once, not once per check
    started, and the checks still run."""
    from watcher.runtime.checker import run_check

    (tmp_path / "groups").write_text("a file, not a folder")
    c = Checker(10, 1 << 20, groups=str(tmp_path / "groups"))
    try:
        for _ in range(3):
            r = run_check({"id": "t", "kind": "cmd", "cmd": ["true"]}, str(tmp_path), 10, 1 << 20, c.running)
            assert r["status"] == "pass"
    finally:
        c.close()
    warned = [r for r in caplog.records if r.name == "fleetwatch.checker" and r.levelname == "WARNING"]
    assert len(warned) == 1, [r.getMessage() for r in warned]
