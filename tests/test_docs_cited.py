"""Every document the package cites by path is in the repository (docs/contract.md holds the
external contract the code cites; a citation of a file that is not here cannot be checked)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
