"""One steps.json value of an unforeseen shape stopped the runs detector for every run, or the
watcher itself. Found attacking the steps source from the CLI:

- ``"status": {"x": 1}`` (or a list): ``st in STATUSES`` (a frozenset) raised TypeError;
- ``"at"`` a list nested ~975 deep: ``str(at)`` raised RecursionError;

each "detector runs failed on this tick's snapshot; skipped" at every tick: no step.changed and no
rule.violated for any run, however well-formed. And

- a rule-relevant ``data`` value nested ~975 deep went into step.changed and the runs state, whose
  snapshot then could not be encoded: ``run --once`` exited 1 with a RecursionError traceback.

Now such a status is the step's "unknown status", such an ``at`` its "unparseable at", and a data
value nested deeper than 8 (or of more than 256 values) is kept as a marker of its type, which the
rules read as they read the value. Real files, a real ``fleetwatch run --once`` and ``tail``."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.fwonce import once_and_tail

DEEP = 975
GOOD = {"run": "good", "branch": "full", "board": "B1", "steps": {
    "facts": {"status": "done", "at": "2026-12-01T10:00:00Z"},
    "launch_intent": {"status": "begin", "at": "2026-12-01T10:05:00Z", "data": {}}}}


def _deep(n: int = DEEP) -> str:
    return "[" * n + "]" * n


def _watch(tmp_path: Path, bad: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[dict]]:
    root = tmp_path / "runs"
    for rid, text in {"good": json.dumps(GOOD), **bad}.items():
        (root / rid).mkdir(parents=True)
        (root / rid / "steps.json").write_text(text)
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "runs"\nkind = "steps"\n'
                   f'glob = "{root}/*/steps.json"\n')
    return once_and_tail(cfg)


def _watch_good_still_checked(tmp_path: Path, bad: dict[str, str]) -> list[dict]:
    """The watcher's events with ``bad`` next to GOOD, checked: no detector failure, GOOD's rules
    (deploy-gate and launch-request-id for its launch_intent) still reported."""
    r, evs = _watch(tmp_path, bad)
    assert r.returncode == 0, r.stderr
    assert "detector runs failed" not in r.stderr
    assert {e["data"]["rule"] for e in evs if e["type"] == "rule.violated"} >= {"deploy-gate", "launch-request-id"}
    return evs


def _steps(evs: list[dict], run: str) -> dict[str, dict]:
    return {e["data"]["step"]: e["data"] for e in evs if e["type"] == "step.changed" and e["data"]["run"] == run}


def test_a_status_that_is_an_object_or_a_list_does_not_stop_the_runs_detector(tmp_path):
    bad = {"obj": json.dumps({"steps": {"facts": {"status": {"x": 1}, "at": "2026-12-01T10:00:00Z"},
                                        "audit": {"status": ["done"], "at": "2026-12-01T10:01:00Z"}}})}
    evs = _watch_good_still_checked(tmp_path, bad)
    got = _steps(evs, "obj")
    assert got["facts"]["to"] == "{'x': 1}" and "unknown status" in got["facts"]["reason"]
    assert got["audit"]["to"] == "['done']"


def test_an_at_nested_a_thousand_deep_is_that_steps_unparseable_at(tmp_path):
    bad = {"deepat": '{"steps": {"facts": {"status": "done", "at": ' + _deep() + '}}}',
           "deepst": '{"steps": {"facts": {"status": ' + _deep() + ', "at": "2026-12-01T10:00:00Z"}}}',
           "deeplf": '{"failures": 1, "last_failure_at": ' + _deep() + ', "steps": {}}'}
    evs = _watch_good_still_checked(tmp_path, bad)
    assert "unparseable at" in _steps(evs, "deepat")["facts"]["reason"]
    assert "unknown status" in _steps(evs, "deepst")["facts"]["reason"]


def test_a_data_value_nested_a_thousand_deep_does_not_break_the_snapshot(tmp_path):
    bad = {"deepdata": '{"steps": {"audit": {"status": "done", "at": "2026-12-01T10:00:00Z", '
                       '"data": {"verdict": ' + _deep() + ', "tainted": ' + _deep(20) + '}},'
                       '"upload_intent": {"status": "begin", "at": "2026-12-01T10:02:00Z", '
                       '"data": {"candidate": {"a": ' + _deep(50) + '}, "sha256": "' + "a" * 64 + '"}}}}'}
    r, evs = _watch(tmp_path, bad)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    got = _steps(evs, "deepdata")
    assert got["audit"]["data"] == {"verdict": ["…"], "tainted": ["…"]}
    assert got["upload_intent"]["data"]["candidate"] == {"…": "…"}
    rules = {e["data"]["rule"] for e in evs if e["type"] == "rule.violated" and e["data"]["run"] == "deepdata"}
    # a deep container is truthy (tainted) and no candidate, as before: the same rules fire
    assert {"audit-branch", "upload-intent-evidence"} <= rules


def test_an_at_whose_utc_day_is_outside_the_calendar_is_unparseable_not_a_crash(tmp_path):
    """"0001-01-01T00:00:00+14:00" is a day before year 1 in UTC, "9999-12-31T23:59:59-14:00" one
    in year 10000: both parse, and their UTC day (runs_quota.day, for the daily caps and quotas)
    raised ValueError, which stopped the runs detector for every run."""
    bad = {"early": json.dumps({"board": "B", "steps": {"facts": {"status": "begin", "at": "0001-01-01T00:00:00+14:00"}}}),
           "late": json.dumps({"board": "B", "steps": {
               "upload_confirmed": {"status": "done", "at": "9999-12-31T23:59:59-14:00"}}})}
    evs = _watch_good_still_checked(tmp_path, bad)
    assert "unparseable at" in _steps(evs, "early")["facts"]["reason"]
    assert "unparseable at" in _steps(evs, "late")["upload_confirmed"]["reason"]


def test_a_z_time_at_the_end_of_year_9999_is_unparseable_not_a_run_that_cannot_be_evaluated(tmp_path):
    """"9999-12-31T23:59:59.999999Z" parses, and its epoch is past the last UTC day quota.day can
    name: the well-formed steps' path read it without ts's range check, and that run's rules
    raised ValueError ("could not be evaluated")."""
    bad = {"late": json.dumps({"board": "B", "steps": {
        "upload_confirmed": {"status": "done", "at": "9999-12-31T23:59:59.999999Z"}}})}
    evs = _watch_good_still_checked(tmp_path, bad)
    assert "unparseable at" in _steps(evs, "late")["upload_confirmed"]["reason"]
    assert not [e for e in evs if "could not be evaluated" in json.dumps(e)]
