"""Shared fixtures: a real log file in tmp_path, an isolated environment, the CLI runner.

Keep this small and generic; area-specific fixtures belong in the area's test module.
"""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # tests import the packages from the checkout
    sys.path.insert(0, ROOT)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    """No test reads the user's config or writes the user's state: XDG dirs point at a
    per-test temporary folder and $FLEETWATCH_DB / $FLEETWATCH_CONFIG are unset."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.delenv("FLEETWATCH_DB", raising=False)
    monkeypatch.delenv("FLEETWATCH_CONFIG", raising=False)


@pytest.fixture
def db_path(tmp_path) -> str:
    """Path of a (not yet created) event log in tmp_path."""
    return str(tmp_path / "events.db")


@pytest.fixture
def log(db_path):
    """An open EventLog (durability normal, for speed) on ``db_path``; closed afterwards."""
    from events.log import EventLog

    lg = EventLog(db_path, durability="normal")
    yield lg
    lg.close()


@pytest.fixture
def cli():
    """``cli(*args, input=None, env=None) -> click Result`` running the typer app in-process."""
    from typer.testing import CliRunner

    from watcher.cli import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: dict | None = None):
        return runner.invoke(app, [str(a) for a in args], input=input, env=env, catch_exceptions=False)

    return invoke
