"""The typer CLI app: every command module registers itself here.

Every command takes ``--config`` and ``--db``. Area modules (``watcher/cli/*.py``) add their commands
through ``register(app)``; the shared options and the error handling are in ``watcher/cli/util.py``.

``app`` is built on first use (``from watcher.cli import app``), so importing a typer-free module
of this room (``watcher.cli.render``) costs no typer import. Help is plain click text (rich markup
off: ``[store]`` and other bracketed words survive); ``-h`` is ``--help``; ``--version`` prints
``fleetwatch X.Y.Z``.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # not at run time: the fast start path (watcher/cli/fast.py) imports typing later
    from typing import Any


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _v

    try:
        return _v("fleetwatch")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout without install
        return "0+unknown"


def _build() -> Any:
    import typer

    app = typer.Typer(
        name="fleetwatch",
        help="The cheap, always-on, no-LLM eye on a fleet of AI coding agents.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    def _version(value: bool) -> None:
        if value:
            print(f"fleetwatch {version()}")
            raise typer.Exit(0)

    @app.callback()
    def _main(
        show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="Print the version and exit."),
    ) -> None:
        """The cheap, always-on, no-LLM eye on a fleet of AI coding agents."""

    from watcher.cli import ack, board, check, claim, demo, hook, hub, launch, log, notify, report, run, schema, service, status

    for mod in (log, run, status, notify, service, hook, demo, board, schema, report, ack, hub, check, launch, claim):
        mod.register(app)
    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        try:
            app = _build()
        except AttributeError as e:  # not "cannot import name app": say what is broken
            raise RuntimeError(f"building the CLI failed: {e}") from e
        globals()["app"] = app
        return app
    raise AttributeError(name)
