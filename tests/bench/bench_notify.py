"""Benchmark: the notify decision cost and commit → POST latency.

1. Decision cost per event: a burst of 10,000 events (agent.classified across 500 agents, with
   rule violations and swarm children) folded into the notify projection with one ``plan`` per
   100 events (a tick), against a bare fold of the same records into a dict (same run).
2. Latency with ``group_wait = 0``: append one RECLAMA to a real EventLog (commit), fold, step
   the real Notifier; time until the local HTTP receiver gets the POST (p50, p99), against a
   bare ``apprise.notify`` call to the same receiver, interleaved in the same run.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from events.log import EventLog, Recorded, iso  # noqa: E402
from events.types import AgentClassified, NoticeSent, RuleViolated, SwarmChanged, tag_of  # noqa: E402
from projections.fleet import fold as fleet
from projections.notify import fold as notify  # noqa: E402
from projections.notify.fold import Policy  # noqa: E402
from projections.notify.plan import plan  # noqa: E402
from watcher.config import parse  # noqa: E402
from watcher.runtime.notifier import Deliverer, Notifier  # noqa: E402
from watcher.runtime.state import Projections  # noqa: E402

T0 = 1_800_000_000.0
CLASSES = ("TRABAJANDO", "RECLAMA", "TRABAJANDO", "ESTANCADO", "DICE_TERMINADO", "MAL_LANZADO")


def _burst(n: int) -> list[Recorded]:
    out = []
    for i in range(n):
        t = T0 + i * 0.05
        if i % 97 == 0:
            ev = RuleViolated(run=f"r{i % 7}", rule="no-redo", step="apply")
        elif i % 13 == 0:
            ev = SwarmChanged(group=f"g{i % 5}", child=f"c{i}", to="running")
        else:
            a = i % 500
            ev = AgentClassified(agent=f"a{a}", to=CLASSES[(i // 500) % len(CLASSES)], state="idle",
                                 reason="idle, no activity for 15m")
        out.append(Recorded(i + 1, f"id{i}", iso(t), tag_of(ev), ev.subject, 1, ev, b"", b""))
    return out


def decision_cost(n: int = 10_000, rounds: int = 3) -> dict:
    recs = _burst(n)
    pol = Policy(min_severity="info")
    best_n = best_b = float("inf")
    for _ in range(rounds):
        st = notify.initial()
        t = time.perf_counter()
        seq = n
        for i, r in enumerate(recs):
            st = notify.fold(st, r)
            if i % 100 == 99:  # a tick: plan, and fold back what the deliverer records
                now = T0 + i * 0.05
                for m in plan(st, now, pol).send:
                    seq += 1
                    ev = NoticeSent(notice=m.notice, covers=m.covers, title=m.title, severity=m.severity,
                                    keys=m.keys)
                    st = notify.fold(st, Recorded(seq, "x", iso(now), "notice.sent", ev.subject, 1, ev, b"", b""))
        best_n = min(best_n, time.perf_counter() - t)
        d: dict = {}
        t = time.perf_counter()
        for r in recs:
            d[r.subject] = getattr(r.event, "to", None)
        best_b = min(best_b, time.perf_counter() - t)
    us, base = best_n / n * 1e6, best_b / n * 1e6
    return {"name": "notify decision cost per event (fold + plan & record per 100 ev, 10k burst)",
            "figure": f"{us:.1f} µs/event vs bare dict fold {base:.2f} µs/event",
            "ratio": round(us / base, 1), "target": "< 50 µs/event", "ok": us < 50}


class _Rx:
    def __init__(self) -> None:
        self.arrivals: list[tuple[float, dict]] = []
        self.cv = threading.Condition()
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                t = time.perf_counter()
                self.send_response(200)
                self.end_headers()
                with outer.cv:
                    outer.arrivals.append((t, json.loads(body)))
                    outer.cv.notify_all()

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def wait(self, k: int, timeout: float = 10.0) -> float:
        with self.cv:
            if not self.cv.wait_for(lambda: len(self.arrivals) >= k, timeout):
                raise RuntimeError("receiver got nothing")
            return self.arrivals[k - 1][0]


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs) + 0.5) - 1))]


def latency(samples: int = 60) -> list[dict]:
    rx = _Rx()
    port = rx.srv.server_address[1]
    tmp = tempfile.mkdtemp(prefix="fw-bench-notify-")
    cfg = parse(f'[notify]\nurls = ["json://127.0.0.1:{port}/hook"]\ngroup_wait = "0s"\n', check_paths=False)
    elog = EventLog(os.path.join(tmp, "e.db"), durability="full")
    proj = Projections({"fleet": fleet, "notify": notify})
    n = Notifier(cfg)
    bare = Deliverer(cfg)
    fw, ap = [], []
    got = 0
    try:
        for i in range(samples + 3):
            t0 = time.perf_counter()                       # commit -> fold -> plan -> worker -> POST
            now = time.time()
            elog.append([AgentClassified(agent=f"a{i}", from_="TRABAJANDO", to="RECLAMA", state="waiting")], now)
            proj.catch_up(elog)
            out = n.step(proj.states, now)
            got += 1
            t1 = rx.wait(got)
            n.drain(10)
            out += n.step(proj.states, time.time())        # record notice.sent (not timed)
            elog.append(out, time.time())
            proj.catch_up(elog)
            t2 = time.perf_counter()                        # bare apprise call, same receiver
            if not bare.send("bench", f"RECLAMA a{i}", "failure").ok:
                raise RuntimeError("bare apprise call failed")
            got += 1
            t3 = rx.wait(got)
            if i >= 3:  # warm-up: apprise plugin import, first connection
                fw.append((t1 - t0) * 1000)
                ap.append((t3 - t2) * 1000)
    finally:
        n.close(5)
        elog.close()
        rx.srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    p50, p99, b50, b99 = _pct(fw, 50), _pct(fw, 99), _pct(ap, 50), _pct(ap, 99)
    return [
        {"name": "commit → POST received, group_wait=0 (p50)",
         "figure": f"{p50:.1f} ms vs bare apprise {b50:.1f} ms (n={len(fw)})",
         "ratio": round(p50 / b50, 2), "target": "< bare + 50 ms", "ok": p50 < b50 + 50},
        {"name": "commit → POST received, group_wait=0 (p99)",
         "figure": f"{p99:.1f} ms vs bare apprise {b99:.1f} ms (n={len(fw)})",
         "ratio": round(p99 / b99, 2), "target": "< bare + 100 ms", "ok": p99 < b99 + 100},
    ]


def run(quick: bool = False) -> list[dict]:
    return [decision_cost(10_000, 1 if quick else 3)] + latency(15 if quick else 100)


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(f"{row['name']}: {row['figure']}  ratio={row['ratio']}  target {row['target']}  ok={row['ok']}")
