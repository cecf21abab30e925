"""Data files shipped with the package: ``goal.schema.json``, the JSON Schema of goal.json (the
one file a user writes). Read with ``goal_schema()``; standard library only."""
from __future__ import annotations

import json
from importlib.resources import files
from typing import Any


def goal_schema_text() -> str:
    """The schema exactly as shipped (pretty-printed JSON)."""
    return files(__package__).joinpath("goal.schema.json").read_text(encoding="utf-8")


def verdict_schema_text() -> str:
    """The JSON Schema of a verifier's answer (``[dod] verifier``; watcher/runtime/verifier.py)."""
    return files(__package__).joinpath("verdict.schema.json").read_text(encoding="utf-8")


def goal_schema() -> dict[str, Any]:
    return json.loads(goal_schema_text())
