"""The console script. Two fast paths never import typer/rich: ``fleetwatch hook`` (a Claude Code
hook must start and exit in well under 100 ms) and the plain forms of ``tail``, ``status``,
``summary``, ``verify`` and ``export`` (``watcher.cli.fast``: the same functions the typer
commands call); everything else, ``--help`` included, is the typer app."""
from __future__ import annotations

import sys

FAST = ("tail", "status", "summary", "verify", "export")


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and not any(a in ("install", "--help", "-h") for a in argv[1:2] + argv[1:]):
        from watcher.hook.adapter import run_hook

        sys.exit(run_hook(argv[1:]))
    if argv[:1] and argv[0] in FAST:
        from watcher.cli.fast import main as fast

        rc = fast(argv)
        if rc is not None:
            sys.stdout.flush()
            sys.exit(rc)
    from watcher.cli import app

    app()
