"""The board's filter (`/`) on agents whose ids and tasks hold controls or bidi characters: the
board shows them escaped (``wt\\x1b[1m``), and typing what is on the screen matched nothing (the
filter searched only the raw values). Textual's pilot on a real log."""
from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("textual")

from events.log import EventLog  # noqa: E402
from events.types import AgentClassified  # noqa: E402
from watcher.board.app import Board  # noqa: E402
from watcher.board.feed import Feed  # noqa: E402


def test_typing_the_escaped_id_the_board_shows_finds_that_agent(tmp_path):
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", task=t, reason="r", source="fleet",
                                contract_sha256="x")
                for a, t in (("wt\x1b[1m", "plain"), ("a2", "bi\u202edi"), ("a3", "other"))], time.time())
    log.close()

    async def go():
        app = Board(Feed(db), compact=False)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            shown = str(app.query_one("#fleet").get_row("wt\x1b[1m")[1])   # [0]: the class glyph
            assert shown == "wt\\x1b[1m"
            await pilot.press("/")
            await pilot.pause()
            for needle, want in ((shown, ["wt\x1b[1m"]), ("bi\\u202edi", ["a2"]), ("other", ["a3"])):
                app.query_one("#filter").value = needle
                await pilot.pause()
                assert [a["agent"] for a in app.rows] == want, needle
    asyncio.run(go())
