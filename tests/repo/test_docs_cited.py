"""Every document the package cites by path is in the repository (docs/contract.md holds the
external contract the code cites; a citation of a file that is not here cannot be checked)."""
from __future__ import annotations

import re
from tests.support.exe import ROOT



def test_every_cited_doc_is_in_the_repository():
    cited: dict[str, str] = {}
    for pkg in ("events", "projections", "watcher"):
        for path in sorted((ROOT / pkg).rglob("*")):
            if path.suffix in (".py", ".json") and path.is_file():
                for m in re.finditer(r"\bdocs/[\w./-]+\.md\b", path.read_text(encoding="utf-8")):
                    cited.setdefault(m.group(0), str(path.relative_to(ROOT)))
    assert "docs/contract.md" in cited
    missing = {doc: where for doc, where in cited.items() if not (ROOT / doc).is_file()}
    assert not missing, missing
    assert not [p for p in ("events", "projections", "watcher") for f in (ROOT / p).rglob("*.py")
                if "CONTRACT.md" in f.read_text(encoding="utf-8")]


# files the worked examples of docs/ARCHITECTURE.md create (in a throwaway worktree, not here)
EXAMPLE_FILES = {"watcher/sources/http.py", "tests/watcher/sources/test_source_http.py"}
PATH = re.compile(r"(?<![\w./<-])((?:events|projections|watcher|tests|tools|docs)/[\w./*-]*[\w*/])")


def test_every_path_the_architecture_names_exists():
    """docs/ARCHITECTURE.md names modules by path (``projections/notify/plan.py``, globs like
    ``tests/test_readme*.py``) and by file name in its room (``plan.py``): each is in the tree."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    cited = set(PATH.findall(text)) - EXAMPLE_FILES
    assert len(cited) > 50
    assert not sorted(p for p in cited if not list(ROOT.glob(p.rstrip("/")))), "paths not in the tree"
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    named = {m for t in re.findall(r"`([^`]+)`", prose) for m in re.findall(r"^(\w+\.py)\b", t)}
    files = {p.name for pkg in ("events", "projections", "watcher", "tests", "tools") for p in (ROOT / pkg).rglob("*.py")}
    assert named and not sorted(named - files), "module files not in the tree"
