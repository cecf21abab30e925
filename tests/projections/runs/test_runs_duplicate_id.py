"""Two steps.json naming one run: the first listed masked the other. Found attacking the steps
source from the CLI: ``runs/a/steps.json`` and ``runs/b/steps.json`` both saying ``"run": "R1"``
gave one run R1 with b's steps (the folder listing's order decided) and nothing about a: a real
run's file was invisible, and its steps and rules unchecked, without a word. As for a goal.json
(the duplicate rule of watcher/sources/__init__.py), the run is now unreadable with the reason
"duplicate id 'R1' in A and B"; one file reached twice (a symlinked folder) is one file. Real
files, a real ``fleetwatch run --once`` and ``tail --json``."""
from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.fwonce import once_and_tail


def _runs(root: Path, docs: dict[str, dict]) -> Path:
    for folder, doc in docs.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "steps.json").write_text(json.dumps(doc))
    cfg = root.parent / "fw.toml"
    cfg.write_text(f'[store]\npath = "{root.parent}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{root}/*/steps.json"\n')
    return cfg


def test_two_steps_files_naming_one_run_are_a_duplicate_not_one_masking_the_other(tmp_path):
    root = tmp_path / "runs"
    cfg = _runs(root, {"a": {"run": "R1", "steps": {"facts": {"status": "done", "at": "2026-12-01T10:00:00Z"}}},
                       "b": {"run": "R1", "steps": {"facts": {"status": "begin", "at": "2026-12-01T11:00:00Z"}}},
                       "c": {"run": "R2", "steps": {}}})
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    changed = {e["data"]["run"]: e["data"]["error"] for e in evs if e["type"] == "run.changed"}
    assert changed == {"R1": f"duplicate id 'R1' in {root}/a/steps.json and {root}/b/steps.json", "R2": ""}
    assert [e for e in evs if e["type"] == "step.changed"] == []


def test_one_steps_file_reached_twice_is_one_run(tmp_path):
    root = tmp_path / "runs"
    cfg = _runs(root, {"a": {"run": "R1", "steps": {"facts": {"status": "done", "at": "2026-12-01T10:00:00Z"}}}})
    os.symlink(root / "a", root / "link")
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert [(e["data"]["run"], e["data"]["error"]) for e in evs if e["type"] == "run.changed"] == [("R1", "")]
    assert [e["data"]["step"] for e in evs if e["type"] == "step.changed"] == ["facts"]
