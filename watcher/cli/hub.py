"""`fleetwatch hub`: the multi-host hub (watcher/hub/hub.py). Exit codes as `run`: 2 bad config
(or no ``[hub]`` section), 3 another hub holds the hub's log."""
from __future__ import annotations

from typing import Annotated

import typer

from watcher.cli.util import ConfigOpt, DbOpt, errors


def register(app: typer.Typer) -> None:
    @app.command("hub")
    @errors
    def hub(
        log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Consume every host's events from NATS JetStream into this log and run the projections
        and notifier over the whole fleet (agents shown as HOST/AGENT)."""
        from events.errors import ConfigError
        from watcher.cli.util import context
        from watcher.runtime.logs import setup_logging

        setup_logging(log_level)
        cfg, path = context(config, db, need_config=True, check_paths=True)
        if cfg.hub is None:
            raise ConfigError("the hub needs a [hub] section (nats, stream, silent_after)", key="hub",
                              path=cfg.config_path or "", op="config")
        import importlib.util

        if importlib.util.find_spec("nats") is None:
            raise ConfigError("the hub needs the NATS client: pip install 'fleetwatch[hub]'", key="hub",
                              path=cfg.config_path or "", op="config")
        from watcher.hub.hub import serve

        from watcher.cli.util import explicit_db

        raise typer.Exit(serve(cfg, path, parents=not explicit_db(db, cfg)))  # a typo'd path: refused, as run
