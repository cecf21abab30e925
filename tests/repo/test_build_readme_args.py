"""tools/build_readme.py took any argument for a part name: `--help` (or no argument, a typo, a
file name) rewrote README.md to 0 bytes and deleted the generated docs/guide/*.md. It now refuses
anything but part names with a usage line and exit 2 before touching a file, and builds exactly
as before from the Makefile's parts. Runs the real script as a process, on a copy of the repo's
docs (the script writes next to itself), so the checkout is never at risk."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.exe import ROOT



def makefile_parts() -> list[str]:
    mk = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(r"^README_PARTS := ((?:.*\\\n)*.*)$", mk, re.M)
    assert m
    return m.group(1).replace("\\\n", " ").split()


def copy_of_the_docs(tmp_path: Path) -> Path:
    (tmp_path / "tools").mkdir()
    shutil.copy2(ROOT / "tools" / "build_readme.py", tmp_path / "tools")
    shutil.copytree(ROOT / "docs" / "readme", tmp_path / "docs" / "readme")
    shutil.copytree(ROOT / "docs" / "guide", tmp_path / "docs" / "guide")
    shutil.copy2(ROOT / "README.md", tmp_path)
    (tmp_path / "watcher" / "schema").mkdir(parents=True)  # the script keeps its description in step too
    shutil.copy2(ROOT / "watcher" / "schema" / "goal.schema.json", tmp_path / "watcher" / "schema")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def build(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "tools" / "build_readme.py"), *args], capture_output=True,
                          text=True, timeout=60, cwd=root)


@pytest.mark.parametrize("args,code,says", [
    (["--help"], 0, "usage: tools/build_readme.py"),
    (["-h"], 0, "usage: tools/build_readme.py"),
    ([], 2, "the following arguments are required: PART"),
    (["--bogus"], 2, "error:"),
    (["hook", "--bogus"], 2, "unrecognized arguments: --bogus"),
    (["hook.md"], 2, "'hook.md' is not a part name"),
    (["../README"], 2, "'../README' is not a part name"),
    (["--", "--help"], 2, "'--help' is not a part name"),
    (["nope", "hok"], 2, "none of these parts is in docs/readme/: nothing to build"),
])
def test_build_readme_help_or_a_bad_argument_writes_nothing(tmp_path, args, code, says):
    root = copy_of_the_docs(tmp_path)
    before = snapshot(root)
    assert len(before["README.md"]) > 10_000 and any(k.startswith("docs/guide/") for k in before)
    r = build(root, *args)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert says in (r.stdout if code == 0 else r.stderr), (r.stdout, r.stderr)
    if code:
        assert r.stderr.startswith("usage: tools/build_readme.py") and "rebuilt" not in r.stdout
    assert snapshot(root) == before  # README.md and every docs/guide page byte for byte


def test_build_readme_from_the_makefile_parts_is_the_committed_readme_and_guide(tmp_path):
    root = copy_of_the_docs(tmp_path)
    before = snapshot(root)
    r = build(root, *makefile_parts())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("README.md rebuilt from docs/readme/: ") and r.stderr == ""
    assert snapshot(root) == before
