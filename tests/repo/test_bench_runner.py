"""The bench runner's own figures (tests/bench/run_all.py): the share of CPU time the host stole
during a run, read from the real /proc/stat, and the steal line in a real quick run's summary and
JSON."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.exe import TESTS

RUN_ALL = TESTS / "bench" / "run_all.py"
spec = importlib.util.spec_from_file_location("run_all", RUN_ALL)
run_all = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_all)

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs /proc/stat")


def test_steal_is_a_share_of_the_cpu_time_between_two_readings():
    t0 = run_all.cpu_ticks()
    sum(i * i for i in range(300_000))  # some CPU time between the readings
    t1 = run_all.cpu_ticks()
    assert t0 is not None and t1 is not None
    assert 0 <= t0[0] <= t0[1] and t1[1] >= t0[1] and t1[0] >= t0[0]
    pct = run_all.steal_pct(t0, t1)
    assert pct is None or 0.0 <= pct <= 100.0
    assert run_all.steal_pct(t0, t0) is None          # no time between them: nothing to say
    assert run_all.steal_pct((10, 100), (35, 200)) == 25.0
    assert run_all.steal_pct(None, t1) is None


def test_a_quick_run_prints_and_stores_the_steal(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(RUN_ALL), "--quick", "--only", "notify", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    assert "% of CPU time stolen by the host" in p.stdout
    assert isinstance(json.loads(out.read_text())["steal_pct"], float)


def test_the_watch_rows_count_a_running_childs_cpu_as_it_is_spent():
    """bench_watch.proc_cpu_s: a child's CPU counts while it runs, not only once reaped (a
    snapshot round in flight looked like quiet to wait_settled, and its ~2 s then landed in the
    50k idle window: 5.03 %). A real parent whose forked child burns ~1 s of CPU."""
    sys.path.insert(0, str(RUN_ALL.parent))
    import bench_watch

    code = ("import os, time\npid = os.fork()\nif pid == 0:\n    t = time.process_time()\n"
            "    while time.process_time() - t < 1.0:\n        pass\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\ntime.sleep(30)")
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        seen = []
        while time.monotonic() < deadline:
            seen.append(bench_watch.proc_cpu_s(p.pid))
            if seen[-1] >= 0.9:
                break
            time.sleep(0.05)
        running = [c for c in seen if 0.1 < c < 0.9]   # readings taken while the child ran
        assert running, seen                           # before: 0 until it was reaped, then ~1
        assert seen == sorted(seen) and seen[-1] >= 0.9
    finally:
        p.kill()
        p.wait()


def test_each_bench_module_runs_in_a_fresh_process_of_its_own(tmp_path):
    """run_all runs every module in a fresh interpreter (its figures then share a process with
    nothing an earlier module left: the full run's first tick at 10,000 agents measured 2.20x
    its floor after the rebuild's 1,000,000 events, 1.71x with the watch module alone). Two real
    modules that name their process: two pids, neither the runner's; a module that dies hard is
    one failed row, and the other's rows still come back."""
    bench = tmp_path / "bench"
    bench.mkdir()
    for name in ("a", "b"):
        (bench / f"bench_{name}.py").write_text(
            "import os\ndef run(quick=False):\n"
            "    return [{'name': 'pid', 'figure': str(os.getpid()), 'target': 'info'}]\n")
    (bench / "bench_c.py").write_text("import os\ndef run(quick=False):\n    os._exit(3)\n")
    rows = {}
    for name in ("a", "b", "c"):
        rows[name], _ = run_all.run_one(bench / f"bench_{name}.py", True)
    pids = {int(rows[n][0]["figure"]) for n in ("a", "b")}
    assert len(pids) == 2 and os.getpid() not in pids
    assert rows["a"][0]["ok"] is None and rows["a"][0]["ratio"] is None
    assert rows["c"] == [{"name": "bench_c: crashed", "figure": "its process ended with status 3 and no rows",
                          "ratio": None, "target": "runs", "ok": False}]
