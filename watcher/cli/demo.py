"""`fleetwatch demo`: the newcomer's tour (see watcher/demo/show.py)."""
from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        fast: Annotated[bool, typer.Option("--fast", help="Short pauses and timers (about 20 s; for tests).")] = False,
        keep: Annotated[bool, typer.Option("--keep", help="Keep the temporary folder (config, goal.json files, "
                                                          "events.db) to explore afterwards.")] = False,
    ) -> None:
        """A simulated fleet of eight agents, one run and two missions, watched by the real watcher in a
        temporary folder: every class, a verdict, a rule violation and a grouped push to a local receiver,
        the live event tail, then the summary. Ends by itself in about a minute; touches none of your
        config or log."""
        from watcher.demo.show import run

        raise typer.Exit(run(fast=fast, keep=keep))
