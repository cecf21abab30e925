"""Shared pieces of the CLI: the common options, and the one place that turns typed errors into
messages and exit codes (the only place that does). Command modules (``watcher/cli/*.py``) import these, never ``watcher.cli`` (which
imports them to register their commands)."""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from events.errors import FleetwatchError

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


def explicit_db(db: str | None) -> bool:
    """The log path was given by hand (--db or $FLEETWATCH_DB): a folder that does not exist is a
    typo to refuse (unless --create), not a folder to make."""
    import os

    return bool(db) or bool(os.environ.get("FLEETWATCH_DB"))


def open_log(config: str | None, db: str | None, *, create: bool = False, readonly: bool = False):
    """(cfg, EventLog). ``readonly``: a read-only connection (reading commands: a read-only copy
    can be read). A new log is created with ``create``, its folder only for the default path."""
    from events.log import EventLog

    cfg, path = context(config, db)
    return cfg, EventLog(path, durability=cfg.store.durability, create=create, readonly=readonly,
                         parents=not explicit_db(db))
