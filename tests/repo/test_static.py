"""Static checks in `make test`: mypy clean on the whole package, events/, projections/ and watcher/,
no module let off (apsw checked against its stubs, its rows read only through the typed adapter
events/sqlrows.py), ruff clean on the code and on the tests.

Both read their settings from pyproject.toml (``[tool.mypy]``, ``[tool.ruff]``: the rule set is
stated there). A missing tool skips with the command that installs it (both are in the ``test``
extra), never passes silently; a finding fails with the tool's own output.
"""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.exe import ROOT



def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed: pip install -e '.[test]' (or pip install {name})")
    return found


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_mypy_is_clean():
    r = _run([_tool("mypy"), "--no-error-summary", "--hide-error-context"])   # files: [tool.mypy]
    assert r.returncode == 0, f"mypy found problems (fix them or state why in pyproject):\n{r.stdout}{r.stderr}"


def test_mypy_covers_the_whole_package_without_exceptions():
    """mypy checks events/, projections/ and watcher/ and lets no module off: no override of
    pyproject.toml ignores a module's errors (a needed ignore is a narrow one on its line)."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert set(conf["files"]) == {"events", "projections", "watcher"}
    assert not conf.get("ignore_errors"), "[tool.mypy] ignores every error"
    excepted = [m for o in conf.get("overrides", []) if o.get("ignore_errors") for m in o["module"]]
    assert excepted == [], f"modules excepted from mypy: {excepted} (fix their errors instead)"


def test_ruff_is_clean():
    r = _run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "events", "projections", "watcher",
              "tests"])
    assert r.returncode == 0, f"ruff found problems:\n{r.stdout}{r.stderr}"


def _row_reads(path: Path) -> list[str]:
    """Where a module reads apsw rows itself: the result of ``.execute(...)`` / ``.executemany(...)``
    used (iterated, assigned, passed on) or ``.fetchall()`` / ``.fetchone()`` kept, rather than a
    statement whose rows are dropped."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, up = node.func.attr, parents.get(node)
        if name in ("execute", "executemany"):
            if isinstance(up, ast.Attribute) and up.attr == "fetchall":   # x.execute(...).fetchall()
                continue                                                 # judged as the fetchall
            if not isinstance(up, ast.Expr):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno}: the rows of .{name}() are read")
        elif name in ("fetchall", "fetchone") and not isinstance(up, ast.Expr):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{name}() rows are read")
    return out


def test_only_the_typed_adapter_reads_apsw_rows():
    """apsw types rows as Any (a cursor) or a union of every SQLite type: events/sqlrows.py states
    each query's column types once, so mypy checks the code that uses them (issue 23)."""
    found = [hit for p in sorted((ROOT / "events").glob("*.py")) if p.name != "sqlrows.py" for hit in _row_reads(p)]
    assert not found, "read these through events/sqlrows.py:\n" + "\n".join(found)
