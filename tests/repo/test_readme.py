"""README and --help stay in step: every command the CLI has is documented with an example, the
README starts with the two commands a newcomer runs, is the build of docs/readme/ (`make readme`),
stays under 25 KB with a table of contents, documents goal.json as the shipped JSON Schema does,
and keeps troubleshooting in one place."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess

import click
import typer.main

from watcher.cli import app
from tests.support.exe import FLEETWATCH
from tests.support.exe import ROOT

README = os.path.join(ROOT, "README.md")


def text() -> str:
    return open(README, encoding="utf-8").read()


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


def builder():
    spec = importlib.util.spec_from_file_location("build_readme", os.path.join(ROOT, "tools", "build_readme.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parts() -> list[str]:
    mk = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    m = re.search(r"^README_PARTS := ((?:.*\\\n)*.*)$", mk, re.M)
    return m.group(1).replace("\\\n", " ").split()


def test_every_command_is_in_the_readme_with_an_example():
    t = text()
    missing = [c for c in commands() if f"fleetwatch {c}" not in t]
    assert not missing, f"README lacks an example of: {missing}"


def test_readme_starts_with_make_demo_and_make_test():
    first = [ln.split("#")[0].strip() for ln in text().splitlines() if ln.startswith("make ")][:2]
    assert first == ["make demo", "make test"]


def test_readme_is_the_build_of_its_parts():
    body, _ = builder().build(parts())
    assert body == text(), "README.md is stale: run `make readme`"


def test_every_part_file_is_listed_in_the_makefile():
    listed = set(parts())
    base = os.path.join(ROOT, "docs", "readme")
    files = {os.path.relpath(os.path.join(d, f), base)[:-3] for d, _, fs in os.walk(base) for f in fs if f.endswith(".md")}
    assert files <= listed, f"parts not in README_PARTS: {sorted(files - listed)}"


def test_readme_is_short_with_a_table_of_contents():
    t = text()
    assert len(t.encode("utf-8")) < 25_000
    slug = builder().slug
    heads = re.findall(r"^## (.+)$", t, re.M)
    for h in heads:
        assert f"(#{slug(h)})" in t, f"no table-of-contents entry for {h!r}"
    assert len(re.findall(r"^#+ Troubleshooting", t, re.M)) == 0   # one place: docs/guide/troubleshooting.md
    assert "docs/guide/troubleshooting.md" in t
    for key in ("Watch my Claude Code fleet", "goal.json", "Commands", "Configuration", "Operations"):
        assert any(key in h for h in heads), key


def test_links_in_the_readme_point_at_files():
    for target in re.findall(r"\]\(((?:docs|tools)/[^)#]+)\)", text()):
        assert os.path.exists(os.path.join(ROOT, target)), target


def test_goal_json_fields_are_documented_as_the_schema_ships_them():
    from watcher.schema import goal_schema

    schema = goal_schema()
    t = text()
    section = t[t.index("## goal.json"):t.index("## The board")]
    for field in schema["required"]:
        assert f"| `{field}` |" in section, field
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert documented <= set(schema["properties"]), documented - set(schema["properties"])
    for st in schema["properties"]["state"]["enum"]:
        assert f"`{st}`" in section
    for ph in schema["properties"]["phase"]["enum"]:
        assert f"`{ph}`" in section


def test_schema_goal_prints_the_shipped_schema_and_the_example_is_valid():
    exe = FLEETWATCH
    r = subprocess.run([exe, "schema", "goal"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    schema = json.loads(r.stdout)
    assert schema["required"] == ["state", "dod_contract"]
    ex = schema["examples"][0]
    assert set(ex) <= set(schema["properties"]) and ex["state"] in schema["properties"]["state"]["enum"]
    bad = subprocess.run([exe, "schema", "nosuch"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nosuch" in bad.stderr


def test_the_board_screenshot_is_in_docs():
    assert os.path.exists(os.path.join(ROOT, "docs", "board.svg"))
    assert "](docs/board.svg)" in text()
