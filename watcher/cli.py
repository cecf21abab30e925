"""The typer CLI app: every command module registers itself here.

Every command takes ``--config`` and ``--db``. Area modules (``cli_*.py``) add their commands
through ``register(app)``; the shared options and the error handling are in ``watcher/cliutil.py``.
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
    from watcher import cli_demo, cli_hook, cli_log, cli_notify, cli_run, cli_service, cli_status

    for mod in (cli_log, cli_run, cli_status, cli_notify, cli_service, cli_hook, cli_demo):
        mod.register(app)


_register_all()
