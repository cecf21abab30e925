"""A NaN or an Infinity anywhere in a steps.json made the whole run "not JSON": its steps unseen,
every rule of it unchecked. Python's ``json.dump`` writes ``NaN`` for a float metric the outer
loop keeps in a step's data (a loss, a score), a key fleetwatch never reads. Found attacking the
steps source from the CLI. Such numbers are now read; in a field fleetwatch reads each is judged
as a value of the wrong type ("bad field failures", "unparseable at"), and in a step's data the
log keeps it as ``["NaN"]`` (a float the log would write as null, and the next tick would see as a
change): no id, truthy. Real files, a real ``fleetwatch run --once`` (twice) and ``tail --json``."""
from __future__ import annotations

from pathlib import Path

from tests.support.fwonce import once_and_tail

SHA = "a" * 64
RUNS = {
    # a metric in a key never read: the run is read as if it were not there
    "metric": '{"branch": "full", "steps": {"facts": {"status": "done", "at": "2026-12-01T10:00:00Z", '
              '"data": {"loss": NaN, "curve": [1.5, Infinity, -Infinity], "big": 1e400}}, '
              '"launch_intent": {"status": "begin", "at": "2026-12-01T10:05:00Z", "data": {}}}}',
    # in the keys read: each is that field's wrong value
    "read": '{"failures": NaN, "last_failure_at": Infinity, "work_complete": NaN, "steps": {'
            '"facts": {"status": "done", "at": NaN}, '
            '"audit": {"status": "done", "at": "2026-12-01T10:01:00Z", "data": {"verdict": "pass", "tainted": NaN}}, '
            '"apply": {"status": "begin", "at": "2026-12-01T10:02:00Z"}, '
            '"launch_intent": {"status": "begin", "at": "2026-12-01T10:03:00Z", '
            '"data": {"request_id": NaN, "continue_from": [NaN, 1e999]}}}}',
    # not JSON for another reason too: still not JSON
    "surrogate": '{"steps": {"facts": {"status": "done", "at": "\\ud800", "data": {"x": NaN}}}}',
}


def _setup(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for rid, text in RUNS.items():
        (root / rid).mkdir(parents=True)
        (root / rid / "steps.json").write_text(text)
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{root}/*/steps.json"\n')
    return cfg


def test_a_nan_in_a_steps_json_does_not_make_the_run_unreadable(tmp_path):
    r, evs = once_and_tail(_setup(tmp_path))
    assert r.returncode == 0, r.stderr
    changed = {e["data"]["run"]: e["data"] for e in evs if e["type"] == "run.changed"}
    assert changed["metric"]["error"] == ""
    assert changed["read"]["error"] == "bad field failures; bad field last_failure_at; bad field work_complete"
    assert changed["surrogate"]["error"] == "not JSON"
    steps = {(e["data"]["run"], e["data"]["step"]): e["data"] for e in evs if e["type"] == "step.changed"}
    assert steps[("metric", "facts")]["data"] == {}          # never read, never logged
    assert "unparseable at" in steps[("read", "facts")]["reason"]
    assert steps[("read", "audit")]["data"] == {"verdict": "pass", "tainted": ["NaN"]}
    assert steps[("read", "launch_intent")]["data"] == {"request_id": ["NaN"],
                                                        "continue_from": [["NaN"], ["Infinity"]]}
    rules = {(e["data"]["run"], e["data"]["rule"]) for e in evs if e["type"] == "rule.violated"}
    assert ("metric", "launch-request-id") in rules and ("metric", "deploy-gate") in rules
    assert ("read", "launch-request-id") in rules      # a NaN is no request id
    assert ("read", "audit-branch") in rules            # and a NaN taint is truthy, as the float is


def test_a_nan_in_a_steps_json_is_not_a_change_at_every_tick(tmp_path):
    cfg = _setup(tmp_path)
    _, first = once_and_tail(cfg)
    r, again = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert [e["type"] for e in again[len(first):]] == ["watcher.started", "watcher.stopped"]
