"""A long text in a steps.json went whole into the log. Found attacking the steps source from the
CLI: an upload_intent whose data.candidate held 600 KB and a step whose ``at`` held 100 KB put
both, whole, into step.changed and the runs state (the log growing by the file at each change of
those steps). As for a sqlite source (sqlite.MAX_TEXT), a data text over 1,024 characters and an
``at`` over 96 are now kept as their beginning, their length and a digest of the whole, so a change
anywhere in them is still a change. Real files, real ``fleetwatch run --once`` processes and
``tail --json``."""
from __future__ import annotations

import json
import os

from tests.support.fwonce import once_and_tail

AT = "2026-12-01T10:00:00Z"


def _write(path, candidate: str) -> None:
    path.write_text(json.dumps({"steps": {
        "facts": {"status": "begin", "at": "x" * 100_000},
        "upload_intent": {"status": "begin", "at": AT, "data": {"candidate": candidate, "sha256": "a" * 64}}}}))


def test_a_long_text_in_a_steps_json_does_not_go_whole_into_the_log(tmp_path):
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    steps = tmp_path / "runs" / "r1" / "steps.json"
    _write(steps, "c" * 600_000 + "1")
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{tmp_path}/runs/*/steps.json"\n')
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    got = {e["data"]["step"]: e["data"] for e in evs if e["type"] == "step.changed"}
    assert len(got["facts"]["at"]) <= 96 and "[100000 chars " in got["facts"]["at"]
    assert "unparseable at" in got["facts"]["reason"]
    cand = got["upload_intent"]["data"]["candidate"]
    assert len(cand) <= 1024 and "[600001 chars " in cand
    assert os.path.getsize(tmp_path / "e.db") < 300_000       # not the 700 KB of text (and its snapshot)
    _write(steps, "c" * 600_000 + "2")                        # a change at the very end is a change
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    again = [e["data"] for e in evs if e["type"] == "step.changed"][2:]
    assert [(d["step"], d["reason"].split(";")[0]) for d in again] == [("upload_intent", "data changed")]


def test_a_long_run_level_field_does_not_go_whole_into_each_run_changed(tmp_path):
    """A 500 KB ``board`` (or branch, kind, continue_from) went whole into every run.changed (each
    change of failures, work_complete ... logged it again) and the runs state."""
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    steps = tmp_path / "runs" / "r1" / "steps.json"
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{tmp_path}/runs/*/steps.json"\n')
    for failures in (0, 1):
        steps.write_text(json.dumps({"board": "B" * 500_000, "kind": "k" * 5000, "failures": failures, "steps": {}}))
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    changed = [e["data"] for e in evs if e["type"] == "run.changed"]
    assert [c["failures"] for c in changed] == [0, 1]
    assert all(len(c["board"]) <= 1024 and "[500000 chars " in c["board"] and len(c["kind"]) <= 1024 for c in changed)
    assert changed[0]["board"] == changed[1]["board"]
