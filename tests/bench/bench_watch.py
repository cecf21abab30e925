"""Benchmark: the watcher where a big fleet is: first tick, idle cost, memory and latency at
10,000 and 50,000 agents (quick: 1,000 and 5,000, a smoke test whose figures are not the report).

1. Ticks in-process (``Watcher.tick``, real files, a real log with the default durability, the GC
   settled as ``fleetwatch run`` does) against the floor measured in the same run on the same
   files, interleaved with the ticks: plain ``glob`` + ``open().read()`` + ``json.loads`` of every
   goal.json (what any watcher must do to see the level at all). First tick (every agent new:
   N events appended and folded), best of 3 on a fresh log each; targets ≤ 2× the floor at
   10k and ≤ 2.5× at 50k. A full resync with 1 % changed (≤ 0.3×) and with none (≤ 0.2×). Info:
   µs per agent at each size (linearity), and where a first tick goes (observe / detect / commit).
   From 2,000 files the watcher's first poll runs in two processes (watcher/sources/forkread.py);
   the floor is one process, and the row says so. (info) The same first tick over a fleet in
   every class (``MIX``: waiting, stalled, claiming done, no contract, as after a night), which
   opens notify conditions and report intervals an all-working fleet never does.
2. A real ``fleetwatch run`` per size (interval 2 s, debounce 100 ms, resync 30 s, inotify):
   - idle for 60 s (quick: 10 s) after its start-up (all classified, then its CPU under 15 % for
     two 1 s samples: inotify's watches come after the first tick): CPU % from /proc (target < 1 % at 10k,
     < 5 % at 50k) and RSS (target < 150 MB at 10k; a bare sleeping python for scale);
   - steady 1 % churn: 1 % of the agents rewrite goal.json (tmp + rename, busy <-> waiting) every
     2 s, evenly spread (50 writes/s at 10k, 250/s at 50k), for 30 s (quick: 10 s); each write's
     latency is the time until its ``agent.classified`` is committed, read from another
     connection. Targets: p99 < 250 ms at 10k, < 500 ms at 50k.
"""
from __future__ import annotations

import gc
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_steps import floor as floor_once  # noqa: E402  (glob + read + json.loads of every file)

from events.log import EventLog  # noqa: E402
from watcher.config import parse  # noqa: E402
from watcher.runtime.loop import Watcher, settle_gc  # noqa: E402
from watcher.sources import forkread  # noqa: E402

FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
CLK = os.sysconf("SC_CLK_TCK")
FIRST_TARGET = {10_000: 2.0, 50_000: 2.5}   # user-facing targets (issue 46)
P99_TARGET_MS = {10_000: 250.0, 50_000: 500.0}
IDLE_TARGET = {10_000: 1.0, 50_000: 5.0}
RSS_TARGET_MB = {10_000: 150.0}
SETTLED_PCT = 15.0  # % of a core over 1 s: below it twice in a row, start-up is over (wait_settled)


def write_goal(root: Path, agent: str, state: str = "busy", t: float | None = None, **fields) -> None:
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    doc = {"agent": agent, "task": f"task {agent}", "state": state, "phase": "haciendo",
           "dod": "moving summary " * 8, "dod_contract": f"pytest tests/test_{agent}.py passes; ruff clean",
           "dod_status": "pending", "last_activity": t or time.time(), **fields}
    tmp = d / "goal.json.tmp"
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, d / "goal.json")


def fleet(root: Path, n: int) -> None:
    for i in range(n):
        write_goal(root, f"a{i:05d}")


# A fleet after a night, in every class (mixed_rows): 60 % working, 15 % waiting for the human,
# 15 % busy but silent for an hour (past busy_silence), 5 % claiming done, 5 % with no contract.
MIX = ((12, "TRABAJANDO", {}), (3, "RECLAMA", {"state": "waiting"}), (3, "ESTANCADO", {"age": 3600.0}),
       (1, "DICE_TERMINADO", {"state": "idle", "phase": "hecho"}), (1, "MAL_LANZADO", {"dod_contract": ""}))


def mixed_fleet(root: Path, n: int) -> dict[str, int]:
    """``n`` agents in MIX's proportions (by id modulo 20); returns the count per class."""
    kinds = [(cls, f) for k, cls, f in MIX for _ in range(k)]
    want: dict[str, int] = {}
    now = time.time()
    for i in range(n):
        cls, f = kinds[i % len(kinds)]
        f = dict(f)
        t = now - f.pop("age", 0.0)
        write_goal(root, f"a{i:05d}", f.pop("state", "busy"), t, **f)
        want[cls] = want.get(cls, 0) + 1
    return want


def config_text(db: str, root: Path, interval: str = "2s") -> str:
    return (f'[store]\npath = "{db}"\n[watch]\ninterval = "{interval}"\n'
            f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')


def _fresh(tmp: Path, root: Path, name: str) -> tuple[Watcher, EventLog]:
    db = f"{tmp}/{name}.db"
    elog = EventLog(db)
    w = Watcher(parse(config_text(db, root)), elog)
    settle_gc()  # as `fleetwatch run` does after start-up
    return w, elog


def _unsettle() -> None:
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    gc.collect()


def tick_rows(n: int, tmp: Path, reps: int = 3) -> list[dict]:
    root = tmp / f"fleet{n}"
    fleet(root, n)
    pattern = f"{root}/*/goal.json"
    floor_once(pattern)  # warm the page cache
    floors, firsts = [], []
    for rep in range(reps):
        floors.append(floor_once(pattern))
        w, elog = _fresh(tmp, root, f"t{n}-{rep}")
        now = time.time()
        t = time.perf_counter()
        appended = w.tick(now)
        firsts.append(time.perf_counter() - t)
        assert appended >= n, appended  # every agent new (and a fleet.fanout warning)
        if rep < reps - 1:
            w.close()
            elog.close()
            os.remove(f"{tmp}/t{n}-{rep}.db")
            _unsettle()
    w.tick(now + 1)  # the snapshot deferred out of the first commit is written here
    rng = random.Random(n)
    changed, none = [], []
    waiting: dict[int, bool] = {}
    for _ in range(reps):  # a full resync with 1 % changed: a fresh set of changes each time
        floors.append(floor_once(pattern))
        for i in rng.sample(range(n), n // 100):
            waiting[i] = not waiting.get(i, False)
            write_goal(root, f"a{i:05d}", "waiting" if waiting[i] else "busy")
        now += 2
        t = time.perf_counter()
        assert w.tick(now) == n // 100
        changed.append(time.perf_counter() - t)
    for _ in range(reps + 2):
        now += 2
        t = time.perf_counter()
        assert w.tick(now) == 0
        none.append(time.perf_counter() - t)
    w.close()
    elog.close()
    _unsettle()
    for i in [i for i, v in waiting.items() if v]:  # every agent busy again (the run rows toggle from busy)
        write_goal(root, f"a{i:05d}", "busy")
    # where a first tick goes (one more fresh log, the stages of Watcher.tick one by one)
    w2, elog2 = _fresh(tmp, root, f"s{n}")
    now = time.time()
    t0 = time.perf_counter()
    snap = w2.observe(now, True)
    t1 = time.perf_counter()
    evs = w2.detect(snap, now)
    t2 = time.perf_counter()
    w2.commit(evs, now)
    t3 = time.perf_counter()
    w2.close()
    elog2.close()
    _unsettle()
    fl = min(floors)
    first, ch, no = min(firsts), min(changed), min(none)
    rows = []
    ft = FIRST_TARGET.get(n)
    procs = "; first poll in 2 processes" if forkread.usable(n) else ""
    rows.append({"name": f"first tick, {n:,} agents vs read+json.loads floor",
                 "figure": f"{first * 1000:.0f} ms ({first / n * 1e6:.1f} µs/agent); floor {fl * 1000:.0f} ms{procs}",
                 "ratio": round(first / fl, 3), "target": f"<= {ft}x floor" if ft else "info",
                 "ok": first / fl <= ft if ft else None, "user": bool(ft)})
    rows.append({"name": f"first tick stages, {n:,} agents (info)",
                 "figure": f"observe {(t1 - t0) * 1000:.0f} ms ({(t1 - t0) / fl:.2f}x), detect {(t2 - t1) * 1000:.0f} ms "
                           f"({(t2 - t1) / fl:.2f}x), append+fold {(t3 - t2) * 1000:.0f} ms ({(t3 - t2) / fl:.2f}x)",
                 "ratio": None, "target": "info", "ok": None})
    if n >= 10_000:
        for label, v, target in (("full resync, 1 % changed", ch, 0.3), ("full resync, no change", no, 0.2)):
            rows.append({"name": f"{label}, {n:,} agents vs floor",
                         "figure": f"{v * 1000:.1f} ms; floor {fl * 1000:.0f} ms",
                         "ratio": round(v / fl, 3), "target": f"<= {target}x floor", "ok": v / fl <= target})
    return rows


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone (a child reaped meanwhile)
        return None


def _children(pid: int) -> set[int]:
    """The live children of ``pid``, whichever of its threads forked them."""
    kids: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return kids


def proc_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid``, of its children it has reaped (utime, stime, cutime, cstime) and
    of those still running (their utime, stime): the watcher hands work to children (the first
    poll's second reader, the snapshot round's encoder, watcher/runtime/snapround.py), and that
    work is the watcher's cost — counted as it is done, so a round in flight is not taken for
    quiet by ``wait_settled`` and then charged to the idle window when it is reaped (a 50k run:
    idle 5.03 %, the start-up round's ~2 s landing in it; 1.7-1.8 % in the runs around it)."""
    parts = _stat_fields(pid)
    if parts is None:
        return 0.0
    total = sum(int(x) for x in parts[11:15])
    for kid in _children(pid):
        k = _stat_fields(kid)
        if k is not None:
            total += int(k[11]) + int(k[12])
    return total / CLK


def wait_classified(elog: EventLog, n: int, p: subprocess.Popen, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    seen, since = set(), 0
    while time.monotonic() < end:
        for r in elog.read(since, types=["agent.classified"]):
            seen.add(r.event.agent)
            since = r.seq
        if len(seen) >= n:
            return
        if p.poll() is not None:
            raise RuntimeError(f"fleetwatch run exited with {p.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"watcher classified {len(seen)} of {n} agents")


def wait_settled(p: subprocess.Popen, t0: float, elog: EventLog | None = None, least: float = 5.0,
                 limit: float = 120.0) -> float:
    """Seconds from ``t0`` until the watcher's start-up is over: at least ``least`` s more (the
    GC settled), the start-up's snapshot round stored (with ``elog``: every projection's snapshot
    covers the log's head as it is now, the first tick's events; and no child of the watcher
    running), then until two consecutive 1 s samples of its CPU are under SETTLED_PCT (a full
    tick at 50k agents is ~4 % of a second). What start-up still does after the fleet is
    classified (inotify's watches, started after the first tick; the second tick; the first
    snapshots) is start-up, not idle; the figure says how long it took.

    Why the round is waited for by name (tenth session): with CPU samples alone, a pause between
    inotify's set-up (~7 s of ~60 % at 50k on a busy host) and the round let two quiet samples
    through, and the round's ~2 s of CPU landed in the idle window: 5.23 % in a full `make bench`,
    where a per-second trace of the same watcher showed 3-4 % every other second (a tick) once
    the round was stored, 1.8-1.9 % over 60 s."""
    time.sleep(least)
    head = 0
    if elog is not None:
        head = elog.head()[0]
    quiet, end = 0, time.monotonic() + limit
    c = proc_cpu_s(p.pid)
    while quiet < 2 and time.monotonic() < end:
        time.sleep(1.0)
        c2 = proc_cpu_s(p.pid)
        stored = elog is None or (_snapshots_cover(elog, head) and not _children(p.pid))
        quiet = quiet + 1 if stored and (c2 - c) * 100 < SETTLED_PCT else 0
        c = c2
    return time.monotonic() - t0


def _snapshots_cover(elog: EventLog, seq: int) -> bool:
    """Every projection's stored snapshot is at ``seq`` or later."""
    from projections.base import registry

    rows = elog.db.execute("SELECT count(*), min(seq) FROM snapshots").fetchall()
    return bool(rows) and rows[0][0] >= len(registry()) and rows[0][1] is not None and rows[0][1] >= seq


def churn(root: Path, elog: EventLog, n: int, seconds: float, rng: random.Random) -> tuple[list[float], int]:
    """1 % of the agents per 2 s, evenly spread; latency of each write to its committed event."""
    rate = n * 0.01 / 2.0
    state: dict[str, str] = {}
    pending: dict[str, float] = {}
    lat: list[float] = []
    since = elog.head()[0]
    start = time.perf_counter()
    k = 0
    while True:
        nowp = time.perf_counter()
        if nowp - start < seconds:
            while k < (nowp - start) * rate:  # the writes due by now
                a = f"a{rng.randrange(n):05d}"
                if a in pending:
                    continue
                state[a] = "waiting" if state.get(a, "busy") == "busy" else "busy"
                write_goal(root, a, state[a])
                pending[a] = time.perf_counter()
                k += 1
        elif not pending or nowp - start > seconds + 15:
            break
        for r in elog.read(since, types=["agent.classified"]):
            since = r.seq
            t = pending.pop(r.event.agent, None)
            if t is not None:
                lat.append(time.perf_counter() - t)
        time.sleep(0.002)
    return lat, len(pending)


def run_rows(n: int, tmp: Path, idle_s: float, churn_s: float) -> list[dict]:
    root = tmp / f"fleet{n}"
    d = tmp / f"run{n}"
    d.mkdir()
    cfgp = d / "c.toml"
    cfgp.write_text(config_text(str(d / "e.db"), root))
    base = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    p = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfgp), "--log-level", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rows = []
    try:
        elog = EventLog(str(d / "e.db"))
        t0 = time.monotonic()
        wait_classified(elog, n, p)
        ready = time.monotonic() - t0
        settled = wait_settled(p, t0, elog)  # its start-up's last work: inotify's watches, the second tick, snapshots
        c0, m0 = proc_cpu_s(p.pid), time.monotonic()
        time.sleep(idle_s)
        cpu = (proc_cpu_s(p.pid) - c0) / (time.monotonic() - m0) * 100
        rss, base_rss = proc_rss_mb(p.pid), proc_rss_mb(base.pid)
        lat, lost = churn(root, elog, n, churn_s, random.Random(n))
        churn_rss = proc_rss_mb(p.pid)
        elog.close()
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            err = p.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            p.kill()
            err = p.communicate()[1]
        base.kill()
        base.wait()
    overflow = err.count(b"overflowed") if err else 0
    it = IDLE_TARGET.get(n)
    rows.append({"name": f"idle `fleetwatch run`, {n:,} agents, {idle_s:g} s (interval 2 s, resync 30 s)",
                 "figure": f"CPU {cpu:.2f} % (all classified {ready:.1f} s, start-up settled {settled:.1f} s after start; "
                           f"inotify overflows logged: {overflow})",
                 "ratio": None, "target": f"< {it:g} % CPU" if it else "info", "ok": cpu < it if it else None,
                 "user": bool(it)})
    rt = RSS_TARGET_MB.get(n)
    rows.append({"name": f"RSS of `fleetwatch run`, {n:,} agents",
                 "figure": f"{rss:.0f} MB idle, {churn_rss:.0f} MB after churn (bare python {base_rss:.0f} MB)",
                 "ratio": round(rss / rt, 3) if rt else None,
                 "target": f"< {rt:g} MB (ratio: of the target)" if rt else "info", "ok": rss < rt if rt else None,
                 "user": bool(rt)})
    lat.sort()
    pt = P99_TARGET_MS[n] if n in P99_TARGET_MS else None
    if lat:
        p50 = statistics.median(lat) * 1000
        p99 = lat[min(len(lat) - 1, int(round(0.99 * len(lat))) - 1)] * 1000
        fig = (f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {lat[-1] * 1000:.0f} ms over {len(lat)} writes"
               f"{f'; {lost} never committed' if lost else ''} (debounce 100 ms)")
        ok = (p99 < pt and not lost) if pt else None
    else:
        fig, ok, p99 = f"no write committed ({lost} lost)", False, None
    rows.append({"name": f"goal.json write -> committed event, {n:,} agents, 1 % churn per 2 s, {churn_s:g} s",
                 "figure": fig, "ratio": round(p99 / pt, 3) if (pt and p99 is not None) else None,
                 "target": f"p99 < {pt:g} ms (ratio: of the target)" if pt else "info", "ok": ok, "user": bool(pt)})
    return rows


def mixed_rows(n: int, tmp: Path, reps: int = 2) -> list[dict]:
    """(info) The first tick over a fleet in every class (MIX), as after a restart: every agent
    new, but RECLAMA, ESTANCADO, DICE_TERMINADO and MAL_LANZADO ones also open a notify condition
    and a report interval, which an all-working fleet never does. Best of ``reps`` on a fresh log
    each, against the floor on the same files; the classes the log recorded are checked."""
    import shutil

    root = tmp / f"mixed{n}"
    want = mixed_fleet(root, n)
    pattern = f"{root}/*/goal.json"
    floor_once(pattern)
    floors, firsts = [], []
    got: dict[str, int] = {}
    for rep in range(reps):
        floors.append(floor_once(pattern))
        w, elog = _fresh(tmp, root, f"m{n}-{rep}")
        t = time.perf_counter()
        w.tick(time.time())
        firsts.append(time.perf_counter() - t)
        got = {}
        for r in elog.read(0, types=["agent.classified"]):
            got[r.event.to] = got.get(r.event.to, 0) + 1
        w.close()
        elog.close()
        os.remove(f"{tmp}/m{n}-{rep}.db")
        _unsettle()
    shutil.rmtree(root)
    assert got == want, (got, want)
    fl, first = min(floors), min(firsts)
    return [{"name": f"first tick, {n:,} agents in every class (info)",
             "figure": f"{first * 1000:.0f} ms ({first / n * 1e6:.1f} µs/agent); floor {fl * 1000:.0f} ms; "
                       + ", ".join(f"{v:,} {k}" for k, v in want.items()),
             "ratio": round(first / fl, 3), "target": "info: a fleet after a night", "ok": None}]


def run(quick: bool = False) -> list[dict]:
    sizes = (1_000, 5_000) if quick else (10_000, 50_000)
    idle_s = 10.0 if quick else 60.0
    churn_s = 10.0 if quick else 30.0
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-watch-") as d:
        tmp = Path(d)
        for n in ((100,) if quick else (1_000,)) + sizes:
            rows += tick_rows(n, tmp, reps=2 if quick else 3)
        for n in sizes:
            rows += mixed_rows(n, tmp)
        for n in sizes:
            rows += run_rows(n, tmp, idle_s, churn_s)
    return rows


def ticks_only(sizes: list[int]) -> list[dict]:
    """The tick rows alone at ``sizes`` (``--ticks 10000 50000``: the first tick against its
    floor in a minute or two, without the ``fleetwatch run`` rows' idle and churn windows)."""
    with tempfile.TemporaryDirectory(prefix="fw-bench-watch-") as d:
        return [r for n in sizes for r in tick_rows(n, Path(d))]


if __name__ == "__main__":
    if "--ticks" in sys.argv:
        rows = ticks_only([int(a) for a in sys.argv[sys.argv.index("--ticks") + 1:]])
    else:
        rows = run(quick="--quick" in sys.argv)
    for r in rows:
        print(f"{r['name']}: {r['figure']}  ratio={r['ratio']}  target={r['target']}  ok={r['ok']}")
