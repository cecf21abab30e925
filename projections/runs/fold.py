"""Runs: step progress of the outer loop (steps.json) and its hard rules, audited from outside.

``detect`` (pure) compares each tick's ``Snapshot.runs`` with the folded state and returns:
``run.changed`` (run-level fields, first sight and ``gone`` included), ``step.changed`` (one per
status change; a new run's steps are its first transitions), ``rule.violated`` (one per occurrence
key, never again while it persists), ``step.overdue`` (once per begin) and ``run.abandoned`` (once).
``fold`` (pure) applies them, one small function per event type; the state is plain JSON with
string keys. ``judge`` is ``detect`` told which runs are known to raise and which cannot report
anything (the runtime keeps both: ``watcher.runtime.schedule.RunsTicker``); it keeps nothing
between calls.

Attempts. A step's attempt number grows when it starts again: first sight, a change to ``begin``,
leaving ``done``/``fail`` for another status (a begin happened between polls), or the same status
with a different ``at`` (a whole re-run between polls). A run-level *retry attempt* after failure n
(``failures`` = n, at ``last_failure_at`` = L) is evidenced by any step status other than ``fail``
whose ``at`` is later than L, or by a step entering ``begin`` without ``at`` after failure n was
already recorded (its start is then at most ``now``). The earliest evidence is an upper bound of the
attempt's start: it breaks ``retry-backoff`` if earlier than L + 10·2^(n-1) min, or if n >= 3.
Occurrence keys: ``rule:step#attempt`` for step rules, ``retry-backoff:n@L`` for the backoff.
"""
import math
from typing import Any, Literal, TypedDict

import msgspec

from events.timefmt import iso
from events.types import RuleViolated, RunAbandoned, RunChanged, StepChanged, StepOverdue
from projections.runs.parse import (ORDER, POS, RUN_FIELDS, STATUSES, Reason, is_new_attempt, parse_run,
                                    parse_steps, step_names, steps_problem)
from projections.runs.quota import check_cross_run
from projections.runs.rules import MAX_FAILURES, Change, Rule, check_retry, check_step_rules, present, rid_key, ts
from projections.runs.view import status, summary  # the read models, re-exported

NAME = "runs"
TIME = None        # fold reads rec.time itself (projections.base.Projection)
READS_ID = True    # fold reads ``rec.id`` (a run's stamp): a replay fetches the ids (events/replay.py)
DEFAULT_DEADLINE = 45 * 60.0


# ---- state --------------------------------------------------------------------------------
STATE_TYPE = TypedDict("RunsState", {"runs": dict, "layout": Literal[2]})


def initial() -> dict:
    return {"runs": {}, "layout": 2}


def _new_run(time: str) -> dict:
    return {"source": "", "branch": None, "kind": None, "failures": 0, "last_failure_at": None,
            "work_complete": False, "continue_from": None, "board": None, "launch_rid": None,
            "error": "", "gone": False,
            "first_seen": time, "updated": time, "steps": {}, "violations": {},
            "abandoned": None, "stamp": ""}


# ---- fold: one small function per event type, to read against docs/contract.md ----------------------
def _step_changed(r: dict, ev: Any, rec: Any) -> None:
    """A step's status changed: its record follows; the attempt number grows when it begins again."""
    s = r["steps"].get(ev.step)
    if s is None:  # first sight of the step
        s = r["steps"][ev.step] = {"status": None, "at": None, "data": None, "reason": "", "n": 0,
                                   "done": False, "since": rec.time, "overdue_n": 0, "deadline_s": 0}
    to = ev.to
    n = ev.attempt or (s["n"] + (1 if to == "begin" and ev.from_ != "begin" else 0))
    if n != s["n"] or to != s["status"]:
        s["since"] = rec.time
    s["n"] = n
    s["status"] = to
    s["at"] = ev.at
    s["data"] = ev.data
    s["reason"] = ev.reason
    if to == "done":
        s["done"] = True
    if ev.step == "launch_intent" and r.get("launch_rid") is None and present(ev.data.get("request_id")):
        r["launch_rid"] = rid_key(ev.data["request_id"])  # the run's first launch request id (launch-request-stable)


def _run_changed(r: dict, ev: Any, rec: Any) -> None:
    """Run-level fields (first sight, a change, unreadable, gone) replace the record's."""
    for k in (*RUN_FIELDS, "error", "source", "gone"):
        r[k] = getattr(ev, k)


def _rule_violated(r: dict, ev: Any, rec: Any) -> None:
    """A rule occurrence, remembered by its key: it is never reported again while it persists."""
    key = ev.key or f"{ev.rule}:{ev.step}:{rec.seq}"
    r["violations"][key] = {"rule": ev.rule, "step": ev.step, "detail": ev.detail, "time": rec.time}


def _step_overdue(r: dict, ev: Any, rec: Any) -> None:
    """A step in begin past its deadline: once per attempt."""
    s = r["steps"].get(ev.step)
    if s is not None:
        s["overdue_n"] = ev.attempt or s["n"]
        s["deadline_s"] = ev.deadline_s


def _run_abandoned(r: dict, ev: Any, rec: Any) -> None:
    """Three failures: the run is given up (once)."""
    r["abandoned"] = rec.time


_FOLDS = {"step.changed": _step_changed, "run.changed": _run_changed, "rule.violated": _rule_violated,
          "step.overdue": _step_overdue, "run.abandoned": _run_abandoned}
TYPES = frozenset(_FOLDS)  # the event types fold reads (others: no-op)


def fold(state: dict, rec: Any) -> dict:
    """Apply one Recorded event (pure; mutates and returns ``state``)."""
    apply = _FOLDS.get(rec.type)
    if apply is None:
        return state
    ev = rec.event   # every type of _FOLDS names its run (a str)
    runs = state["runs"]
    r = runs.get(ev.run)
    if r is None:
        r = runs[ev.run] = _new_run(rec.time)
    r["updated"] = rec.time
    r["stamp"] = rec.id
    apply(r, ev, rec)
    return state


# ---- detect -------------------------------------------------------------------------------
class _Ctx:
    """One detect call: the snapshot, the state, the policy and lazily computed cross-run facts."""

    def __init__(self, state: dict, snap: Any, now: float, deadlines: dict[str, float], default_deadline: float,
                 cross: dict[str, Any]):
        self.snap, self.now, self.runs = snap, now, state["runs"]
        self.deadlines, self.default_deadline = deadlines, default_deadline
        self.cross = cross   # the keywords of check_cross_run
        self._taint: dict[str, bool] = {}
        self.cache: dict[Any, Any] = {}  # cross-run indexes of this tick (projections.runs.quota)
        self._views: dict[str, dict | None] = {}

    def doc(self, run: str) -> dict | None:
        """A snapshot run's steps.json; None: not in the snapshot, or unreadable."""
        o = self.snap.runs.get(run)
        return o.doc if o is not None and o.error is None and isinstance(o.doc, dict) else None

    def view(self, run: str) -> dict | None:
        """A snapshot run's steps parsed (name -> parse_step), once per tick; None: no readable steps."""
        if run not in self._views:
            steps = (self.doc(run) or {}).get("steps")
            self._views[run] = parse_steps(steps) if isinstance(steps, dict) else None
        return self._views[run]

    def step_of(self, run: str, step: str) -> tuple[str, float | None, dict]:
        """(status, at epoch, data) of another run's step: the snapshot's view, else the state's."""
        v = self.view(run)
        if v is not None:
            e = v.get(step)
            return (e[0], e[2], e[3]) if e is not None else ("", None, {})
        r = self.runs.get(run)
        s = r["steps"].get(step) if r else None
        return (s["status"], ts(s["at"]), s["data"]) if s is not None else ("", None, {})

    def continue_from(self, run: str) -> list[str]:
        """The runs ``run`` continues from: its ``continue_from`` and its launch_intent's."""
        d = self.doc(run)
        if d is not None:
            v = d.get("continue_from")
        else:
            r = self.runs.get(run)
            v = r["continue_from"] if r else None
        li = self.step_of(run, "launch_intent")[2].get("continue_from")
        return list(dict.fromkeys(x for x in (v, li) if isinstance(x, str) and x))

    def tainted(self, run: str, depth: int = 0) -> bool:
        """Own audit verdict fail/review or tainted, or continuing (transitively) from such a run."""
        if run in self._taint:
            return self._taint[run]
        self._taint[run] = False  # cycle guard
        _, _, a = self.step_of(run, "audit")
        bad = a.get("verdict") in ("fail", "review") or bool(a.get("tainted"))
        if not bad and depth < 64:
            bad = any(cf != run and self.tainted(cf, depth + 1) for cf in self.continue_from(run))
        self._taint[run] = bad
        return bad


def detect(state: dict, snap: Any, now: float, **policy: Any) -> list:
    """Events for this tick, deterministic: runs sorted by id, per run in a fixed order (pure)."""
    return judge(state, snap, now, {}, (), **policy)[0]


def judge(state: dict, snap: Any, now: float, hidden: dict[str, str], skip: Any = (),
          default_deadline: float = DEFAULT_DEADLINE, deadlines: dict[str, float] | None = None,
          board_daily_quota: int = 3, sessions_per_day: int = 12, inactive_boards: Any = (),
          **_policy: Any) -> tuple[list, dict[str, str], dict[str, float | None]]:
    """(``detect``'s events, the runs whose evaluation raised -> why, the runs evaluated -> None
    when they reported something, else their wake: until then nothing changes for them by time
    alone, unless their record is missing or their observation unreadable: not there). The caller
    (``watcher.runtime.schedule.RunsTicker``) knows two things from earlier calls: ``hidden``, the
    runs that raised on the very observation they still hold, evaluated as unreadable from the
    start; ``skip``, the runs that cannot report anything (same doc, folded record and source as
    when they were quiet, before their wake), not evaluated. A run whose evaluation raises is
    evaluated again as unreadable and hidden from the others (:func:`_without`): one pass more
    per run found raising."""
    cross = {"board_daily_quota": int(board_daily_quota), "sessions_per_day": int(sessions_per_day),
             "inactive_boards": tuple(sorted(inactive_boards))}
    runs = state["runs"]
    bad = {rid: why for rid, why in hidden.items() if rid in snap.runs}
    while True:
        view = _without(snap, bad) if bad else snap
        ctx, out, failed = _Ctx(state, view, now, deadlines or {}, float(default_deadline), cross), {}, None
        quiet: dict[str, float | None] = {}
        for rid, obs in view.runs.items():
            if rid in skip and rid not in bad:
                continue
            rs = runs.get(rid)
            try:
                evs, wake = _detect_run(rid, obs, rs, ctx)
            except Exception as e:  # a value nobody foresaw: that run's problem, never every run's
                if rid in bad:
                    raise
                failed, bad[rid] = rid, f"could not be evaluated ({type(e).__name__})"
                break
            if evs:
                out[rid], quiet[rid] = evs, None
            elif rs is not None and obs.error is None:
                quiet[rid] = wake
        if failed is None:
            break
    for ev in _gone(runs, snap):
        out[ev.run], quiet[ev.run] = [ev], None
    return [e for rid in sorted(out) for e in out[rid]], bad, quiet


def _without(snap: Any, bad: dict[str, str]) -> Any:
    """``snap`` with each run of ``bad`` unreadable for its reason: a run whose evaluation raised
    is evaluated again as such (one ``run.changed`` error, once), and every run is evaluated again
    without its steps (another run's cross-run facts, a quota or a taint, read its folded record
    instead), so one run's unforeseen value never blinds the detector to the others."""
    runs = {rid: (msgspec.structs.replace(o, doc=None, error=bad[rid]) if rid in bad else o)
            for rid, o in snap.runs.items()}
    return msgspec.structs.replace(snap, runs=runs)


def _gone(runs: dict, snap: Any) -> list:
    """run.changed ``gone`` for each known run no longer seen (not while its source is failing, nor
    while it holds back a file awaiting its second read: tests/projections/runs/test_runs_restart.py)."""
    failed = snap.failed
    held = {r.name for r in snap.results if r.held} if snap.results else ()
    return [RunChanged(run=rid, **{k: rs.get(k) for k in RUN_FIELDS}, error=rs["error"], source=rs["source"],
                       gone=True)
            for rid, rs in runs.items() if rid not in snap.runs and not rs["gone"] and rs["source"] not in failed
            and rs["source"] not in held]


def _detect_run(rid: str, obs: Any, rs: dict | None, ctx: _Ctx) -> tuple[list, float]:
    """Full evaluation of one observed run, stage by stage: (events, time until which nothing can
    change)."""
    if obs.error is not None or not isinstance(obs.doc, dict):  # once per error; the fields stay as last read
        last = {k: rs.get(k) for k in RUN_FIELDS} if rs else {}
        return _fields_changed(rid, obs.source, rs, last, obs.error or "steps.json is not an object"), math.inf
    fields, probs = parse_run(obs.doc)
    raw_steps = obs.doc.get("steps")
    steps_ok = raw_steps is None or isinstance(raw_steps, dict)
    if not steps_ok:
        probs.append(Reason.STEPS_NOT_OBJECT.value)
    elif raw_steps:
        probs += [p for p in (steps_problem(raw_steps),) if p]
    evs = _fields_changed(rid, obs.source, rs, fields, "; ".join(probs))
    view = (ctx.view(rid) or {}) if steps_ok else {}
    changes = _step_changes(view, rs["steps"] if rs else {}, fields["failures"]) if steps_ok else []
    evs += [StepChanged(run=rid, step=c.step, from_=c.prev, to=c.status, at=c.at, data=c.data, reason=c.reason,
                        attempt=c.attempt) for c in changes]
    evs += _violations(rid, fields, view, changes, rs, ctx)
    overdue, wake = _overdue(rid, view, rs, changes, fields["failures"], ctx)
    evs += overdue
    if fields["failures"] >= MAX_FAILURES and not (rs and rs["abandoned"]):
        evs.append(RunAbandoned(run=rid, failures=fields["failures"]))
    return evs, wake


def _fields_changed(rid: str, source: str, rs: dict | None, fields: dict, err: str) -> list:
    """run.changed when a run-level field, the problems or the source differ (first sight too; an
    unreadable run passes its last fields: a new error or source)."""
    if (rs is None or rs["gone"] or rs["error"] != err or rs["source"] != source
            or any(rs.get(k) != fields[k] for k in RUN_FIELDS)):
        return [RunChanged(run=rid, **fields, error=err, source=source)]
    return []


def _step_changes(view: dict, prev_steps: dict, failures: int) -> list[Change]:
    """One :class:`Change` per step whose status, at or data differ from its folded record, in the
    fixed order; every step of a new run (its first transitions)."""
    gap = next((i for i, s in enumerate(ORDER) if s not in view or view[s][0] != "done"), len(ORDER))
    changes = (_change(name, view.get(name), prev_steps.get(name), gap, view, failures)
               for name in step_names(view.keys() | prev_steps.keys()))
    return [c for c in changes if c is not None]


def _change(name: str, v: tuple | None, p: dict | None, gap: int, view: dict, failures: int) -> Change | None:
    """The change of one step from its folded record ``p`` to its parsed entry ``v`` (None: none)."""
    pst = p["status"] if p else None
    if v is None:
        if not pst:
            return None
        v = ("", None, None, {}, [Reason.REMOVED.value])
    st, at, t, data, sp = v
    if p is None:
        new = st != ""
    else:
        pat = p["at"]
        pt = t if pat == at else (ts(pat) if pat is not None else None)  # the same text: the same time
        if st == pst and data == p["data"] and ((t == pt) if (t is not None or pt is not None) else at == pat):
            return None
        new = is_new_attempt(pst, pt, pat, st, t, at)
    reasons = list(sp)
    if st == pst:
        reasons.append(Reason.RERUN.value if new else Reason.DATA.value)
    odd = _out_of_order(name, st, gap, view)
    if odd:
        reasons.append(odd)
    if new and st == "begin" and pst == "fail" and failures == 0:
        reasons.append(Reason.UNCOUNTED_RETRY.value)
    n = (p["n"] if p else 0) + (1 if new else 0)
    return Change(name, pst, st, at, t, data, "; ".join(reasons), n, new, p)


def _out_of_order(name: str, st: str, gap: int, view: dict) -> str:
    """Why a step past the first one not done is out of order ("" when it is not; a fail never is)."""
    if st in STATUSES and name in POS and POS[name] > gap and st != "fail":
        first = ORDER[gap]
        return f"{Reason.OUT_OF_ORDER.value}: {first} {view[first][0] or 'not done' if first in view else 'missing'}"
    return ""


def _violations(rid: str, fields: dict, view: dict, changes: list[Change], rs: dict | None, ctx: _Ctx) -> list:
    """One rule.violated per occurrence key not reported before: the run's own step rules and the
    cross-run rules (for this tick's changes), and the retry backoff."""
    viols = [] if not changes else \
        check_step_rules(rid, fields, view, changes, ctx) + check_cross_run(rid, fields, changes, ctx, **ctx.cross)
    retry = check_retry(fields, view, changes, rs, ctx.now)
    if retry is not None:
        viols.append(retry)
    seen = rs["violations"] if rs else {}
    out, keys = [], set()
    for rule, step, key, detail in viols:
        if key not in seen and key not in keys:
            keys.add(key)
            out.append(RuleViolated(run=rid, rule=rule.value, detail=detail, step=step, key=key))
    return out


def _overdue(rid: str, view: dict, rs: dict | None, changes: list[Change], failures: int,
             ctx: _Ctx) -> tuple[list, float]:
    """step.overdue for a step in begin longer than its deadline, once per begin (not after the
    last failure); and the next deadline still ahead (math.inf: none)."""
    evs: list = []
    wake, now = math.inf, ctx.now
    if failures >= MAX_FAILURES:
        return evs, wake
    prev_steps = rs["steps"] if rs else {}
    changed = {c.step: c for c in changes}
    for name, (st, at, t, _, _) in view.items():
        if st != "begin":
            continue
        p = prev_steps.get(name)
        c = changed.get(name)
        n = c.attempt if c else (p["n"] if p else 1)
        if p is not None and c is None and p["overdue_n"] == n:
            continue
        seen = now if c is not None else (ts(p["since"]) if p is not None else None)  # begun by then
        start = t if t is not None and (seen is None or t <= seen) else seen  # an `at` ahead: when seen
        if start is None:
            continue
        dl = float(ctx.deadlines.get(name, ctx.default_deadline))
        if now - start > dl:
            evs.append(StepOverdue(run=rid, step=name, since=at or iso(start), deadline_s=dl, attempt=n))
        else:
            wake = min(wake, start + dl)
    return evs, wake


__all__ = ["NAME", "ORDER", "READS_ID", "Reason", "Rule", "STATE_TYPE", "TIME", "TYPES", "detect", "judge", "fold", "initial", "status", "summary"]
