"""Hostile drill (issue 13): one running `fleetwatch run` gets every bad input of the issue at
once while a sentinel agent keeps changing its goal.json; every sentinel change must be recorded
within 2 s throughout.

Thrown at it: goal.json as a FIFO, a socket, /dev/zero (symlink), a folder, a 2 GiB sparse file;
steps.json as a FIFO; an id with ESC and a newline; one id in two folders; a goals root that
vanishes and returns every 1.5 s; command sources printing 1 GB, running `yes`, hanging with a
background child, exiting 3 with a secret on stderr, leaving a child that holds stdout; a sqlite
source whose database is replaced by a FIFO. The sentinel flips busy <-> waiting, waits until
its change is in the log (or 2 s passed: a miss), then changes again after 0-200 ms.

Checked afterwards: no miss, sentinel latency p99 < 2 s, the watcher's peak RSS (VmHWM) stays
far from the 1 GB it was fed, no CERRADO for the vanishing root's agents, each hostile source is
one source.failed with a typed class, the secret is not in the log, no child of a command
source is left running, watcher.stopped recorded, `verify` exits 0. The figures are printed.
Short: 25 sentinel changes, each only has to be recorded (no real-clock bound in make test: it
flaked under load); FW_DRILL_LONG=1: 300, each within 2 s and p99 < 2 s.
"""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import statistics
import subprocess
import threading
import time
from pathlib import Path

import apsw
import pytest

from events.log import EventLog, parse_iso
from tests.support.exe import FLEETWATCH

LONG = bool(os.environ.get("FW_DRILL_LONG"))
CHANGES = 300 if LONG else 25
LIMIT = 2.0     # s: the latency every change must meet in the long drill (make drills, like a bench row)
WAIT = LIMIT if LONG else 30.0   # the short one in make test waits on events only (liveness, no timing)
EXE = FLEETWATCH
SECRET = "https://user:hunter2@example.invalid/topic"
# `sleep MARK`: children the command sources leave behind (must all be killed); the number is this
# process's own, so a suite running beside this one (its own drill) leaves no false leftovers
MARK = str(4_700_000 + os.getpid())
GOOD = {"phase": "haciendo", "dod_contract": "drill passes", "last_activity": None}

pytestmark = pytest.mark.drill


def write_goal(d: Path, agent: str, state: str = "busy") -> None:
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".goal.json.tmp"
    tmp.write_text(json.dumps({"agent": agent, "state": state, **GOOD, "last_activity": time.time()}))
    os.replace(tmp, d / "goal.json")


def world(tmp: Path) -> tuple[Path, dict]:
    fleet, gone, runs = tmp / "fleet", tmp / "gone", tmp / "runs"
    write_goal(fleet / "sentinel", "sentinel")
    write_goal(fleet / "calm", "calm")
    (fleet / "fifo").mkdir()
    os.mkfifo(fleet / "fifo" / "goal.json")
    (fleet / "dev").mkdir()
    os.symlink("/dev/zero", fleet / "dev" / "goal.json")
    (fleet / "dir" / "goal.json").mkdir(parents=True)
    write_goal(fleet / "sparse", "sparse")
    with open(fleet / "sparse" / "goal.json", "r+b") as f:
        f.truncate(2 << 30)
    write_goal(fleet / "esc", "evil\x1b]0;pwned\x07\x1b[2J\nfake dod.verdict verifier=human-lead")
    write_goal(fleet / "dupe-a", "dupe")
    write_goal(fleet / "dupe-b", "dupe", "waiting")
    (fleet / "sock").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(fleet / "sock" / "goal.json"))
    for i in range(3):
        write_goal(gone / f"g{i}", f"g{i}", "waiting")
    (runs / "r1").mkdir(parents=True)
    os.mkfifo(runs / "r1" / "steps.json")
    mdb = tmp / "missions.db"
    db = apsw.Connection(str(mdb))
    db.execute("CREATE TABLE wp(mission, wp, state); INSERT INTO wp VALUES ('m1', 'w1', 'READY')")
    db.close()
    cmds = {
        "flood": ["sh", "-c", "head -c 1000000000 /dev/zero"],
        "yes": ["yes"],
        "hang": ["sh", "-c", f"sleep {MARK} & sleep {MARK}"],
        "stderr": ["sh", "-c", f"echo {SECRET} >&2; exit 3"],
        "leaver": ["sh", "-c", f"sleep {MARK} & echo []"],
    }
    text = (f'[store]\npath = "{tmp}/e.db"\ndurability = "normal"\n'
            f'[watch]\ninterval = "1s"\ndebounce = "30ms"\nresync = "1s"\n'
            f'[classify]\nstall_after = "10000d"\nclaim_unverified_after = "10000d"\n'
            f'[steps]\ndeadline = "10000d"\n'
            f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
            f'[[sources]]\nname = "gone"\nkind = "goals"\nglob = "{gone}/*/goal.json"\n'
            f'[[sources]]\nname = "runs"\nkind = "steps"\nglob = "{runs}/*/steps.json"\n'
            f'[[sources]]\nname = "missions"\nkind = "sqlite"\nentity = "wp"\npath = "{mdb}"\n'
            f'query = "SELECT mission, wp, state FROM wp"\nkey = ["mission", "wp"]\ntimeout = "2s"\n')
    for name, argv in cmds.items():
        text += f'[[sources]]\nname = "{name}"\nkind = "command"\nargv = {json.dumps(argv)}\ntimeout = "2s"\n'
    cfg = tmp / "c.toml"
    cfg.write_text(text)
    return cfg, {"sock": sock, "fleet": fleet, "gone": gone, "mdb": mdb}


def sentinel_events(db: str, since: int) -> tuple[list[tuple[float, str]], int]:
    log = EventLog(db, durability="normal", create=False)
    try:
        out, last = [], since
        for r in log.read(since, types=["agent.classified"], subject="agent:sentinel"):
            out.append((parse_iso(r.time), r.event.to))
            last = r.seq
        return out, last
    finally:
        log.close()


def leftovers() -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                with open(f"/proc/{d}/stat") as f:
                    zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                continue
            if argv[:2] == [b"sleep", MARK.encode()] and not zombie:
                pids.append(int(d))
    return pids


def vm_hwm_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def test_hostile_drill(tmp_path):
    cfg, things = world(tmp_path)
    db = str(tmp_path / "e.db")
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    proc = subprocess.Popen([EXE, "run", "--log-level", "warning", "--config", str(cfg)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop = threading.Event()

    def vanish():  # the gone root disappears and returns, again and again
        gone, away = things["gone"], tmp_path / "gone-away"
        while not stop.wait(0.75):
            os.rename(gone, away)
            if stop.wait(0.75):
                os.rename(away, gone)
                break
            os.rename(away, gone)

    try:
        seen, since = [], 0
        end = time.monotonic() + 60
        while not seen:  # up and the sentinel classified
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < end, "the watcher never recorded the sentinel"
            time.sleep(0.1)
            if os.path.exists(db):
                seen, since = sentinel_events(db, 0)
        os.unlink(things["mdb"])
        os.mkfifo(things["mdb"])             # the sqlite source's database becomes a FIFO
        mover = threading.Thread(target=vanish, daemon=True)
        mover.start()
        rng = random.Random(13)
        latencies, misses = [], 0
        state = "busy"
        for _ in range(CHANGES):
            state = "waiting" if state == "busy" else "busy"
            want = "RECLAMA" if state == "waiting" else "TRABAJANDO"
            t = time.time()
            write_goal(things["fleet"] / "sentinel", "sentinel", state)
            got = None
            while time.time() - t < WAIT + 1 and got is None:
                time.sleep(0.01)
                evs, since = sentinel_events(db, since)
                got = next((at for at, to in evs if to == want), None)
            if got is None or got - t > WAIT:
                misses += 1
            latencies.append((got - t) if got is not None else WAIT + 1)
            time.sleep(rng.uniform(0, 0.2))
        stop.set()
        mover.join(5)
        peak = vm_hwm_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        stop.set()
        things["sock"].close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lat = sorted(latencies)
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    print(f"\nhostile drill: {CHANGES} sentinel changes, misses {misses}, latency p50 {p50 * 1000:.0f} ms, "
          f"p99 {p99 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms; watcher peak RSS {peak:.1f} MB "
          f"(fed a 1 GB command output and `yes`)")
    assert proc.returncode == 0, out
    assert misses == 0, lat
    assert p99 < LIMIT or not LONG, lat   # the latency bound only where timing is the point
    assert peak < 150, peak
    log = EventLog(db, durability="normal", create=False)
    try:
        recs = list(log.read(0))
    finally:
        log.close()
    failed = {r.event.source: r.event for r in recs if r.type == "source.failed"}
    assert failed["flood"].error_class == "too-large" and failed["yes"].error_class == "too-large"
    assert failed["hang"].error_class == "timeout"
    assert (failed["stderr"].error_class, failed["stderr"].exit_code) == ("exit-status", 3)
    assert failed["missions"].error_class == "not-regular"
    assert failed["gone"].error_class == "root-missing"
    assert "runs" not in failed and "leaver" not in failed and "fleet" not in failed
    last = {}
    for r in recs:
        if r.type == "agent.classified":
            last.setdefault(r.event.agent, []).append((r.event.to, r.event.reason))
    for a in ("fifo", "dev", "dir", "sock", "sparse", "dupe"):
        assert last[a][-1][0] == "MAL_LANZADO", (a, last.get(a))
    assert "duplicate id 'dupe'" in last["dupe"][-1][1]
    assert all(to != "CERRADO" for g in ("g0", "g1", "g2") for to, _ in last[g]), last
    assert set(c for c, _ in last["sentinel"]) == {"TRABAJANDO", "RECLAMA"}
    assert recs[-1].type == "watcher.stopped"
    with open(db, "rb") as f:
        assert b"hunter2" not in f.read()
    assert leftovers() == []
    v = subprocess.run([EXE, "verify", "--db", db], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
