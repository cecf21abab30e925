"""The fast start path (watcher/cli/fast.py): the same bytes and exit codes as the typer app, no
typer/rich/apprise/watchdog import, and option tables that name the typer commands' options.
Real processes on a real log."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from watcher.cli import fast
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH
TYPER = "import sys; sys.argv[0] = 'fleetwatch'; from watcher.cli import app; app()"
HEAVY = ("typer", "click", "rich", "apprise", "watchdog")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fast")
    fleet = tmp / "fleet"
    for a, state in (("a1", "busy"), ("a2", "waiting"), ("a\x1b]0;x\x07", "idle")):
        d = fleet / a.replace("\x1b", "E").replace("\x07", "B")
        d.mkdir(parents=True)
        (d / "goal.json").write_text(json.dumps({"agent": a, "state": state, "phase": "haciendo",
                                                 "dod_contract": "pytest passes", "last_activity": 1.8e9}))
    cfg = tmp / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{fleet}/*/goal.json"\n')
    r = subprocess.run([EXE, "run", "--once", "--config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return tmp, cfg


def both(args: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    e = dict(os.environ, **(env or {}))
    a = subprocess.run([EXE, *args], capture_output=True, env=e)
    b = subprocess.run([sys.executable, "-c", TYPER, *args], capture_output=True, env=e)
    return a, b


def ages(out: bytes) -> bytes:
    """Ages ("28s", "3m") read the clock: two processes may straddle a second, and the plain
    table's column widths follow them ("9s" then "10s" pads every row of `status` one more)."""
    out = re.sub(rb'(age_s":)-?[0-9.]+', rb"\1AGE", out)
    out = re.sub(rb'("generated_at":)"[^"]*"', rb"\1AGE", out)
    return re.sub(rb"(?<=\S)  +", b"  ", re.sub(rb"\b\d+[smhd]\b", b"AGE", out))


CASES = [
    ["tail"], ["tail", "-n", "2"], ["tail", "--lines=1", "--json"], ["tail", "--since", "1", "-n", "1"],
    ["tail", "-t", "agent.classified", "--type", "watcher.*"], ["tail", "-s", "a2", "-v"],
    ["tail", "--type", "no.such.type"], ["tail", "-n", "0"],
    ["status"], ["status", "--json"], ["summary"], ["summary", "--json"],
    ["verify"], ["verify", "--json"], ["export"], ["export", "--since", "2"],
    # typer's answers (the fast path hands these over)
    ["tail", "-n", "-1"], ["tail", "--bogus"], ["tail", "-n"], ["tail", "x"], ["export", "--since", "x"],
    ["status", "--json=1"], ["verify", "--expect-head", "1:zz"], ["tail", "-h"], ["status", "--help"],
    # hostile and odd forms: both paths must agree byte for byte
    ["tail", "--lines="], ["tail", "--lines", " 5"], ["tail", "-n", "5_0"], ["tail", "-n", "1", "-n", "2"],
    ["tail", "-s", "\x1b[31m\nforged"], ["status", "--json", "--json"],
    ["tail", "--type", "", "-n", "1"], ["tail", "--Lines", "1"], ["summary", "-"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c) for c in CASES])
def test_fast_path_prints_what_typer_prints(world, args):
    tmp, cfg = world
    a, b = both([*args, "--config", str(cfg)] if "-h" not in args and "--help" not in args else args)
    assert (a.returncode, ages(a.stdout), a.stderr) == (b.returncode, ages(b.stdout), b.stderr)


@pytest.mark.slow
def test_fast_path_errors_read_as_typers(world, tmp_path):
    """A missing log, a bad config, a log that is not a log: same message, same exit code."""
    tmp, cfg = world
    bad = tmp_path / "bad.toml"
    bad.write_text('[watch]\ninterval = "soon"\n')
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    for args in (["tail", "--db", str(tmp_path / "none.db")], ["export", "--db", str(tmp_path / "none.db")],
                 ["verify", "--db", str(tmp_path / "none.db")], ["status", "--db", str(tmp_path / "none.db")],
                 ["status", "--config", str(bad)], ["tail", "--config", str(bad)],
                 ["verify", "--db", str(junk)], ["tail", "--db", str(junk)]):
        a, b = both(args, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), args


def test_fast_path_imports_no_typer_rich_apprise_watchdog(world):
    tmp, cfg = world
    code = ("import sys; from watcher.entry import main; sys.argv = ['fleetwatch'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    for args in (["tail", "-n", "5"], ["status"], ["summary", "--json"], ["verify"], ["export"]):
        r = subprocess.run([sys.executable, "-c", code, *args, "--config", str(cfg)], capture_output=True, text=True)
        assert r.stderr.strip().splitlines()[-1] == "[]", (args, r.stderr)


def test_fast_tables_name_the_typer_options():
    """Every option the fast path reads is the typer command's, with the same kind; every typer
    option it does not read is listed as typer-only (so the path hands those over)."""
    import typer

    from watcher.cli import app

    group = typer.main.get_command(app)
    for name, opts in fast.SPECS.items():
        params = {p.name: p for p in group.commands[name].params if p.param_type_name == "option"}
        seen = set()
        for o in opts:
            p = params[o.dest]
            assert set(o.names) == set(p.opts) | set(p.secondary_opts), (name, o)
            kind = "flag" if p.is_flag else "list" if p.multiple else "int" if p.type_descriptor.annotation is int else "str"
            assert kind == o.kind, (name, o)
            assert o.kind != "int" or p.min == 0, (name, o)   # the fast path refuses n < 0
            seen.add(o.dest)
        rest = {n for p in params.values() if p.name not in seen for n in p.opts}
        assert rest <= set(fast.TYPER_ONLY.get(name, ())) | {"--help", "-h"}, (name, rest)


def test_parse_hands_over_what_it_does_not_take():
    assert fast.parse(["tail", "-n", "5", "-f"]) == ("tail", {"lines": 5, "follow": True})
    assert fast.parse(["tail", "--type=a", "-t", "b"]) == ("tail", {"type_": ["a", "b"]})
    for argv in (["tail", "-fn5"], ["tail", "--"], ["tail", "-n"], ["status", "x"], ["verify", "--restore-guards"],
                 ["tail", "--json=yes"], ["run"], [], ["tail", "-n", "\x00"], ["tail", "--lines", "1e3"]):
        assert fast.parse(argv) is None, argv
