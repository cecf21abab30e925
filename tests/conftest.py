"""Shared fixtures: a real log file in tmp_path, an isolated environment, the CLI runner, and the
fixtures more than one test module uses (a webhook receiver, the runs harness, a nats-server, the
phone page). A fixture only one module uses stays in that module; the helpers behind these live in
tests/support/ (test modules never import from each other, nor fixtures by name).
"""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # tests import the packages from the checkout
    sys.path.insert(0, ROOT)

# marks of the long tests (several seconds each: real clients, drills, end-to-end runs)
LONG_FIRST = ("slow", "realclient", "drill")


def pytest_collection_modifyitems(config, items):
    """The long tests run first, the rest after them in their usual order (a stable sort). With
    several workers (make test: pytest-xdist, --dist worksteal) the short tests then fill the end of
    the queues, so no worker is left alone on a long test while the others have finished.
    Every worker sorts the same collection the same way, as xdist requires."""
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in LONG_FIRST))


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


@pytest.fixture
def rx():
    """A local webhook receiver (tests/support/notifyloop.py's Receiver); closed afterwards."""
    from tests.support.notifyloop import Receiver

    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def h(tmp_path):
    """The runs harness on a real log in tmp_path (tests/support/runsworld.py); closed afterwards."""
    from tests.support.runsworld import Harness

    x = Harness(tmp_path)
    yield x
    x.close()


@pytest.fixture
def nats_server(tmp_path):
    """A real nats-server with JetStream on a free loopback port (tests/support/natsserver.py);
    the test skips when the binary is not installed."""
    from tests.support.natsserver import MISSING, NatsServer, binary

    if binary() is None:
        pytest.skip(MISSING)
    s = NatsServer(tmp_path / "nats").start()
    yield s
    s.stop()


@pytest.fixture
def site(tmp_path):
    """The phone page over a log where a1 and a2 were pushed (tests/support/webpage.py's Site)."""
    from tests.support.webpage import Site

    s = Site(tmp_path)
    yield s
    s.close()
