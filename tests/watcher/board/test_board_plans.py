"""The board's Plans tab (issue 44): a plan's tasks by state and what waits on what, from a real log."""
from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("textual")

from events.log import EventLog  # noqa: E402
from events.types import AgentLaunched, DodVerdict, PlanRecorded  # noqa: E402
from watcher.board.app import Board  # noqa: E402
from watcher.board.feed import Feed  # noqa: E402


def test_the_plans_tab_shows_tasks_by_state_and_what_waits(tmp_path):
    db = str(tmp_path / "e.db")
    log = EventLog(db, durability="normal")
    log.append([PlanRecorded(plan="p1", max_parallel=1, sha256="0" * 64, tasks=[
        {"id": "t1", "title": "a", "deps": [], "contract_sha256": "x"},
        {"id": "t2", "title": "b", "deps": ["t1"], "contract_sha256": "x"}])], time.time())
    log.append([AgentLaunched(agent="t1", task="a", contract_sha256="x", cwd="/", plan="p1", task_id="t1")], time.time())
    log.append([DodVerdict(agent="t1", verdict="met", verifier="fleetwatch-checks", source="checks")], time.time())
    log.close()

    async def go():
        app = Board(Feed(db), compact=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            t = app.query_one("#plans")
            rows = [[str(c) for c in t.get_row_at(i)] for i in range(t.row_count)]
            assert rows == [["p1", "t1", "met", "t1", "-"], ["p1", "t2", "ready", "-", "-"]]
    asyncio.run(go())
