"""Run every benchmark (tests/bench/bench_*.py) and print one table; write bench-results.json.

Usage: ``python tests/bench/run_all.py [--quick] [--only NAME ...] [--out PATH]``

Each module exposes ``run(quick: bool = False) -> list[dict]`` with rows
``{"name", "figure", "ratio", "target", "ok"}`` (and ``"user": True`` for the user-facing rows of
issue 46, printed first in a table of their own); ratios are against baselines measured in the same
run. ``--quick`` (or ``FW_BENCH_QUICK=1``) is a smoke test at smaller sizes and shorter windows:
its figures are not the report (the rows name the size they measured). What each row measures and
against what: docs/bench.md. Each module runs in a fresh interpreter of its own (``--child``), as pyperf
runs its workers: a module's figures and baselines then share a process with nothing another module
left behind (the 1,000,000-event rebuild's heap, a 50,000-agent fleet's garbage), as a user's
``fleetwatch run`` starts afresh. The load average before and after is printed and stored, and so is
the share of CPU time the host stole during the run (``/proc/stat``'s steal column, on a virtual
machine): on a shared machine a figure is only as good as the quiet it was measured in. A module that raises gives one row with ``ok: false`` and the error, and the others still run.
Exit status: 0 if no row has ``ok: false``, else 1.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def discover(only: list[str] | None = None) -> list[Path]:
    files = sorted(HERE.glob("bench_*.py"))
    if only:
        files = [f for f in files if any(o in f.stem for o in only)]
    return files


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"fleetwatch_bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def run_here(path: Path, quick: bool) -> list[dict]:
    """``path``'s rows, run in this process (a broken bench gives one ``ok: false`` row)."""
    try:
        rows = list(load(path).run(quick=quick))
        for r in rows:
            r.setdefault("ratio", None)
            r.setdefault("ok", None)
    except Exception as e:  # one broken bench must not hide the others
        traceback.print_exc()
        rows = [{"name": f"{path.stem}: crashed", "figure": f"{type(e).__name__}: {e}"[:120],
                 "ratio": None, "target": "runs", "ok": False}]
    return rows


def run_one(path: Path, quick: bool) -> tuple[list[dict], float]:
    """``path``'s rows from a fresh interpreter (``--child``: the rows come back as JSON in a
    file; the child's own output passes through). A child that dies or writes no rows is one
    ``ok: false`` row naming its exit status."""
    import subprocess
    import tempfile

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as d:
        out = Path(d) / "rows.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), str(out)]
        rc = subprocess.run(cmd + (["--quick"] if quick else []), cwd=ROOT).returncode
        try:
            rows = json.loads(out.read_text())
        except (OSError, ValueError):
            rows = [{"name": f"{path.stem}: crashed", "figure": f"its process ended with status {rc} and no rows",
                     "ratio": None, "target": "runs", "ok": False}]
    return rows, time.perf_counter() - t0


def as_installed() -> None:
    """Every module's bytecode compiled and kept, as an installed copy has it (pip compiles at
    install; a checkout writes it on first import): ``PYTHONDONTWRITEBYTECODE`` is dropped for the
    module processes and what they spawn, and the packages are compiled before the first one.
    Found in the eleventh session: with the variable set in the caller's shell and a clean clone
    holding no ``__pycache__``, every process the benches start (the rebuild's worker, a
    `fleetwatch run`) compiled every module from source first, ~35 ms of CPU a start for the
    rebuild's worker (91 against 56 ms), on the path its row times."""
    import compileall
    import os

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for pkg in ("events", "projections", "watcher"):
        compileall.compile_dir(str(ROOT / pkg), quiet=1)


def table(results: dict[str, list[dict]]) -> str:
    head = ("bench", "name", "figure", "ratio", "target", "ok")
    lines = []
    for bench, rows in results.items():
        for r in rows:
            ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}×"
            ok = {True: "ok", False: "FAIL", None: "-"}[r.get("ok")]
            lines.append((bench.removeprefix("bench_"), str(r["name"]), str(r["figure"]), ratio, str(r["target"]), ok))
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*x) for x in lines]
    return "\n".join(out)


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) clock ticks of every CPU so far, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_pct(t0: tuple[int, int] | None, t1: tuple[int, int] | None) -> float | None:
    """The percentage of CPU time stolen by the host between two ``cpu_ticks`` readings."""
    if t0 is None or t1 is None or t1[1] <= t0[1]:
        return None
    return 100.0 * (t1[0] - t0[0]) / (t1[1] - t0[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="much shorter runs (smoke test)")
    ap.add_argument("--only", nargs="*", help="run only benches whose name contains one of these")
    ap.add_argument("--out", default=str(ROOT / "bench-results.json"), help="where to write the JSON results")
    ap.add_argument("--child", nargs=2, metavar=("BENCH", "ROWS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    import os

    if args.child:  # one module in this fresh process (run_one): its rows to the file named
        Path(args.child[1]).write_text(json.dumps(run_here(Path(args.child[0]), args.quick)))
        return 0

    args.quick = args.quick or os.environ.get("FW_BENCH_QUICK", "") not in ("", "0")
    as_installed()
    load0, ticks0 = os.getloadavg(), cpu_ticks()
    results: dict[str, list[dict]] = {}
    seconds: dict[str, float] = {}
    for path in discover(args.only):
        print(f"running {path.name}{' (quick)' if args.quick else ''} ...", file=sys.stderr, flush=True)
        results[path.stem], seconds[path.stem] = run_one(path, args.quick)
    user = {b: [r for r in rows if r.get("user")] for b, rows in results.items()}
    rest = {b: [r for r in rows if not r.get("user")] for b, rows in results.items()}
    if any(user.values()):
        print("User-facing figures (docs/bench.md: The user-facing rows)\n" + table(user) + "\n\nEverything else\n")
    print(table(rest))
    failed = sum(1 for rows in results.values() for r in rows if r.get("ok") is False)
    load1, steal = os.getloadavg(), steal_pct(ticks0, cpu_ticks())
    stolen = "" if steal is None else f"; {steal:.1f} % of CPU time stolen by the host"
    print(f"\n{sum(len(r) for r in results.values())} rows, {failed} below target; "
          f"{sum(seconds.values()):.1f} s; load average {load0[0]:.1f} before, {load1[0]:.1f} after "
          f"({os.cpu_count()} cores){stolen}; results in {args.out}")
    Path(args.out).write_text(json.dumps({
        "quick": args.quick, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "machine": platform.machine(),
        "seconds": {k: round(v, 2) for k, v in seconds.items()}, "cores": os.cpu_count(),
        "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in load1],
        "steal_pct": None if steal is None else round(steal, 2),
        "results": results}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
