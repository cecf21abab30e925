"""Every start of the watcher said each unreadable run was gone, and then back. Found attacking
the steps source from the CLI (``run --once`` three times over a steps.json that is not JSON): at
a start a file whose first read fails is held back for its second read (the two-read rule: a
half-written file is not an error), so the run was missing from the first tick and
``projections.runs.fold`` wrote ``run.changed gone: true``, then ``gone: false`` a tick later: two false
events per unreadable run per restart. A steps source now says how many files it holds back
(``SourceResult.held``) and its runs are not gone meanwhile; a deleted file is still gone at once.
Real files, real ``fleetwatch run --once`` processes and ``tail --json``."""
from __future__ import annotations

import json

from tests.support.fwonce import once_and_tail


def _gone(evs: list[dict]) -> list[tuple[str, bool, str]]:
    return [(e["data"]["run"], e["data"]["gone"], e["data"]["error"]) for e in evs if e["type"] == "run.changed"]


def test_a_restart_does_not_say_an_unreadable_run_is_gone(tmp_path):
    root = tmp_path / "runs"
    for rid, text in {"bad": "{not json", "good": json.dumps({"steps": {}})}.items():
        (root / rid).mkdir(parents=True)
        (root / rid / "steps.json").write_text(text)
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{root}/*/steps.json"\n')
    for _ in range(3):
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    assert sorted(_gone(evs)) == [("bad", False, "not JSON"), ("good", False, "")]
    (root / "good" / "steps.json").unlink()
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert sorted(_gone(evs)) == [("bad", False, "not JSON"), ("good", False, ""), ("good", True, "")]
