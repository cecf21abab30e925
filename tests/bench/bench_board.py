"""The board: a commit shows within a second, and a redraw costs about what `status` costs.

Rows (run by tests/bench/run_all.py):
- ``board: commit -> screen``: real log, real Textual app (headless), one class change appended at a
  time; the time until the board's model shows it. Ratio: the slowest of them against the 1 s promise.
- ``board: redraw N agents``: one redraw (fold, views, in-place table update) against the same-work
  baseline measured in the same run: ``status`` building its document and plain text for the same log.
"""
from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from events.log import EventLog
from events.types import AgentClassified


def _log(path: str, n: int) -> EventLog:
    elog = EventLog(path, durability="normal")
    elog.append([AgentClassified(agent=f"a{i:04d}", to="TRABAJANDO", state="busy", task=f"t{i}", source="fleet",
                                 contract_sha256="x") for i in range(n)], time.time())
    return elog


async def _measure(db: str, elog: EventLog, changes: int) -> tuple[list[float], float]:
    from watcher.board.app import Board
    from watcher.board.feed import Feed

    app = Board(Feed(db), compact=False)
    lat = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for k in range(changes):
            aid = f"a{k:04d}"
            t0 = time.perf_counter()
            elog.append([AgentClassified(agent=aid, from_="TRABAJANDO", to="RECLAMA", source="fleet",
                                         contract_sha256="x")], time.time())
            while not ((r := app.row(aid)) and r["class"] == "RECLAMA"):
                await pilot.pause(0.005)
            lat.append(time.perf_counter() - t0)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            app.redraw()
            best = min(best, time.perf_counter() - t0)
    return lat, best


def _status_baseline(db: str) -> float:
    from watcher.cli.render import status_plain
    from watcher.board.feed import Feed

    f = Feed(db)
    f.poll()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        status_plain(f.doc(time.time()))
        best = min(best, time.perf_counter() - t0)
    f.close()
    return best


def run(quick: bool = False) -> list[dict]:
    rows = []
    for n in ((30,) if quick else (30, 300)):
        with tempfile.TemporaryDirectory() as d:
            db = str(Path(d) / "events.db")
            elog = _log(db, n)
            lat, redraw = asyncio.run(_measure(db, elog, 5 if quick else 10))
            base = _status_baseline(db)
            elog.close()
        if n == 30:
            rows.append({"name": "board: commit -> screen, 30 agents",
                         "figure": f"p50 {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms",
                         "ratio": round(max(lat) / 1.0, 2), "target": "max < 1 s (ratio < 1)", "ok": max(lat) < 1.0})
        rows.append({"name": f"board: redraw {n} agents vs status",
                     "figure": f"{redraw * 1000:.1f} ms vs {base * 1000:.1f} ms",
                     "ratio": round(redraw / base, 2) if base else None, "target": "<= 5 (300 agents)",
                     "ok": None if n < 300 else redraw <= 5 * base})
    return rows


if __name__ == "__main__":
    for r in run("--quick" in __import__("sys").argv):
        print(r)
