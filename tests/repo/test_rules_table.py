"""Every observable rule of the outer loop, the bounded orchestrator and swarms, one row each.

A row is a scenario: a list of ticks (each a world: steps.json docs, work-package and circuit rows,
swarm children, agents) run through a real EventLog and every projection's detect and fold, as
the loop does (virtual clock). For each rule there is the breach (fires exactly once), the legal
neighbour (never fires) and the repeat: the last world again, twice, fires nothing more.
The end-to-end run through a real ``fleetwatch run`` with a real HTTP receiver is in
``tests/watcher/runtime/test_rules_e2e.py``.
"""
from __future__ import annotations

import pytest

from events.log import EventLog, iso, parse_iso
from events.types import AgentClassified, DodVerdict
from projections.identity import identity, same_identity
from projections.observations import AgentObs, RowObs, RunObs, Snapshot, SourceResult
from watcher.runtime.state import Projections
from tests.support.fleetstep import step

T0 = parse_iso("2026-11-29T10:00:00Z")
MIN = 60.0
HEX, HEX2 = "ab" * 32, "cd" * 32
POLICY = {"runs": {"board_daily_quota": 3, "sessions_per_day": 12, "inactive_boards": ("T9:off",)},
          "missions": {"max_children_active": 3},
          "swarms": {"max_concurrent": 8, "max_children": 50, "max_total": 200},
          "fanout": {"fanout_max": 8, "fanout_window": 60.0}}


def at(minutes: float) -> str:
    return iso(T0 + minutes * MIN)


def S(status: str, minute: float, **data) -> dict:
    e: dict = {"status": status, "at": at(minute)}
    if data:
        e["data"] = data
    return e


AUDITED = {"facts": S("done", 1), "audit": S("done", 2, verdict="pass", tainted=False)}
TO_DEPLOY = {**AUDITED, "analyze": S("done", 3), "apply": S("done", 4), "validate": S("done", 5),
             "deploy": S("done", 6)}
EVID = {"sha256": HEX, "candidate": "c-1"}


def run(rid: str, steps: dict, board: str | None = "T1:val", **kw) -> dict:
    d = {"event_id": f"run_finished:{rid}", "kind": "run_finished", "run": rid, "branch": "full",
         "steps": steps, "failures": 0, "work_complete": False}
    if board is not None:
        d["board"] = board
    d.update(kw)
    return d


def done_run(rid: str, minute: float, board: str = "T1:val", sha: str = HEX) -> dict:
    """A finished run that uploaded ``sha`` to ``board`` (confirmed at ``minute``)."""
    return run(rid, {**TO_DEPLOY, "upload_intent": S("done", minute - 1, sha256=sha, candidate="c"),
                     "upload_confirmed": S("done", minute)}, board=board, work_complete=True)


def wp(m: str, w: str, state: str, deps=(), attempts=0, sig=None, same=0, risk="LOW") -> dict:
    import json

    return {"mission": m, "wp": w, "state": state, "deps": json.dumps(list(deps)), "attempts": attempts,
            "last_error_sig": sig, "same_sig_count": same, "risk": risk}


class World:
    """A real log plus every projection; ``tick`` = detect (all detectors) → append → fold."""

    def __init__(self, path):
        self.log = EventLog(str(path / "events.db"), durability="normal")
        self.proj = Projections()
        self.memo = None

    def snapshot(self, w: dict) -> Snapshot:
        results = [SourceResult(name=n, kind=k) for n, k in (("runs", "steps"), ("missions", "sqlite"),
                                                             ("swarm", "command"), ("fleet", "goals"))]
        rows: dict[str, list] = {}
        for r in w.get("wps", []):
            rows.setdefault("wp", []).append(RowObs(entity="wp", source="missions", key=(r["mission"], r["wp"]), row=r))
        for scope, st in w.get("circuits", {}).items():
            rows.setdefault("circuit", []).append(RowObs(entity="circuit", source="missions", key=(scope,),
                                                         row={"scope": scope, "state": st}))
        for g, c, st in w.get("swarm", []):
            rows.setdefault("swarm", []).append(RowObs(entity="swarm", source="swarm", key=(g, c),
                                                       row={"group": g, "child": c, "status": st}))
        runs = {d["run"]: RunObs(run=d["run"], source="runs", path=f"/r/{d['run']}/steps.json", doc=d)
                for d in w.get("runs", [])}
        agents = {a: AgentObs(agent=a, source="fleet", state="busy", contract_sha256="c" * 64, contract_len=3)
                  for a in w.get("agents", [])}
        return Snapshot(results=results, runs=runs, rows=rows, agents=agents)

    def tick(self, w: dict, now: float) -> list:
        snap = self.snapshot(w)
        evs, self.memo = step(self.proj["fleet"], snap, now, stall_after=900.0, memo=self.memo)
        for name in ("runs", "missions", "swarms", "fanout"):
            evs += self.proj.mods[name].detect(self.proj[name], snap, now, **POLICY[name])
        if evs:
            self.log.append(evs, now)
        self.proj.catch_up(self.log)
        return evs

    def close(self) -> None:
        self.log.close()


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    yield w
    w.close()


def fired(evs: list, rule: str) -> list:
    out = []
    for e in evs:
        t = type(e).__name__
        if (t in ("RuleViolated", "WpViolated") and e.rule == rule) or (t == "SwarmCapped" and e.cap == rule) \
                or (t == "FleetFanout" and rule == "fleet.fanout") \
                or (t == "WpFlagged" and e.flag == rule):
            out.append(e)
    return out


def play(world: World, ticks: list[dict], rule: str) -> list:
    """Run the ticks (a minute apart); then the last world twice more: the repeat never fires."""
    got = []
    now = T0 + 200 * MIN
    for w in ticks:
        got += fired(world.tick(w, now), rule)
        now += MIN
    for _ in range(2):
        assert fired(world.tick(ticks[-1], now), rule) == [], f"{rule} fired again on a persisting level"
        now += MIN
    return got


def R(*docs) -> dict:
    return {"runs": list(docs)}


# ---- the table: (rule, case, ticks, times it fires) -------------------------------------------------
UP = {**TO_DEPLOY, "upload_intent": S("begin", 10, **EVID)}
TABLE = [
    # -- the outer loop (steps.json), per run
    ("reconciled-no-reupload", "breach: begins again after reconciled yes",
     [R(run("R1", {**AUDITED, "upload_intent": S("fail", 10, **EVID, reconciled="yes")})),
      R(run("R1", {**AUDITED, "upload_intent": S("begin", 30, **EVID)}))], 1),
    ("reconciled-no-reupload", "neighbour: reconciled no, retried",
     [R(run("R1", {**AUDITED, "upload_intent": S("fail", 10, **EVID, reconciled="no")})),
      R(run("R1", {**AUDITED, "upload_intent": S("begin", 30, **EVID)}))], 0),
    ("single-open-intent", "breach: a truthy non-value is no reconciliation",
     [R(run("R1", {**AUDITED, "upload_intent": S("fail", 10, **EVID, reconciled="maybe")})),
      R(run("R1", {**AUDITED, "upload_intent": S("begin", 30, **EVID)}))], 1),
    ("single-open-intent", "neighbour: reconciled no",
     [R(run("R1", {**AUDITED, "upload_intent": S("fail", 10, **EVID, reconciled="no")})),
      R(run("R1", {**AUDITED, "upload_intent": S("begin", 30, **EVID)}))], 0),
    ("launch-request-stable", "breach: req-J-1 -> req-J-2",
     [R(run("R1", {**TO_DEPLOY, "launch_intent": S("fail", 10, request_id="req-J-1")})),
      R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 30, request_id="req-J-2")}))], 1),
    ("launch-request-stable", "breach: the id changes across an attempt without one",
     [R(run("R1", {**TO_DEPLOY, "launch_intent": S("fail", 10, request_id="req-J-1")})),
      R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 30)})),
      R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 30, request_id="req-J-2")}))], 1),
    ("launch-request-stable", "neighbour: the retry keeps req-J-1",
     [R(run("R1", {**TO_DEPLOY, "launch_intent": S("fail", 10, request_id="req-J-1")})),
      R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 30, request_id="req-J-1")}))], 0),
    ("upload-needs-audit", "breach: no audit",
     [R(run("R1", {"facts": S("done", 1), "upload_intent": S("begin", 10, **EVID)}))], 1),
    ("upload-needs-audit", "breach: audit still in begin",
     [R(run("R1", {"facts": S("done", 1), "audit": S("begin", 2), "upload_intent": S("begin", 10, **EVID)}))], 1),
    ("upload-needs-audit", "breach: audit done without a verdict",
     [R(run("R1", {"facts": S("done", 1), "audit": S("done", 2), "upload_intent": S("begin", 10, **EVID)}))], 1),
    ("upload-needs-audit", "neighbour: audit done, pass", [R(run("R1", UP))], 0),
    ("audit-branch", "breach: launch_intent continues from a tainted run",
     [R(run("R0", {"facts": S("done", 1), "audit": S("done", 2, verdict="fail")}, work_complete=True),
        run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 10, request_id="q", continue_from="R0")}))], 1),
    ("audit-branch", "neighbour: launch_intent continues from a clean run",
     [R(run("R0", AUDITED, work_complete=True),
        run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 10, request_id="q", continue_from="R0")}))], 0),
    # -- the outer loop, across runs
    ("board-daily-quota", "breach: a 4th confirmed upload on one board in one UTC day",
     [R(done_run("R0a", 20, sha="01" * 32), done_run("R0b", 30, sha="02" * 32), done_run("R0c", 40, sha="03" * 32),
        run("R1", UP)),
      R(done_run("R0a", 20, sha="01" * 32), done_run("R0b", 30, sha="02" * 32), done_run("R0c", 40, sha="03" * 32),
        run("R1", {**UP, "upload_intent": S("done", 10, **EVID), "upload_confirmed": S("done", 50)}))], 1),
    ("board-daily-quota", "neighbour: the 4th is on the next UTC day",
     [R(done_run("R0a", 20, sha="01" * 32), done_run("R0b", 30, sha="02" * 32), done_run("R0c", 40, sha="03" * 32),
        run("R1", {**UP, "upload_intent": S("done", 10, **EVID), "upload_confirmed": S("done", 24 * 60)}))], 0),
    ("board-daily-quota", "neighbour: the 4th is on another board",
     [R(done_run("R0a", 20, sha="01" * 32), done_run("R0b", 30, sha="02" * 32), done_run("R0c", 40, sha="03" * 32),
        run("R1", {**UP, "upload_intent": S("done", 10, **EVID), "upload_confirmed": S("done", 50)}, board="T2"))], 0),
    ("duplicate-upload", "breach: the same (board, sha256) uploaded again",
     [R(done_run("R0", 5), run("R1", UP))], 1),
    ("duplicate-upload", "neighbour: another sha256", [R(done_run("R0", 5, sha=HEX2), run("R1", UP))], 0),
    ("duplicate-upload", "neighbour: the same sha256 on another board",
     [R(done_run("R0", 5, board="T2"), run("R1", UP))], 0),
    ("session-concurrency", "breach: a second outer-loop event in flight",
     [R(run("R0", {"facts": S("begin", 1)}), run("R1", {"facts": S("begin", 5)}))], 1),
    ("session-concurrency", "breach: three at once fire for the 2nd and the 3rd",
     [R(run("R0", {"facts": S("begin", 1)}), run("R1", {"facts": S("begin", 5)}), run("R2", {"facts": S("begin", 6)}))],
     2),
    ("session-concurrency", "neighbour: the first one finished",
     [R(run("R0", {"facts": S("begin", 1)})),
      R(run("R0", {"facts": S("done", 2)}, work_complete=True), run("R1", {"facts": S("begin", 5)}))], 0),
    ("session-daily-cap", "breach: a 13th outer-loop event in one UTC day",
     [R(*[run(f"R{i:02d}", {"facts": S("done", i)}, work_complete=True) for i in range(13)])], 1),
    ("session-daily-cap", "neighbour: 12 in a day",
     [R(*[run(f"R{i:02d}", {"facts": S("done", i)}, work_complete=True) for i in range(12)])], 0),
    ("inactive-board", "breach: a launch on a board marked inactive",
     [R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 10, request_id="q")}, board="T9:off"))], 1),
    ("inactive-board", "neighbour: an active board",
     [R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 10, request_id="q")}))], 0),
    # -- the contract's seven, one row each (their full tables: tests/projections/runs/test_runs_rules.py)
    ("upload-intent-evidence", "breach", [R(run("R1", {**TO_DEPLOY, "upload_intent": S("begin", 10, candidate="c")}))], 1),
    ("deploy-gate", "breach", [R(run("R1", {**AUDITED, "launch_intent": S("begin", 10, request_id="q")}))], 1),
    ("launch-request-id", "breach", [R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 10)}))], 1),
    ("no-redo", "breach", [R(run("R1", {**AUDITED, "analyze": S("done", 3)})),
                           R(run("R1", {**AUDITED, "analyze": S("begin", 9)}))], 1),
    # -- the bounded orchestrator (missions db)
    ("circuit-open-mutation", "breach: READY -> RUNNING while the circuit is OPEN",
     [{"wps": [wp("m1", "w1", "READY")], "circuits": {"m1": "OPEN"}},
      {"wps": [wp("m1", "w1", "RUNNING")], "circuits": {"m1": "OPEN"}}], 1),
    ("circuit-open-mutation", "neighbour: circuit CLOSED",
     [{"wps": [wp("m1", "w1", "READY")], "circuits": {"m1": "CLOSED"}},
      {"wps": [wp("m1", "w1", "RUNNING")], "circuits": {"m1": "CLOSED"}}], 0),
    ("done-redone", "breach: DONE -> RUNNING",
     [{"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "READY")]},
      {"wps": [wp("m1", "w1", "RUNNING"), wp("m1", "w2", "READY")]}], 1),
    ("done-redone", "neighbour: DONE stays DONE (attempts recorded)",
     [{"wps": [wp("m1", "w1", "DONE", attempts=1)]}, {"wps": [wp("m1", "w1", "DONE", attempts=2)]}], 0),
    ("deps-not-done", "breach: RUNNING while a dep is READY",
     [{"wps": [wp("m1", "w1", "READY"), wp("m1", "w2", "READY", deps=["w1"])]},
      {"wps": [wp("m1", "w1", "READY"), wp("m1", "w2", "RUNNING", deps=["w1"])]}], 1),
    ("deps-not-done", "neighbour: the dep is DONE",
     [{"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "READY", deps=["w1"])]},
      {"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "RUNNING", deps=["w1"])]}], 0),
    ("critical-needs-approval", "breach: CRITICAL READY -> RUNNING",
     [{"wps": [wp("m2", "w1", "READY", risk="CRITICAL")]}, {"wps": [wp("m2", "w1", "RUNNING", risk="CRITICAL")]}], 1),
    ("critical-needs-approval", "neighbour: through APPROVAL_REQUIRED",
     [{"wps": [wp("m2", "w1", "APPROVAL_REQUIRED", risk="CRITICAL")]},
      {"wps": [wp("m2", "w1", "READY", risk="CRITICAL")]}, {"wps": [wp("m2", "w1", "RUNNING", risk="CRITICAL")]}], 0),
    ("attempts-decreased", "breach: 4 -> 2",
     [{"wps": [wp("m1", "w1", "FAILED", attempts=4)]}, {"wps": [wp("m1", "w1", "READY", attempts=2)]}], 1),
    ("attempts-decreased", "neighbour: 2 -> 3",
     [{"wps": [wp("m1", "w1", "FAILED", attempts=2)]}, {"wps": [wp("m1", "w1", "READY", attempts=3)]}], 0),
    ("children-active-cap", "breach: 5 active (cap 3), once per episode",
     [{"wps": [wp("m1", f"w{i}", "READY") for i in range(5)]},
      {"wps": [wp("m1", f"w{i}", "RUNNING") for i in range(5)]},
      {"wps": [wp("m1", f"w{i}", "RUNNING" if i < 4 else "DONE") for i in range(5)]}], 1),
    ("children-active-cap", "breach: a new episode after it went back under the cap",
     [{"wps": [wp("m1", f"w{i}", "RUNNING") for i in range(4)]},
      {"wps": [wp("m1", f"w{i}", "RUNNING" if i < 2 else "DONE") for i in range(4)]},
      {"wps": [wp("m1", f"w{i}", "RUNNING") for i in range(4)]}], 2),
    ("children-active-cap", "neighbour: 3 active",
     [{"wps": [wp("m1", f"w{i}", "RUNNING" if i < 3 else "READY") for i in range(5)]}], 0),
    ("completed-reopened", "breach: a WP of a COMPLETED mission runs again",
     [{"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "DONE")]},
      {"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "RUNNING")]}], 1),
    ("completed-reopened", "neighbour: a mission not completed yet",
     [{"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "READY")]},
      {"wps": [wp("m1", "w1", "DONE"), wp("m1", "w2", "RUNNING")]}], 0),
    ("retries", "flag: attempts over 3, once per crossing",
     [{"wps": [wp("m1", "w1", "FAILED", attempts=3)]}, {"wps": [wp("m1", "w1", "FAILED", attempts=4)]},
      {"wps": [wp("m1", "w1", "FAILED", attempts=5)]}], 1),
    ("same-error", "flag: the same signature over 2",
     [{"wps": [wp("m1", "w1", "FAILED", attempts=2, sig="E:x", same=2)]},
      {"wps": [wp("m1", "w1", "FAILED", attempts=3, sig="E:x", same=3)]}], 1),
    # -- swarms
    ("max-concurrent", "breach: 9 running > 8",
     [{"swarm": [("g", f"c{i}", "running") for i in range(9)]}], 1),
    ("max-concurrent", "neighbour: 8 running", [{"swarm": [("g", f"c{i}", "running") for i in range(8)]}], 0),
    ("max-children", "breach: 51 active children",
     [{"swarm": [("g", f"c{i}", "queued") for i in range(51)]}], 1),
    ("max-children", "neighbour: a settled group of 60 done children",
     [{"swarm": [("g", f"c{i:02d}", "done") for i in range(60)]}], 0),
    ("max-total", "breach: 201 children ever (settled ones count)",
     [{"swarm": [("g", f"c{i:03d}", "done") for i in range(150)]},
      {"swarm": [("g", f"c{i:03d}", "done") for i in range(201)]}], 1),
    ("max-total", "neighbour: 200 ever", [{"swarm": [("g", f"c{i:03d}", "done") for i in range(200)]}], 0),
    # -- the fleet
    ("fleet.fanout", "breach: 12 new agents in one tick (cap 8)", [{"agents": [f"a{i:02d}" for i in range(12)]}], 1),
    ("fleet.fanout", "neighbour: 8 new agents", [{"agents": [f"a{i:02d}" for i in range(8)]}], 0),
]


@pytest.mark.parametrize("rule,case,ticks,n", TABLE, ids=[f"{r}: {c}" for r, c, _, _ in TABLE])
def test_rule(world, rule, case, ticks, n):
    got = play(world, ticks, rule)
    assert len(got) == n, [getattr(e, "detail", e) for e in got]


def test_every_contract_rule_has_a_breach_and_a_neighbour():
    from projections.missions.rules import WpRule
    from projections.runs.rules import Rule

    rows: dict[str, set[int]] = {}
    for r, _, _, n in TABLE:
        rows.setdefault(r, set()).add(min(n, 1))
    new_step = {"reconciled-no-reupload", "launch-request-stable", "upload-needs-audit", "board-daily-quota",
                "duplicate-upload", "session-concurrency", "session-daily-cap", "inactive-board"}
    assert new_step <= {r.value for r in Rule}
    for rule in new_step | {r.value for r in WpRule} | {"max-concurrent", "max-children", "max-total", "fleet.fanout"}:
        assert rows.get(rule) == {0, 1}, rule


def test_fanout_window_counts_only_recent_first_sights(world):
    now = T0
    for i in range(6):  # 6 now, 6 more two minutes later: never more than 8 within a minute
        world.tick({"agents": [f"a{j:02d}" for j in range(i + 1)]}, now)
    now += 120
    evs = []
    for i in range(6, 12):
        evs += world.tick({"agents": [f"a{j:02d}" for j in range(i + 1)]}, now)
    assert fired(evs, "fleet.fanout") == []


def test_fanout_event_names_count_and_window(world):
    e = fired(world.tick({"agents": [f"a{i:02d}" for i in range(12)]}, T0), "fleet.fanout")
    assert len(e) == 1 and (e[0].count, e[0].window) == (12, 60.0)
    # the same 12 again, and 5 more within the window: all 12 were reported, 5 <= 8
    assert fired(world.tick({"agents": [f"a{i:02d}" for i in range(17)]}, T0 + 10), "fleet.fanout") == []
    # 9 more: a new fan-out
    e = fired(world.tick({"agents": [f"a{i:02d}" for i in range(21)]}, T0 + 20), "fleet.fanout")
    assert len(e) == 1 and e[0].count == 9


# ---- pushes: the severity of every new condition ------------------------------------------------
SEVERITY = [
    ("wp.violated", "WP_VIOLATED", "urgent",
     [{"wps": [wp("m1", "w1", "FAILED", attempts=3)]}, {"wps": [wp("m1", "w1", "READY", attempts=1)]}]),
    ("ESCALATED", "ESCALATED", "urgent", [{"wps": [wp("m1", "w1", "ESCALATED")]}]),
    ("BLOCKED", "BLOCKED", "urgent", [{"wps": [wp("m1", "w1", "BLOCKED")]}]),
    ("APPROVAL_REQUIRED", "APPROVAL_REQUIRED", "urgent", [{"wps": [wp("m1", "w1", "APPROVAL_REQUIRED")]}]),
    ("circuit OPEN", "CIRCUIT_OPEN", "warning", [{"circuits": {"m1": "OPEN"}}]),
    ("retries", "WP_FLAGGED", "warning", [{"wps": [wp("m1", "w1", "FAILED", attempts=4)]}]),
    ("swarm cap", "SWARM_CAP", "warning", [{"swarm": [("g", f"c{i}", "running") for i in range(9)]}]),
    ("fanout", "FANOUT", "warning", [{"agents": [f"a{i:02d}" for i in range(12)]}]),
    ("rule.violated", "RULE_VIOLATED", "urgent", [R(run("R1", {**TO_DEPLOY, "launch_intent": S("begin", 10)}))]),
]


@pytest.mark.parametrize("what,cls,sev,ticks", SEVERITY, ids=[s[0] for s in SEVERITY])
def test_push_severity(world, what, cls, sev, ticks):
    now = T0
    for w in ticks:
        world.tick(w, now)
        now += MIN
    conds = [c for c in world.proj["notify"]["conds"].values() if c["cls"] == cls]
    assert len(conds) == 1 and conds[0]["sev"] == sev, conds
    for _ in range(2):  # the level persists: no second condition
        world.tick(ticks[-1], now)
        now += MIN
    assert len([c for c in world.proj["notify"]["conds"].values() if c["cls"] == cls]) == 1


def test_escalated_then_blocked_is_a_new_need_and_ready_clears_it(world):
    world.tick({"wps": [wp("m1", "w1", "ESCALATED")]}, T0)
    world.tick({"wps": [wp("m1", "w1", "BLOCKED")]}, T0 + 60)
    conds = world.proj["notify"]["conds"].values()
    assert sorted((c["cls"], c["cleared"] is None) for c in conds) == [("BLOCKED", True), ("ESCALATED", False)]
    world.tick({"wps": [wp("m1", "w1", "READY")]}, T0 + 120)
    assert all(c["cleared"] is not None for c in world.proj["notify"]["conds"].values())


# ---- DoD: self-approval by identity, provenance, unevaluable ------------------------------------
SELF = ["a1", "a 1", "a\t1", "a1\u200b", "\uff41\uff11", "\u04301", "agent:a1", "AGENT: A1", " a1 ", "\u0391\u0031",
        "a\u03011", "\u00e11", "\u00c11", "a1\u0301\u0308"]   # combining marks (issue 47): never another verifier
OTHERS = ["a2", "b1", "a11", "human-lead", "agent:a2", "\u04302"]


@pytest.mark.parametrize("verifier", SELF)
def test_self_approval_refused_by_identity(verifier):
    from watcher.cli.status import Refusal, check_verdict

    assert same_identity(verifier, "a1") and identity(verifier) == "a1"
    assert check_verdict("a1", verifier, "curl ok") is Refusal.SELF_VERDICT


@pytest.mark.parametrize("verifier", OTHERS)
def test_another_verifier_is_accepted(verifier):
    from watcher.cli.status import check_verdict

    assert not same_identity(verifier, "a1") and check_verdict("a1", verifier, "curl ok") is None


@pytest.mark.parametrize("evidence", ["", "  ", "\t\n", "\u200b", "\u200b \u2060"])
def test_verdict_refuses_empty_evidence(evidence):
    from watcher.cli.status import Refusal, check_verdict

    assert check_verdict("a1", "v9", evidence) is Refusal.EMPTY_EVIDENCE


def test_verdict_cli_empty_evidence_exit_2_nothing_written(tmp_path):
    from typer.testing import CliRunner

    from watcher.cli import app

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n')
    EventLog(str(tmp_path / "e.db")).close()
    for argv in (["a1", "met", "--verifier", "v9", "--evidence", ""],
                 ["a1", "met", "--verifier", "\u04301", "--evidence", "ok"]):
        r = CliRunner().invoke(app, ["verdict", *argv, "--force", "--config", str(cfg)])
        assert r.exit_code == 2, r.output
    log = EventLog(str(tmp_path / "e.db"))
    assert list(log.read(0)) == []
    log.close()


def _dod_world(world, verdicts):
    world.log.append([AgentClassified(agent="a1", from_=None, to="DICE_TERMINADO", state="idle", phase="hecho",
                                      contract_sha256="c" * 64, contract_len=3)], T0)
    world.log.append(verdicts, T0 + 1)
    world.proj.catch_up(world.log)
    return world.proj["dod"]["agents"]["a1"], world.proj["notify"]["conds"]


@pytest.mark.parametrize("verifier", ["\u04301", "a 1", "agent:a1", "\uff41\uff11"])
def test_self_verdict_in_the_log_is_never_a_verdict(world, verifier):
    from projections.dod import fold as dod

    a, _ = _dod_world(world, [DodVerdict(agent="a1", verdict="met", verifier=verifier, evidence="x")])
    assert a["verdict"] is None and dod.agent_status(a) is not dod.Status.MET


def test_goal_json_verdict_is_a_claim_never_closes(world):
    from projections.dod import fold as dod

    a, conds = _dod_world(world, [DodVerdict(agent="a1", verdict="met", verifier="v9", evidence="dod_status in goal.json",
                                             source="goal.json")])
    st = dod.status(world.proj["dod"], T0 + 2)["agents"]["a1"]
    assert a["verdict"] is None and st["status"] == "claimed"
    assert st["claimed"]["provenance"] == "claimed by the agent's file"
    assert world.proj["notify"]["dod"].get("a1") is None  # does not mute the agent's "claims done"
    assert any("claimed by the agent's file" in c["text"] for c in conds.values())
    assert any("claimed by the agent's file" in line for line in dod.summary(world.proj["dod"], T0 + 2))


def test_unevaluable_escalates_urgent_needs_a_human(world):
    from projections.dod import fold as dod

    a, conds = _dod_world(world, [DodVerdict(agent="a1", verdict="unevaluable", verifier="v9",
                                             evidence="the verifier cannot read the output")])
    assert dod.agent_status(a) is dod.Status.UNEVALUABLE
    c = [c for c in conds.values() if c["cls"] == "UNEVALUABLE"]
    assert len(c) == 1 and c[0]["sev"] == "urgent"
    assert c[0]["text"].startswith("needs a human: the verifier cannot read")


# ---- orphan windows (watcher/sources/orphans.py; the real tmux run is in tests/watcher/runtime/test_rules_e2e.py) ----
class _Spec:
    socket, session = "fleet-sock", None
    agent_windows, exclude_windows = ["x*"], ["board"]  # x9 is an agent by rule (windows are not by default)


class _Tmux:
    def __init__(self, wins):
        self.name, self.spec, self.wins = "tmux", _Spec(), wins


class _Win:
    def __init__(self, name, index, dead=False):
        self.name, self.session, self.index, self.wid, self.activity, self.dead = name, "fleet", str(index), f"@{index}", None, dead


def _merge(src, agents, failed=None):
    from watcher.sources import orphans

    snap = Snapshot(agents=dict(agents), failed=failed or {})
    orphans.add(src, snap)
    return {a: o.error for a, o in snap.agents.items() if o.source == "tmux"}


def _obs(agent, index):
    return AgentObs(agent=agent, source="fleet", state="busy", contract_sha256="c" * 64, target=f"=fleet:{index}")


def test_orphan_window_after_one_tick_of_grace_then_goal_missing():
    src = _Tmux([_Win("a1", 0), _Win("x9", 1), _Win("dead", 2, dead=True)])
    a1 = {"a1": _obs("a1", 0)}
    assert _merge(src, a1) == {}                                    # grace: seen once
    assert _merge(src, a1) == {"x9": "no goal.json"}                # twice: reported; a dead pane never
    assert _merge(src, {}) == {"x9": "no goal.json"}                # a1's goal.json gone: grace first
    assert _merge(src, {}) == {"x9": "no goal.json", "a1": "goal.json missing"}
    assert _merge(src, a1) == {"x9": "no goal.json"}                # back


def test_orphans_nothing_concluded_while_another_source_failed_or_unscoped():
    src = _Tmux([_Win("x9", 1)])
    for _ in range(3):
        assert _merge(src, {}, failed={"fleet": "root missing"}) == {}
    src.spec = type("S", (), {"socket": None, "session": None})()   # the default server: every shell window
    assert _merge(src, {}) == {} and _merge(src, {}) == {}


def test_only_windows_something_names_an_agent_are_orphans():
    """A plain shell, an editor or the board on the fleet's server is no agent (issue 43): only a
    window an ``agent_windows`` glob names, or one a Claude Code process runs in (the source's
    poll answers ``win_claude``), is reported; ``exclude_windows`` wins over both."""
    src = _Tmux([_Win("sh", 1), _Win("vim", 2), _Win("board", 3), _Win("x9", 4), _Win("cc", 5)])
    src.win_claude = {"@3": True, "@5": True}    # claude runs in the board's window (excluded) and in cc's
    _merge(src, {})
    assert _merge(src, {}) == {"x9": "no goal.json", "cc": "no goal.json"}


def test_orphan_named_like_an_agent_is_not_a_second_agent():
    src = _Tmux([_Win("a1", 0), _Win("a1", 5)])                   # a1 linked to window 0; window 5 named a1
    a1 = {"a1": _obs("a1", 0)}
    assert _merge(src, a1) == {} and _merge(src, a1) == {}


# ---- hostile input: recorded, bounded, never a crash -----------------------------------------------
def test_hostile_step_fields_never_crash_and_stay_bounded(world):
    docs = [run("H1", {**AUDITED, "upload_intent": S("begin", 10, sha256=HEX, candidate="c", reconciled={"yes": 1})},
                board=12345),
            run("H2", {**TO_DEPLOY, "launch_intent": S("fail", 10, request_id="r" * 10_000,
                                                      continue_from=["H1"])}, board="\x1b]0;pwn\x07"),
            run("H3", {**AUDITED, "launch_intent": S("begin", 10, request_id=True)}, board=None,
                continue_from="H3")]
    evs = world.tick(R(*docs), T0)
    bad = [e for e in evs if type(e).__name__ == "RunChanged" and e.run == "H1"]
    assert bad and "bad field board" in bad[0].error and bad[0].board is None
    docs[1]["steps"]["launch_intent"] = S("begin", 20, request_id="s" * 10_000)
    evs = world.tick(R(*docs), T0 + 60)
    stable = fired(evs, "launch-request-stable")
    assert len(stable) == 1 and len(stable[0].key) < 120 and len(stable[0].detail) < 250
    kept = world.proj["runs"]["runs"]["H2"]["launch_rid"]   # bounded: its beginning and a digest of the whole
    assert len(kept) <= 64 and kept.startswith("r" * 48) and kept != ("s" * 10_000)[:64]


def test_hostile_wp_and_swarm_rows_never_crash(world):
    rows = [{"mission": "m\n1", "wp": "w\x1b1", "state": "RUNNING", "deps": "not json, w9", "attempts": "abc",
             "last_error_sig": b"\xff", "same_sig_count": None, "risk": ["CRITICAL"]},
            {"mission": "m2", "wp": "w2", "state": "RUNNING", "deps": "[" + ",".join(f'"d{i}"' for i in range(5000)) + "]",
             "attempts": 10**30, "last_error_sig": None, "same_sig_count": -5, "risk": None}]
    evs = world.tick({"wps": rows, "swarm": [("g", f"c{i}", "running") for i in range(2000)]}, T0)
    deps = fired(evs, "deps-not-done")
    assert len(deps) == 2 and all(len(e.detail) <= 200 for e in deps)
    assert [e.count for e in fired(evs, "max-concurrent")] == [2000]
    assert fired(world.tick({"wps": rows}, T0 + 60), "deps-not-done") == []


def test_hostile_fanout_of_ten_thousand_agents_is_one_bounded_event(world):
    evs = fired(world.tick({"agents": [f"a{i:05d}" for i in range(10_000)]}, T0), "fleet.fanout")
    assert len(evs) == 1 and evs[0].count == 10_000 and len(evs[0].agents) == 10
    assert len(world.proj["fanout"]["births"]) == 512


@pytest.mark.parametrize("verifier", ["a1", "\u04301", "agent:a1", "a 1", "\uff41\uff11", "a1\u200b"])
def test_goal_json_self_approval_by_identity_is_flagged_not_a_verdict(verifier):
    from projections.dod import fold as dod

    obs = AgentObs(agent="a1", source="fleet", state="idle", phase="hecho", contract_sha256="c" * 64,
                   dod_status="met", dod_verifier=verifier)
    evs = dod.detect(dod.initial(), Snapshot(agents={"a1": obs}), T0)
    assert [(type(e).__name__, getattr(e, "flag", None)) for e in evs] == [("DodFlagged", "self-approved")]


def test_old_layout_snapshot_is_replayed_not_folded_into(world):
    """After an upgrade, a runs/missions/swarms snapshot without the rule fields is replayed."""
    import msgspec

    world.tick({"runs": [done_run("R0", 5)], "wps": [wp("m1", "w1", "READY")], "swarm": [("g", "c1", "done")]}, T0)
    enc = world.proj.encoded()
    old = {}
    for name, data in enc.items():
        st = msgspec.json.decode(data)
        if name in ("runs", "missions", "swarms"):
            st.pop("layout")
        old[name] = msgspec.json.encode(st)
    world.log.put_snapshots(world.proj.seq, old)
    p = Projections.load(world.log)
    assert [p[n]["layout"] for n in ("runs", "missions", "swarms")] == [2, 2, 3]   # swarms 3: gone children
    assert p.encoded() == enc
