"""One steps.json could flood the log: every unknown step name was a step (a step.changed, and a
step.overdue while in begin). Found attacking the steps source from the CLI: a 1 MB steps.json
of 16,000 unknown names in begin was 32,000 events and 12.8 MB of log in one tick, again at each
change of the file; a 500 KB name was a 500 KB event field. The first 32 unknown names
(alphabetically, of at most 200 characters) are read, the known twelve always; the rest are not,
and the run says how many ("N unknown step name(s) not read"). Real files, a real ``fleetwatch
run --once`` (twice) and ``tail --json``."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.fwonce import once_and_tail

AT = "2026-12-01T10:00:00Z"


def test_a_steps_json_of_thousands_of_unknown_names_does_not_flood_the_log(tmp_path):
    steps = {f"s{i:04d}": {"status": "begin", "at": AT} for i in range(2000)}
    steps["x" * 300] = {"status": "done", "at": AT}
    steps["facts"] = {"status": "done", "at": AT}
    steps["zz-last"] = {"status": "done", "at": AT}
    (tmp_path / "runs" / "big").mkdir(parents=True)
    (tmp_path / "runs" / "big" / "steps.json").write_text(json.dumps({"steps": steps}))
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{tmp_path}/runs/*/steps.json"\n')
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    read = [e["data"]["step"] for e in evs if e["type"] == "step.changed"]
    assert read == ["facts"] + [f"s{i:04d}" for i in range(32)]
    assert [e["data"]["error"] for e in evs if e["type"] == "run.changed"] == [
        "1970 unknown step name(s) not read (at most 32 are, of at most 200 characters)"]
    assert len(evs) < 100
    _, again = once_and_tail(Path(cfg))
    assert [e["type"] for e in again[len(evs):]] == ["watcher.started", "watcher.stopped"]
