"""The typer-free half of the CLI: what a command needs besides its option parsing.

``context`` / ``open_log`` (the config and the log a command reads) and ``error_text`` (how a
typed error reads on stderr) are shared by the typer commands (through ``watcher.cli.util``) and
by the fast start path (``watcher.cli.fast``), so both print the same bytes and exit the same
way. Importing this module imports no typer, rich, apprise or watchdog.
"""
from __future__ import annotations

import os
from typing import Any

from events.errors import FleetwatchError


def error_text(err: FleetwatchError) -> str:
    """The message a typed error prints on stderr (its exit code is ``err.exit_code``): the
    message and the hint each one line of inert text (``projections.text.safe``), since either
    may carry a path, an id or an error text from a file someone else named (a folder called
    ``ESC]0;…BEL`` retitled the terminal through "no event log here yet (PATH)")."""
    from projections.text import safe

    msg = f"fleetwatch: {safe(err)}"
    if getattr(err, "hint", ""):
        msg += f"\n  hint: {safe(err.hint)}"
    return msg


def context(config: str | None, db: str | None, *, need_config: bool = False, check_paths: bool = False):
    """(cfg, db_path) for a command. Reading commands do not insist that source folders exist,
    and read past a bad key of one section (left out, with a warning on stderr: ``load_lenient``);
    ``need_config`` (`run`, `hub`) refuses it."""
    from watcher.config import db_path, load
    from watcher.config_lenient import load_lenient

    cfg = load(config, required=True, check_paths=check_paths) if need_config else load_lenient(config)
    return cfg, db_path(cfg, db)


def explicit_db(db: str | None, cfg=None) -> bool:
    """The log path was given by hand (--db, $FLEETWATCH_DB or the config's ``[store] path``): a
    folder that does not exist is a typo to refuse (unless --create), not a folder to make. Only
    the default path (``$XDG_STATE_HOME/fleetwatch/events.db``) gets its folder made."""
    return bool(db) or bool(os.environ.get("FLEETWATCH_DB")) or bool(cfg is not None and cfg.store.path)


def open_log(config: str | None, db: str | None, *, create: bool = False, readonly: bool = False):
    """(cfg, EventLog). ``readonly``: a read-only connection (reading commands: a read-only copy
    can be read). A new log is created with ``create``, its folder only for the default path."""
    cfg, path = context(config, db)
    return cfg, open_at(cfg, path, db, create=create, readonly=readonly)


def open_at(cfg, path: str, db: str | None, *, create: bool = False, readonly: bool = False):
    """``open_log``'s EventLog for a ``context`` already had (``cfg, path``): the config read once."""
    from events.log import EventLog

    return EventLog(path, durability=cfg.store.durability, create=create, readonly=readonly,
                    parents=not explicit_db(db, cfg))


def shown_id(given: str, known: Any) -> str:
    """``given`` as the agent id it names: itself when known; else the one known id whose escaped
    form (what `status`, `summary`, `tail` and the board print, ``projections.text.safe``) it is, so
    `verdict 'wt\\x1b[1m' met ...` names the agent whose id holds that ESC, as shown (typing the raw
    control characters was the only way). ``safe`` is one-to-one (backslashes are doubled): at most
    one id matches."""
    if given in known or "\\" not in given:
        return given
    from projections.text import safe

    return next((k for k in known if isinstance(k, str) and safe(k) == given), given)
