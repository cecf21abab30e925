"""Benchmark: `fleetwatch report` over a 1M-event log (quick: 100k) against the log's raw
read+decode rate, measured in the same run on the same file.

- floor: ``EventLog.read()`` of every row, each row's data decoded into its event Struct (what any
  reader of the log pays at least);
- report: what the command does — ``watcher.cli.report.collect`` (read the report's types, fold
  the report projection) and ``figures`` — timed end to end, as events of the log per second.
Target: report ≥ 0.5× the floor. Best of 3 each (shared machine). The log is the rebuild bench's
realistic mix (agent classes, verdicts, work packages, circuits, steps, sources).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from events.log import EventLog  # noqa: E402


def _generate():
    spec = importlib.util.spec_from_file_location("fw_bench_rebuild_gen", HERE / "bench_rebuild.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.generate


def best(fn, n: int = 3) -> float:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def run(quick: bool = False) -> list[dict]:
    from projections.report.view import figures
    from watcher.cli.report import collect

    n = 100_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "events.db")
        _generate()(path, n)
        log = EventLog(path, create=False, readonly=True)

        def floor():
            for _ in log.read():
                pass

        def report():
            st, since = collect(log, None, None)
            figures(st, st["last"] or 0.0, since)

        t_floor = best(floor)
        t_report = best(report)
        log.close()
    ratio = (n / t_report) / (n / t_floor)
    return [{"name": f"report over {n:,} events vs read+decode floor",
             "figure": f"{n / t_report:,.0f} ev/s (floor {n / t_floor:,.0f} ev/s)",
             "ratio": round(ratio, 2), "target": "≥ 0.5×", "ok": ratio >= 0.5, "user": True}]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
