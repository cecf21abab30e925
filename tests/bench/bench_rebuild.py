"""Benchmark: `rebuild` on a generated log against the floor, and `status --json` latency.

1. A log of 1M events (quick: 100k) with a realistic mix (agent classes, DoD verdicts, work
   packages, circuits, swarm children, steps, source edges), written in large batches by a
   process of its own (``generate_apart``: the appends' heap is not the measuring process's).
2. Rebuild (every projection replayed from seq 1 as `fleetwatch rebuild` does,
   ``watcher.runtime.rebuild_par.rebuild``: on two cores half the folds run in a second process,
   each process reading the log itself; the row gives each process's CPU time, so it says how
   even the halves are; info: the same in one process) against the floor
   measured in the same run: the raw row fetch + msgspec decode of each row's data into its event
   Struct + a dict fold (count per type, last seq per subject). Target: rebuild ≥ 0.2× the
   floor's events/s (every projection folds every event it reads; the floor folds nothing).
   The rebuild runs twice and the floor three times, interleaved; the row takes the best of each
   and prints every sample (one sample of each swung 0.27-0.40x between runs of one day).
3. The `status --json` answer in-process on that log (snapshots + tail, as after any watcher
   commit): target < 200 ms.
4. CLI start to first output on that log, real processes: `fleetwatch tail -n 20` and
   `fleetwatch status` (stdout a pipe), time from spawn to the first byte read, against
   `python -c pass` (the same interpreter's start and exit), interleaved, median of 21 (with 9,
   `status` read 4.6-5.3x in runs of one day), all with their bytecode cached (as installed).
   Target: ≤ 5× `python -c pass` (the fast start path: no typer, rich, apprise or watchdog;
   `status` reads only the snapshots it shows).
"""
from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from events.log import EventLog  # noqa: E402
from events.types import (AgentClassified, CircuitChanged, DodVerdict, SourceFailed,  # noqa: E402
                          SourceRecovered, StepChanged, SwarmChanged, WpChanged, decode_data)

FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
REBUILD_TARGET = 0.2   # the user-facing target (issue 46): rebuild of 1M events >= 0.2x its floor
CLASSES = ("TRABAJANDO", "RECLAMA", "DICE_TERMINADO", "ESTANCADO", "TRABAJANDO", "TRABAJANDO")
WP_STATES = ("READY", "RUNNING", "CHECKING", "DONE", "FAILED")
SW = ("queued", "running", "done", "failed")
STEPS = ("facts", "audit", "analyze", "apply", "validate")


def generate(path: str, n: int, batch: int = 20_000, seed: int = 7) -> float:
    """Write ``n`` events; returns seconds. Subjects cycle so that versions stay small."""
    rnd = random.Random(seed)
    elog = EventLog(path, durability="normal")
    t0 = time.perf_counter()
    now = 1_800_000_000.0
    done = 0
    while done < n:
        evs = []
        for _ in range(min(batch, n - done)):
            k = rnd.random()
            if k < 0.45:
                a = f"a{rnd.randrange(500)}"
                evs.append(AgentClassified(agent=a, to=rnd.choice(CLASSES), state="busy", phase="haciendo",
                                           reason="busy", source="fleet", contract_sha256=f"{a:0>64}",
                                           contract_len=40))
            elif k < 0.50:
                evs.append(DodVerdict(agent=f"a{rnd.randrange(500)}", verdict=rnd.choice(("met", "failed")),
                                      verifier="v1", evidence="pytest -q: green"))
            elif k < 0.70:
                m = rnd.randrange(50)
                evs.append(WpChanged(mission=f"m{m}", wp=f"m{m}-wp{rnd.randrange(20)}", to=rnd.choice(WP_STATES),
                                     deps=[f"m{m}-wp0"], attempts=rnd.randrange(3), source="missions"))
            elif k < 0.72:
                evs.append(CircuitChanged(scope=f"m{rnd.randrange(50)}", to=rnd.choice(("OPEN", "CLOSED")),
                                          source="circuits"))
            elif k < 0.92:
                evs.append(SwarmChanged(group=f"g{rnd.randrange(40)}", child=f"c{rnd.randrange(30)}",
                                        to=rnd.choice(SW), label="read a file", source="swarm"))
            elif k < 0.99:
                evs.append(StepChanged(run=f"r{rnd.randrange(30)}", step=rnd.choice(STEPS),
                                       to=rnd.choice(("begin", "done"))))
            else:
                evs.append(SourceFailed(source="fleet", error="timeout") if rnd.random() < 0.5
                           else SourceRecovered(source="fleet", error="timeout"))
        now += 1.0
        elog.append(evs, now)
        done += len(evs)
    elog.close()
    return time.perf_counter() - t0


def generate_apart(path: str, n: int) -> float:
    """:func:`generate` in a process of its own; returns its seconds. Found in the eleventh
    session: generated here, the rebuild that followed took 2.71 s where the same log, copied in
    (``--log``), took 2.60 s: a million appends leave this process's heap grown and scattered, and
    the folds paid for it, as the first tick did when it ran after other modules (docs/bench.md)."""
    code = ("import sys; sys.path[:0] = [sys.argv[3], sys.argv[4]]; import bench_rebuild as b; "
            "print(b.generate(sys.argv[1], int(sys.argv[2])))")
    out = subprocess.run([sys.executable, "-c", code, path, str(n), str(Path(__file__).resolve().parent), str(ROOT)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def floor(path: str) -> tuple[int, float]:
    """Raw row fetch + msgspec decode + a dict fold: the least any replay must do."""
    import apsw

    db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    t0 = time.perf_counter()
    counts: dict[str, int] = {}
    last: dict[str, int] = {}
    n, since = 0, 0
    while True:
        rows = db.execute("SELECT seq, type, subject, data FROM events WHERE seq > ? ORDER BY seq LIMIT 5000",
                          (since,)).fetchall()
        for seq, type_, subject, data in rows:
            decode_data(type_, data)
            counts[type_] = counts.get(type_, 0) + 1
            last[subject] = seq
        n += len(rows)
        if len(rows) < 5000:
            break
        since = rows[-1][0]
    dt = time.perf_counter() - t0
    db.close()
    return n, dt


def fold_rates(path: str, sample: int = 20_000) -> dict[str, float]:
    """Each projection's fold rate (events/s of the log) over the first ``sample`` events (decoded
    once), folded as a replay folds them: only the types it declares, with the replay's caches."""
    from watcher.runtime.state import Projections

    elog = EventLog(path, durability="normal", create=False)
    recs = list(elog.read(0, limit=sample))
    elog.close()
    p = Projections()
    out = {}
    for name, fold, types, times in p._folds:
        st = p.mods[name].initial()
        mine = [r for r in recs if types is None or r.type in types]
        t0 = time.perf_counter()
        for r in mine:
            st = fold(st, r) if times is None else fold(st, r, times)
        out[name] = len(recs) / max(time.perf_counter() - t0, 1e-9)
    return out


def status_rows(path: str, n: int, tmp: str, label: str) -> list[dict]:
    import msgspec

    from watcher.cli.status import STATUS_READS, build_status, load_states, notify_health_view

    env = dict(os.environ, FLEETWATCH_DB=path, XDG_CONFIG_HOME=os.path.join(tmp, "cfg"))
    old = {k: os.environ.get(k) for k in ("FLEETWATCH_DB", "XDG_CONFIG_HOME")}
    os.environ.update({"FLEETWATCH_DB": path, "XDG_CONFIG_HOME": env["XDG_CONFIG_HOME"]})
    try:
        ins = []
        for _ in range(5):
            t0 = time.perf_counter()
            cfg, states, head, _note = load_states(None, None, STATUS_READS, {"notify": notify_health_view()})
            msgspec.json.encode(build_status(cfg, states, head, time.time()))
            ins.append((time.perf_counter() - t0) * 1000)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    st_ms = statistics.median(ins)
    rows = [{"name": f"status --json answer on {n:,} events{label} (in-process: snapshots + tail)",
             "figure": f"{st_ms:.1f} ms", "ratio": None, "target": "< 200 ms", "ok": st_ms < 200}]
    # The children compile each module once and reuse the bytecode, as an installed copy does (pip
    # writes it at install) and as `python -c pass` does (the stdlib ships compiled): with
    # PYTHONDONTWRITEBYTECODE in the caller's environment every spawn would recompile every
    # fleetwatch module (about 40 % of `status`'s start on 2026-12-01). The cache is the bench's own.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    cmds = {"tail -n 20": ["tail", "-n", "20"], "status": ["status"]}
    _first_output_ms([sys.executable, "-c", "pass"], env, whole=True)
    for argv in cmds.values():  # warm the page cache and the bytecode
        _first_output_ms([FLEETWATCH, *argv], env)
    base, got = [], {k: [] for k in cmds}
    for _ in range(21):
        base.append(_first_output_ms([sys.executable, "-c", "pass"], env, whole=True))
        for k, argv in cmds.items():
            got[k].append(_first_output_ms([FLEETWATCH, *argv], env))
    b = statistics.median(base)
    for k, v in got.items():
        m = statistics.median(v)
        rows.append({"name": f"`fleetwatch {k}` start to first output, {n:,} events{label}, vs `python -c pass`",
                     "figure": f"{m:.0f} ms; python -c pass {b:.0f} ms", "ratio": round(m / b, 2),
                     "target": "<= 5x python -c pass", "ok": m <= 5 * b, "user": True})
    return rows


def _first_output_ms(args: list[str], env: dict, whole: bool = False) -> float:
    """Spawn to the first byte on stdout (``whole``: spawn to exit, for ``python -c pass``)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if whole:
        p.communicate()
        dt = time.perf_counter() - t0
    else:
        first = p.stdout.read(1)
        dt = time.perf_counter() - t0
        rest, err = p.communicate()
        if not first:
            raise RuntimeError(f"{args[1]} printed nothing: {err[:300]!r}")
    if p.returncode != 0:
        raise RuntimeError(f"{args} failed with {p.returncode}")
    return dt * 1000


def rebuild_and_snapshot(path: str, one_process: bool = False) -> tuple[int, int, float, float, float]:
    """`fleetwatch rebuild`'s rebuild (``rebuild_par.rebuild``: half the folds in a second process
    on two cores), or with ``one_process`` all of them here (``state.rebuild``): (seq, projections,
    wall s, this process's CPU s, the worker's CPU s)."""
    import resource

    from watcher.runtime import rebuild_par, state

    def cpu(who: int) -> float:
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    elog = EventLog(path, durability="normal", create=False)
    c0, w0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    if one_process:
        p, _ = state.rebuild(elog, check=False, store=True)
    else:
        p, _ = rebuild_par.rebuild(elog, check=False, store=True)   # stores the snapshots status answers from
    dt = time.perf_counter() - t0
    c1, w1 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    elog.close()
    return p.seq, len(p.mods), dt, c1 - c0, w1 - w0


def run(quick: bool = False, budget_s: float = 300.0, log: str | None = None) -> list[dict]:
    """The rows. ``log``: a copy of a log ``generate`` wrote (``--log PATH``, for one's own repeated
    runs; `make bench` always generates its own)."""
    n = 100_000 if quick else 1_000_000
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events.db")
        if log is not None:
            import shutil

            shutil.copyfile(log, path)
            with EventLog(path, create=False, readonly=True) as elog:
                n = elog.head()[0]
        else:   # in a child: the 1M appends' heap (grown, then scattered) is not the measuring process's
            gen_s = generate_apart(path, n)
            rows.append({"name": f"generate {n:,} events (batched appends)", "figure": f"{gen_s:.1f} s "
                         f"({n / gen_s:,.0f} ev/s)", "ratio": None, "target": "setup", "ok": None})
        fn, fdt = floor(path)
        frate = fn / fdt
        rates = fold_rates(path)
        combined = 1.0 / sum(1.0 / r for r in rates.values())
        slow = min(rates, key=rates.get)
        rows.append({"name": "fold rate per projection (first 20k events)",
                     "figure": "; ".join(f"{k} {v:,.0f}/s" for k, v in rates.items()),
                     "ratio": round(combined / frate, 3), "target": "info (slowest: " + slow + ")", "ok": None})
        est = n / combined
        if est > budget_s:
            rows.append({"name": f"rebuild {len(rates)} projections on {n:,} events vs floor",
                         "figure": f"skipped: estimated >= {est:,.0f} s from the sample; {slow} folds at "
                                   f"{rates[slow]:,.0f} ev/s; floor {frate:,.0f} ev/s",
                         "ratio": round(combined / frate, 3), "target": f">= {REBUILD_TARGET}x floor", "ok": False,
                         "user": True})
            small = os.path.join(tmp, "small.db")
            generate_apart(small, 100_000)
            rebuild_and_snapshot(small)
            rows += status_rows(small, 100_000, tmp, " (fallback log: full rebuild skipped)")
            return rows
        seq1, _, odt, _, _ = rebuild_and_snapshot(path, one_process=True)
        # the rebuild and the floor each twice more, interleaved, best of each: one sample of a
        # 2-8 s run on a shared machine swung 0.27-0.40x between runs of one day (the floor
        # alone 1.6-2.9 s), a burst of the host's load falling on one side only
        runs, fdts = [], [fdt]
        for _ in range(2):
            runs.append(rebuild_and_snapshot(path))
            fdts.append(floor(path)[1])
        seq, nmods, rdt, mine, theirs = min(runs, key=lambda r: r[2])
        fdt = min(fdts)
        frate = fn / fdt
        assert seq == seq1 == fn == n and all(r[0] == n for r in runs)
        ratio = (n / rdt) / frate
        from watcher.runtime.rebuild_par import cores

        rows.append({"name": f"rebuild {nmods} projections vs floor (fetch+decode+dict fold)",
                     "figure": f"rebuild {n / rdt:,.0f} ev/s ({rdt:.2f} s, best of "
                               f"{'/'.join(f'{r[2]:.2f}' for r in runs)} s; {min(cores(), 2)} processes: CPU "
                               f"{mine:.2f} s here, {theirs:.2f} s in the worker); floor {frate:,.0f} ev/s "
                               f"({fdt:.2f} s, best of {'/'.join(f'{x:.2f}' for x in fdts)} s)",
                     "ratio": round(ratio, 3), "target": f">= {REBUILD_TARGET}x floor", "ok": ratio >= REBUILD_TARGET,
                     "user": True})
        rows.append({"name": "rebuild in one process vs floor (info)",
                     "figure": f"rebuild {n / odt:,.0f} ev/s ({odt:.2f} s); floor {frate:,.0f} ev/s",
                     "ratio": round((n / odt) / frate, 3), "target": "info", "ok": None})
        rows += status_rows(path, n, tmp, "")
    return rows


if __name__ == "__main__":
    cached = sys.argv[sys.argv.index("--log") + 1] if "--log" in sys.argv else None
    for r in run(quick="--quick" in sys.argv, log=cached):
        print(f"{r['name']}: {r['figure']}  ratio={r['ratio']}  target={r['target']}  ok={r['ok']}")
