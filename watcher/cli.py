"""The typer CLI. The only place that turns typed errors into messages and exit codes.

Every command takes ``--config`` and ``--db``. Area modules (``cli_*.py``) add their commands
through ``register(app)``.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from events.errors import FleetwatchError

app = typer.Typer(
    name="fleetwatch",
    help="The cheap, always-on, no-LLM eye on a fleet of AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOpt = Annotated[Optional[str], typer.Option("--config", help="Config file (else $FLEETWATCH_CONFIG, else $XDG_CONFIG_HOME/fleetwatch/config.toml).")]
DbOpt = Annotated[Optional[str], typer.Option("--db", help="Event log path (else $FLEETWATCH_DB, else [store] path).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def fail(err: FleetwatchError) -> None:
    msg = f"fleetwatch: {err}"
    if getattr(err, "hint", ""):
        msg += f"\n  hint: {err.hint}"
    print(msg, file=sys.stderr)
    raise typer.Exit(err.exit_code)


def errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command: typed errors -> one message on stderr and their exit code."""

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        except FleetwatchError as e:
            fail(e)
        except BrokenPipeError:
            raise typer.Exit(0)

    return wrapper


def context(config: str | None, db: str | None, *, need_config: bool = False, check_paths: bool = False):
    """(cfg, db_path) for a command. Reading commands do not insist that source folders exist."""
    from watcher.config import db_path, load

    cfg = load(config, required=need_config, check_paths=check_paths)
    return cfg, db_path(cfg, db)


def open_log(config: str | None, db: str | None, *, create: bool = False):
    from events.log import EventLog

    cfg, path = context(config, db)
    return cfg, EventLog(path, durability=cfg.store.durability, create=create)


def _register_all() -> None:
    import importlib

    for name in ("cli_log", "cli_run", "cli_status", "cli_notify", "cli_service", "cli_hook", "cli_demo"):
        try:
            mod = importlib.import_module(f"watcher.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"watcher.{name}":
                continue
            raise
        mod.register(app)


_register_all()
