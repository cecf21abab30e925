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
from watcher.cli.plain import context, error_text, explicit_db, open_log  # noqa: F401 (typer-free: shared with the fast path)

ConfigOpt = Annotated[Optional[str], typer.Option("--config", help="Config file (else $FLEETWATCH_CONFIG, else $XDG_CONFIG_HOME/fleetwatch/config.toml).")]
DbOpt = Annotated[Optional[str], typer.Option("--db", help="Event log path (else $FLEETWATCH_DB, else [store] path).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def fail(err: FleetwatchError) -> None:
    print(error_text(err), file=sys.stderr)
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
            raise typer.Exit(0) from None

    return wrapper
