"""The typer CLI app: every command module registers itself here.

Every command takes ``--config`` and ``--db``. Area modules (``watcher/cli/*.py``) add their commands
through ``register(app)``; the shared options and the error handling are in ``watcher/cli/util.py``.
"""
from __future__ import annotations

import typer

app = typer.Typer(
    name="fleetwatch",
    help="The cheap, always-on, no-LLM eye on a fleet of AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_all() -> None:
    from watcher.cli import demo, hook, log, notify, run, service, status

    for mod in (log, run, status, notify, service, hook, demo):
        mod.register(app)


_register_all()
