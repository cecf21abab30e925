"""`fleetwatch schema goal`: print the JSON Schema of goal.json (shipped in the package)."""
from __future__ import annotations

import sys
from typing import Annotated

import typer

from watcher.cli.util import ConfigOpt, DbOpt, errors

SCHEMAS = ("goal", "verdict")


def register(app: typer.Typer) -> None:
    @app.command("schema")
    @errors
    def schema_cmd(
        name: Annotated[str, typer.Argument(metavar="NAME", help="Which schema: goal (goal.json).")] = "goal",
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Print a JSON Schema: `fleetwatch schema goal` is the format of goal.json (validate your
        files with any JSON Schema tool, e.g. `check-jsonschema --schemafile`)."""
        from watcher.schema import goal_schema_text

        del config, db  # taken as by every command (docs/contract.md); the schema depends on neither

        if name not in SCHEMAS:
            print(f"fleetwatch: unknown schema {name[:40]!r}; known: {', '.join(SCHEMAS)}", file=sys.stderr)
            raise typer.Exit(2)
        if name == "verdict":   # a verifier's answer ([dod] verifier)
            from watcher.schema import verdict_schema_text

            sys.stdout.write(verdict_schema_text())
            return
        sys.stdout.write(goal_schema_text())
