"""`fleetwatch board`: the live terminal board (see ``watcher.board``). `q` quits."""
from __future__ import annotations

import getpass
import sys
from typing import Annotated, Optional

import typer

from watcher.cli.util import ConfigOpt, DbOpt, context, errors


def tmux_socket(cfg) -> str | None:
    """The -L socket of the first tmux source (where the agents' windows live), else None."""
    return next((s.socket for s in cfg.sources if s.kind == "tmux" and s.socket), None)


def register(app: typer.Typer) -> None:
    @app.command("board")
    @errors
    def board_cmd(
        compact: Annotated[Optional[bool], typer.Option("--compact/--rows", help="Several agents a line (30 agents in 80x24) or one row per agent; default: several when the rows do not fit.")] = None,
        closed: Annotated[bool, typer.Option("--closed", help="Show CERRADO agents too (key c toggles).")] = False,
        socket: Annotated[Optional[str], typer.Option("--socket", help="tmux -L socket of the agents' windows (default: the tmux source's socket).")] = None,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """The live board: agents by urgency, coloured by class, with what each needs, its DoD and
        its handling; runs, missions, swarms, events. Follows the event log (a commit shows within
        a second). Keys: enter agent view, j jump to its tmux window, / filter, h hide handled,
        s silence, v verdict, c closed, m compact, q quit."""
        try:
            from watcher.board.app import Board
            from watcher.board.feed import Feed
        except ModuleNotFoundError as e:
            print(f"fleetwatch: the board needs Textual ({e.name} is missing)\n"
                  "  hint: pip install 'fleetwatch[board]'", file=sys.stderr)
            raise typer.Exit(2) from None
        if not (sys.stdin.isatty() and sys.stderr.isatty()):  # Textual draws on the terminal via stderr
            print("fleetwatch: the board needs a terminal (stdin and stderr)\n"
                  "  hint: in scripts use `fleetwatch status` or `fleetwatch tail -f`", file=sys.stderr)
            raise typer.Exit(2)
        cfg, path = context(config, db)
        feed = Feed(path, durability=cfg.store.durability, max_concurrent=cfg.swarm.max_concurrent,
                    max_children=cfg.swarm.max_children)
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
        Board(feed, socket=socket or tmux_socket(cfg), compact=compact, show_closed=closed, verifier=user).run()
