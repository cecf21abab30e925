"""A DoD check that kills its parent (issue 47): `["sh","-c","kill -15 $PPID"]`, or an agent's
Makefile behind `["make","test"]`, made `fleetwatch run` exit 0 with `watcher.stopped`; with
`kill -9` it died, and every restart ran the pending check again and died again. Real
`fleetwatch run` processes, real checks in their real namespaces."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.exe import FLEETWATCH
from tests.support.hostile import check, goal, rows, start, stop, verdicts, world
from tests.support.waiting import wait_for
from watcher.runtime.isolated import Budget, isolation, protected, run_isolated


def _kinds() -> list[str]:
    return [k for k in ("bwrap", "unshare", "unshare-pid") if isolation(k).kind == k]


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


ATTACKS = ["kill -15 $PPID", "kill -9 $PPID", "kill -9 -1", "pkill -9 -f 'fleetwatch|watcher.entry'"]


@pytest.mark.parametrize("kind", ["bwrap", "unshare", "unshare-pid"])
def test_checks_that_kill_their_parent_reach_nothing(tmp_path, kind):
    """Each attack is the check of an agent of its own, all claimed under one watcher: the watcher
    stays up, every check runs once in ``kind`` and every claim gets its verdict."""
    if kind not in _kinds():
        pytest.skip(f"{kind} does not isolate here: {isolation(kind).why}")
    db = str(tmp_path / "e.db")
    fleet, cfg = world(tmp_path, db, f'check_isolation = "{kind}"\n')
    counters = {f"a{i}": tmp_path / f"runs-a{i}" for i in range(len(ATTACKS))}
    for (a, counter), attack in zip(counters.items(), ATTACKS):
        goal(fleet, a, [check(["sh", "-c", f"echo run >> {counter}; {attack}; exit 0"])])
    p = start(cfg)
    try:
        wait_for(lambda: len(verdicts(db)) >= len(ATTACKS), timeout=120)
        assert p.poll() is None, "a check stopped the watcher"
        judged = [r for r in rows(db, ("dod.verdict",)) if r["data"].get("source") == "checks"]
        assert sorted(r["subject"] for r in judged) == [f"dod:{a}" for a in counters], judged
        assert all(r["data"]["verdict"] in ("met", "failed", "unevaluable") for r in judged), judged
        assert {a: _runs(c) for a, c in counters.items()} == dict.fromkeys(counters, 1)
        started = rows(db, ("dod.check_started",))
        assert [r["data"]["isolation"] for r in started] == [kind] * len(ATTACKS)
    finally:
        assert stop(p) == 0


@pytest.mark.slow
def test_without_isolation_a_check_that_kills_the_watcher_is_unevaluable_at_the_restart(tmp_path):
    """No namespace (``check_isolation = "none"``, what a host without bwrap and unshare gets): the
    check does kill the watcher, and the next start records it as the cause without running it
    again (before: 4 starts, 4 deaths)."""
    counter = tmp_path / "runs"
    db = str(tmp_path / "e.db")
    fleet, cfg = world(tmp_path, db, 'check_isolation = "none"\n')
    goal(fleet, "a1", [check(["sh", "-c", f"echo run >> {counter}; kill -9 $PPID; sleep 5"])])
    p = start(cfg)
    assert p.wait(60) == -signal.SIGKILL
    assert _runs(counter) == 1 and verdicts(db) == []
    for i in range(2):   # every later start: the verdict once, the check never again
        p = start(cfg)
        try:
            wait_for(lambda i=i: len(rows(db, ("watcher.started",))) == 2 + i and verdicts(db), timeout=60)
            assert p.poll() is None
        finally:
            assert stop(p) == 0
    assert _runs(counter) == 1
    (v,) = verdicts(db)
    assert v["verdict"] == "unevaluable" and "it stopped the watcher" in v["evidence"]


def test_an_unannounced_sigterm_under_a_service_manager_exits_1_and_the_announced_stop_0(tmp_path):
    """The unit restarts the watcher after every exit it did not ask for (Restart=always) and its
    ExecStopPost= pushes then; the stop it asks for comes as SIGUSR1 (ExecStop=) then SIGTERM."""
    db = str(tmp_path / "e.db")
    _, cfg = world(tmp_path, db)
    env = {"INVOCATION_ID": "0123456789abcdef0123456789abcdef"}
    for announce, rc, reason in ((False, 1, "signal-unasked"), (True, 0, "signal")):
        p = start(cfg, env)
        wait_for(lambda: rows(db, ("watcher.started",)) and
                 len(rows(db, ("watcher.started",))) > len(rows(db, ("watcher.stopped",))), timeout=60)
        if announce:
            p.send_signal(signal.SIGUSR1)
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == rc
        assert rows(db, ("watcher.stopped",))[-1]["data"]["reason"] == reason


@pytest.mark.parametrize("kind", ["bwrap", "unshare", "unshare-pid"])
def test_every_isolation_gives_the_command_its_stdin(tmp_path, kind):
    """The verifier reads the claim on its stdin, under whichever isolation the host has: under
    unshare the command runs as an asynchronous list of sh, whose stdin is /dev/null unless
    redirected from a saved descriptor (the verifier read nothing on a host without bwrap)."""
    if kind not in _kinds():
        pytest.skip(f"{kind} does not isolate here: {isolation(kind).why}")
    r = run_isolated(["sh", "-c", "cat; echo; echo $$"], str(tmp_path), 30, b'{"agent": "a1"}', isolate=kind)
    assert r.error_class is None and r.out.startswith(b'{"agent": "a1"}\n'), r
    assert int(r.out.split()[-1]) <= 3, r                      # its own PID namespace


def test_run_isolated_gives_stdin_and_keeps_the_budget(tmp_path):
    """What the verifier process reuses: stdin in, stdout capped, every file capped."""
    r = run_isolated(["sh", "-c", "cat; echo; echo $$"], str(tmp_path), 30, b'{"agent": "a1"}')
    assert r.error_class is None and r.out.startswith(b'{"agent": "a1"}')
    if isolation().kind != "none":
        assert int(r.out.split()[-1]) <= 3                       # its own PID namespace
    r = run_isolated(["sh", "-c", "head -c 100000 /dev/zero > big"], str(tmp_path), 30, None,
                     Budget(1 << 20, 4096))
    assert r.error_class is not None and "budget" in r.error and os.path.getsize(tmp_path / "big") == 4096
    r = run_isolated(["yes"], str(tmp_path), 30, None, Budget(10_000))
    assert r.error_class is not None and "too large" in r.error


def test_doctor_says_how_checks_are_isolated(tmp_path):
    from tests.support.fwcli import fw

    db = str(tmp_path / "e.db")
    _, cfg = world(tmp_path, db)
    out = fw("doctor", "--config", str(cfg)).stdout
    kind = isolation().kind
    assert (f"checks: each runs in its own PID namespace ({kind})" in out) if kind != "none" else \
        ("checks: run without isolation" in out), out


@pytest.mark.slow
def test_the_units_exec_stop_post_pushes_only_for_an_exit_it_did_not_ask_for(tmp_path):
    """``ExecStopPost=fleetwatch notify-stopped --unasked`` runs after every exit of the watcher's
    unit; systemd hands it $SERVICE_RESULT, $EXIT_CODE and $EXIT_STATUS."""
    from tests.support.fwcli import fw
    from tests.support.receiver import Sink

    sink = Sink()
    try:
        _, cfg = world(tmp_path, str(tmp_path / "e.db"), notify=sink.url())
        asked = {"SERVICE_RESULT": "success", "EXIT_CODE": "exited", "EXIT_STATUS": "0"}
        final = {"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "2"}   # OnFailure= says it
        for env in (asked, final):
            r = fw("notify-stopped", "--unasked", "--config", str(cfg), env=env)
            assert r.returncode == 0 and "not pushed" in r.stdout, r.stdout + r.stderr
        killed = {"SERVICE_RESULT": "signal", "EXIT_CODE": "killed", "EXIT_STATUS": "KILL"}
        r = fw("notify-stopped", "--unasked", "--config", str(cfg), env=killed)
        assert r.returncode == 0 and "delivered" in r.stdout, r.stdout + r.stderr
        body = wait_for(lambda: sink.bodies, timeout=30)[0]
        assert body["title"] == "fleetwatch stopped: signal" and "starts it again" in body["message"]
        # stopped again and again (each restart on a full disk exits 1): one push per 10 minutes
        r = fw("notify-stopped", "--unasked", "--config", str(cfg),
               env={"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "1"})
        assert r.returncode == 0 and "not pushed: said less than 10 minutes ago" in r.stdout, r.stdout
        stamp = tmp_path / "e.db.stopped-said"
        os.utime(stamp, (time.time() - 700, time.time() - 700))
        r = fw("notify-stopped", "--unasked", "--config", str(cfg),
               env={"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "1"})
        assert r.returncode == 0 and "delivered" in r.stdout, r.stdout
        wait_for(lambda: len(sink.bodies) == 2, timeout=30)
        assert sink.bodies[1]["title"] == "fleetwatch stopped: exit-code"
    finally:
        sink.close()


@pytest.mark.skipif("bwrap" not in _kinds(), reason="bwrap does not isolate here (unshare leaves the log writable)")
def test_a_check_cannot_touch_the_log_it_is_judged_into(tmp_path):
    """Under bwrap the log's folder and the watcher's state are read-only to a check: it can
    neither delete, append to nor replace the log, nor write beside it; its own folder stays
    writable. The attack runs through a real `fleetwatch run`, then `verify` holds."""
    store = tmp_path / "store"
    store.mkdir()
    db = store / "e.db"
    fleet, cfg = world(tmp_path, str(db))
    work = tmp_path / "work"
    work.mkdir()
    attack = (f"rm -f {db} {db}-wal; echo junk >> {db}; echo x > {store}/planted; "
              f"echo ok > built; test ! -e {store}/planted && test -s {db}")
    goal(fleet, "a1", [check(["sh", "-c", attack])], cwd=str(work))
    p = start(cfg, env={"XDG_STATE_HOME": str(tmp_path / "state")})
    try:
        v = wait_for(lambda: verdicts(str(db)), timeout=60)
    finally:
        assert stop(p) == 0
    assert v[0]["verdict"] == "met", v                    # every write to the log's folder failed
    assert (work / "built").read_text() == "ok\n" and not (store / "planted").exists()
    r = subprocess.run([FLEETWATCH, "verify", "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_only_folders_that_hold_no_part_of_the_checks_own_folder_are_protected(tmp_path):
    (tmp_path / "state" / "repo").mkdir(parents=True)
    (tmp_path / "log").mkdir()
    ro = (str(tmp_path / "log"), str(tmp_path / "state"), str(tmp_path / "missing"), "/", str(tmp_path / "log"))
    assert protected(ro, str(tmp_path / "state" / "repo")) == [str(tmp_path / "log")]
    assert protected(ro, str(tmp_path / "elsewhere")) == [str(tmp_path / "log"), str(tmp_path / "state")]


def test_a_folder_that_holds_the_home_folder_is_never_made_read_only(tmp_path, monkeypatch):
    """A log kept in ~ would make every cache a check writes under ~ read-only (a false
    "failed"): the log's files are protected, its folder is not."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "e.db").write_bytes(b"x")
    monkeypatch.setenv("HOME", str(home))
    ro = (str(home), str(home / "e.db"), str(home / "e.db-wal"), str(tmp_path))
    assert protected(ro, str(tmp_path / "elsewhere" / "repo")) == [str(home / "e.db")]
