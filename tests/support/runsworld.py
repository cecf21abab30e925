"""Runs on a real log (tests of the runs projection and of the rules over runs): steps.json
documents built by hand or read from tests/fixtures/runs, the snapshot they make, a harness
that detects, appends, reads back and folds (its fixture ``h`` is in tests/conftest.py), and
``violations``: which occurrences of a rule one change of run R1 reports."""
from __future__ import annotations

import json
import pathlib

import msgspec

from events.log import EventLog, iso, parse_iso
from projections.runs import fold as runs
from projections.base import encode_state
from projections.observations import RunObs, Snapshot

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "runs"
T0 = parse_iso("2026-11-29T10:00:00Z")
MIN = 60.0


def at(minutes: float) -> str:
    return iso(T0 + minutes * MIN)


def S(status: str, minute: float | None = 0, **data) -> dict:
    """One steps.json entry: status at T0+minute (None: no `at`)."""
    e: dict = {"status": status}
    if minute is not None:
        e["at"] = at(minute)
    if data:
        e["data"] = data
    return e


def doc(run: str = "R1", steps: dict | None = None, **kw) -> dict:
    d = {"event_id": f"run_finished:{run}", "kind": "run_finished", "run": run, "branch": "full",
         "steps": steps or {}, "failures": 0, "work_complete": False}
    d.update(kw)
    return d


def snap(*docs: dict, failed: dict | None = None, errors: dict | None = None, source: str = "steps") -> Snapshot:
    r = {d["run"]: RunObs(run=d["run"], source=source, path=f"/x/{d['run']}/steps.json", doc=d) for d in docs}
    for rid, err in (errors or {}).items():
        r[rid] = RunObs(run=rid, source=source, path=f"/x/{rid}/steps.json", doc=None, error=err)
    return Snapshot(runs=r, failed=failed or {})


class Harness:
    """A real log plus the folded runs state; ``tick`` = detect, append, read back, fold."""

    def __init__(self, path: pathlib.Path):
        self.log = EventLog(str(path / "events.db"))
        self.state = runs.initial()
        self.seq = 0

    def tick(self, sn: Snapshot, now: float, **policy) -> list:
        evs = runs.detect(self.state, sn, now, **policy)
        if evs:
            self.log.append(evs, now)
        for rec in self.log.read(self.seq):
            self.state = runs.fold(self.state, rec)
            self.seq = rec.seq
        enc = encode_state(self.state)  # JSON round trip is exact
        assert encode_state(msgspec.json.decode(enc)) == enc
        return evs

    def close(self):
        self.log.close()


HEX = "ab" * 32                                 # a well-formed sha256
EVID = dict(sha256=HEX, candidate="c-1")        # the evidence an upload intent carries


def violations(h: Harness, before: dict | None, after: dict, rule: str, others=(), **kw) -> list:
    """Rule violations of R1 reported when ``before`` -> ``after`` (kw: run-level fields); a
    violation that persists on the next tick is not reported again."""
    if before is not None:
        h.tick(snap(doc("R1", before, **kw), *others), T0 + 100 * MIN)
    evs = h.tick(snap(doc("R1", after, **kw), *others), T0 + 101 * MIN)
    got = [e for e in evs if type(e).__name__ == "RuleViolated" and e.rule == rule and e.run == "R1"]
    again = h.tick(snap(doc("R1", after, **kw), *others), T0 + 102 * MIN)
    assert [e for e in again if type(e).__name__ == "RuleViolated"] == []
    return got


def types(evs) -> list[str]:
    return [type(e).__struct_config__.tag for e in evs]


def rules(evs) -> list[str]:
    return sorted(e.rule for e in evs if type(e).__name__ == "RuleViolated")


def fixture_docs() -> list[dict]:
    return [json.loads((FIXTURES / n / "steps.json").read_text()) for n in ("T1-val-0042", "T2-heart-0007")]
