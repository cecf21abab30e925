"""The console script. ``fleetwatch hook`` takes a fast path that never imports typer/rich
(a Claude Code hook must start and exit in well under 100 ms); everything else is the typer app."""
from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and not any(a in ("install", "--help", "-h") for a in argv[1:2] + argv[1:]):
        from watcher.hook.adapter import run_hook

        sys.exit(run_hook(argv[1:]))
    from watcher.cli import app

    app()
