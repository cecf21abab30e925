"""Static checks in `make test`: mypy clean on events/ and projections/, ruff clean on the code.

Both read their settings from pyproject.toml (``[tool.mypy]``, ``[tool.ruff]``: the rule set is
stated there). A missing tool skips with the command that installs it (both are in the ``test``
extra), never passes silently; a finding fails with the tool's own output.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed: pip install -e '.[test]' (or pip install {name})")
    return found


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_is_clean_on_the_core():
    r = _run([_tool("mypy"), "--no-error-summary", "--hide-error-context"])   # files: [tool.mypy]
    assert r.returncode == 0, f"mypy found problems (fix them or state why in pyproject):\n{r.stdout}{r.stderr}"


def test_ruff_is_clean():
    r = _run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "events", "projections", "watcher"])
    assert r.returncode == 0, f"ruff found problems:\n{r.stdout}{r.stderr}"
