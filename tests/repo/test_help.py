"""Every command and sub-command on ``watcher.cli.app`` has help, and ``--help`` exits 0.

The walk goes over typer's click group (nested groups included), so commands added later are
covered without touching this file.
"""
from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from watcher.cli import app


def _walk(cmd, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """(path, command) for the group and everything under it. Duck-typed: typer may ship its
    own copy of click, so no isinstance checks against ``click``."""
    out = [(path, cmd)]
    if hasattr(cmd, "list_commands"):
        ctx = type(cmd).context_class(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                out += _walk(sub, path + (name,))
    return out


COMMANDS = _walk(typer.main.get_command(app))


def test_the_walk_finds_the_log_commands():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"", "tail", "verify", "export"} <= names


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) or "fleetwatch" for p, _ in COMMANDS])
def test_help(path, cmd):
    text = (cmd.help or cmd.short_help or "").strip()
    assert text, f"`fleetwatch {' '.join(path)}` has no help text"
    r = CliRunner().invoke(app, [*path, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.output and text.split()[0] in r.output
    for p in cmd.params:                                              # every option explains itself
        if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False):
            assert (p.help or "").strip(), f"`fleetwatch {' '.join(path)}` option {p.opts} has no help"
