"""README and --help stay in step: every command the CLI has is documented with an example, and
the README starts with the two commands a newcomer runs."""
from __future__ import annotations

import os

import click
import typer.main

from watcher.cli import app

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def commands() -> list[str]:
    out = []

    def walk(group: click.Group, prefix: str) -> None:
        for name, sub in group.commands.items():
            full = f"{prefix} {name}".strip()
            out.append(full)
            if isinstance(sub, click.Group):
                walk(sub, full)

    walk(typer.main.get_command(app), "")
    return out


def test_every_command_is_in_the_readme_with_an_example():
    text = open(README, encoding="utf-8").read()
    missing = [c for c in commands() if f"fleetwatch {c}" not in text]
    assert not missing, f"README lacks an example of: {missing}"


def test_readme_starts_with_make_demo_and_make_test():
    text = open(README, encoding="utf-8").read()
    first = [ln.split("#")[0].strip() for ln in text.splitlines() if ln.startswith("make ")][:2]
    assert first == ["make demo", "make test"]
