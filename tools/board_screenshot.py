"""Write docs/board.svg: the board over a sample fleet of 30 agents in 80x24 (Textual's own SVG
screenshot). Run: `.venv/bin/python tools/board_screenshot.py [OUT.svg] [--rows]`."""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from events.log import EventLog
from events.types import AgentClassified, DodVerdict, SourceFailed
from watcher.board.app import Board
from watcher.board.feed import Feed

SAMPLE = [("RECLAMA", "waiting", "preguntando", "waiting for the human"), ("RECLAMA", "busy", "bloqueado", "phase bloqueado"),
          ("DICE_TERMINADO", "idle", "hecho", "idle, phase hecho: claims done"),
          ("ESTANCADO", "idle", "haciendo", "idle, no activity for 16m"),
          ("MAL_LANZADO", "busy", "haciendo", "no dod_contract")] + [("TRABAJANDO", "busy", "haciendo", "busy")] * 5


def sample_log(path: str, n: int = 30) -> None:
    now = time.time()
    elog = EventLog(path, durability="normal")
    evs = []
    for i in range(n):
        cls, st, ph, why = SAMPLE[(i * 7) % len(SAMPLE)]
        evs.append(AgentClassified(agent=f"a{i + 1:02d}", to=cls, state=st, phase=ph, reason=why,
                                   task=f"task {i + 1}", target=f"fleet:{i + 1}", source="fleet",
                                   contract_sha256=None if cls == "MAL_LANZADO" else "c" * 64))
    elog.append(evs, now - 900)
    elog.append([DodVerdict(agent="a03", verdict="met", verifier="lead", evidence="pytest green"),
                 SourceFailed(source="tmux", error="timed out after 5s")], now - 60)
    elog.close()


async def shoot(out: str, rows: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "events.db")
        sample_log(db)
        app = Board(Feed(db), compact=False if rows else None)
        async with app.run_test(size=(120, 40) if rows else (80, 24)) as pilot:
            await pilot.pause()
            app.save_screenshot(filename=Path(out).name, path=str(Path(out).parent))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(shoot(args[0] if args else "docs/board.svg", "--rows" in sys.argv))
    print(f"wrote {args[0] if args else 'docs/board.svg'}")
