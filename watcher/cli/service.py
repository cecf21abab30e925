"""CLI commands for first run and the service: ``install-service``, ``init``, ``doctor`` (the
logic lives in ``watcher.service.units`` and ``watcher.cli.doctor``)."""
from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from watcher.cli.util import ConfigOpt, DbOpt, errors
from watcher.service.units import install_service, write_config


def register(app: typer.Typer) -> None:
    @app.command("install-service")
    @errors
    def install_service_cmd(
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")] = False,
        force: Annotated[bool, typer.Option("--force", help="Replace units edited by hand.")] = False,
        hub: Annotated[bool, typer.Option("--hub", help="Write the hub's unit (fleetwatch-hub.service: `fleetwatch hub`) instead.")] = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Write the systemd user units (watcher + daily verify timer) for this install to
        ~/.config/systemd/user/ and reload the user manager. Idempotent."""
        extra: list[str] = []
        if config:
            extra += ["--config", os.path.abspath(os.path.expanduser(config))]
        if db:
            extra += ["--db", os.path.abspath(os.path.expanduser(db))]
        raise typer.Exit(install_service(dry_run=dry_run, force=force, extra_args=extra, hub=hub))

    @app.command("init")
    @errors
    def init_cmd(
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config (kept as .bak).")] = False,
        config: ConfigOpt = None,
        db: Annotated[Optional[str], typer.Option("--db", help="Write this event log path into the config's [store] path (else it stays commented: the default).")] = None,
    ) -> None:
        """Write a commented default config (exit 1 if one exists)."""
        from events.errors import ConfigError
        from events.schema import is_utf8
        from projections.text import safe
        from watcher.config import config_path, expand

        path = config_path(config)
        if db is not None:
            db = os.path.abspath(expand(db))  # as the watcher would read it from here, whatever its CWD
            if not is_utf8(db):
                raise ConfigError("--db: the path is not valid UTF-8 (a TOML config holds UTF-8); nothing was written",
                                  key="--db", op="init", path=db, hint="rename the folder or pick another path")
        backup = write_config(path, force=force, db=db)
        if backup:
            typer.echo(f"previous config saved as {safe(backup)}")
        typer.echo(f"wrote {safe(path)}\nnext: add a [[sources]] entry and notify URLs, then `fleetwatch doctor`")

    @app.command("doctor")
    @errors
    def doctor_cmd(config: ConfigOpt = None, db: DbOpt = None) -> None:
        """Check config, sources, event log, notify URLs and the service unit. Exit 1 if any fails."""
        from watcher.cli.doctor import doctor

        raise typer.Exit(doctor(config, db))
