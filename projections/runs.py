"""Runs: step progress of the outer loop (steps.json) and its hard rules, audited from outside.

``detect`` (pure) compares each tick's ``Snapshot.runs`` with the folded state and returns:
``run.changed`` (run-level fields, first sight and ``gone`` included), ``step.changed`` (one per
status change; a new run's steps are its first transitions), ``rule.violated`` (one per occurrence
key, never again while it persists), ``step.overdue`` (once per begin) and ``run.abandoned`` (once).
``fold`` (pure) applies them; the state is plain JSON with string keys.

Attempts. A step's attempt number grows when it starts again: first sight, a change to ``begin``,
leaving ``done``/``fail`` for another status (a begin happened between polls), or the same status
with a different ``at`` (a whole re-run between polls). A run-level *retry attempt* after failure n
(``failures`` = n, at ``last_failure_at`` = L) is evidenced by any step status other than ``fail``
whose ``at`` is later than L, or by a step entering ``begin`` without ``at`` after failure n was
already recorded (its start is then at most ``now``). The earliest evidence is an upper bound of the
attempt's start: it breaks ``retry-backoff`` if earlier than L + 10·2^(n-1) min, or if n >= 3.
Occurrence keys: ``rule:step#attempt`` for step rules, ``retry-backoff:n@L`` for the backoff.
Per-run rules: ``projections.runs_rules``; rules across runs (board quota, duplicate uploads,
concurrency, daily cap, inactive boards): ``projections.runs_quota``, with the policy
``board_daily_quota``, ``sessions_per_day``, ``inactive_boards`` ([steps] config keys).
"""
from __future__ import annotations

import math
from enum import Enum
from typing import Any, Literal, TypedDict

from events.timefmt import iso
from events.types import RuleViolated, RunAbandoned, RunChanged, StepChanged, StepOverdue
from projections.runs_quota import check_cross_run
from projections.runs_rules import MAX_FAILURES, Rule, check_retry, check_step_rules, intents_index, ts

NAME = "runs"
ORDER = ("facts", "audit", "analyze", "apply", "validate", "deploy", "upload_intent",
         "upload_confirmed", "ledger", "launch_intent", "launch_confirmed", "notify")
POS = {s: i for i, s in enumerate(ORDER)}
STATUSES = frozenset(("begin", "done", "fail"))
DATA_KEYS = ("verdict", "tainted", "sha256", "candidate", "reconciled", "request_id", "continue_from")
RUN_FIELDS = ("branch", "kind", "failures", "last_failure_at", "work_complete", "continue_from", "board")
DEFAULT_DEADLINE = 45 * 60.0
_TYPES = frozenset(("run.changed", "step.changed", "rule.violated", "step.overdue", "run.abandoned"))
TYPES = _TYPES  # the event types fold reads (others: no-op)


class Reason(str, Enum):
    """Why a step change or a run is odd (bad input is recorded, never fatal)."""

    UNKNOWN_STEP = "unknown step"
    UNKNOWN_STATUS = "unknown status"
    NO_STATUS = "no status"
    NOT_OBJECT = "step entry is not an object"
    MISSING_AT = "missing at"
    BAD_AT = "unparseable at"
    OUT_OF_ORDER = "out of order"
    REMOVED = "removed from steps.json"
    RERUN = "repeated between polls (at changed)"
    DATA = "data changed"
    UNCOUNTED_RETRY = "retry without a recorded failure"
    STEPS_NOT_OBJECT = "steps is not an object"
    BAD_FIELD = "bad field"


# ---- parsing (pure) --------------------------------------------------------------------------
def _at_str(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    t = ts(v)
    return iso(t) if t is not None else str(v)[:64]


def parse_step(name: str, entry: Any) -> tuple[str, str | None, float | None, dict, list[str] | tuple[()]]:
    """(status, at, at epoch, rule-relevant data, problems) of one steps.json entry."""
    if type(entry) is dict and name in POS:  # the common, well-formed case
        st, raw = entry.get("status"), entry.get("at")
        if st in STATUSES and type(raw) is str:
            t = ts(raw)
            if t is not None:
                d = entry.get("data")
                return st, raw, t, ({k: d[k] for k in DATA_KEYS if k in d} if type(d) is dict and d else {}), ()
    probs: list[str] = []
    if name not in POS:
        probs.append(Reason.UNKNOWN_STEP.value)
    if isinstance(entry, str):
        entry = {"status": entry}
        probs.append(Reason.NOT_OBJECT.value)
    elif not isinstance(entry, dict):
        return "", None, None, {}, probs + [Reason.NOT_OBJECT.value]
    st = entry.get("status")
    if st is None:
        status = ""
        probs.append(Reason.NO_STATUS.value)
    else:
        status = st if isinstance(st, str) else str(st)[:32]
        if status not in STATUSES:
            probs.append(f"{Reason.UNKNOWN_STATUS.value} {status!r}")
    raw = entry.get("at")
    at = _at_str(raw)
    t = ts(raw)
    if raw is None:
        probs.append(Reason.MISSING_AT.value)
    elif t is None:
        probs.append(Reason.BAD_AT.value)
    d = entry.get("data")
    data = {k: d[k] for k in DATA_KEYS if k in d} if isinstance(d, dict) and d else {}
    return status, at, t, data, probs


def parse_run(doc: dict) -> tuple[dict, list[str]]:
    """Run-level fields of a steps.json, normalised, and the problems found."""
    probs: list[str] = []
    f: dict[str, Any] = {}
    for k in ("branch", "kind", "continue_from", "board"):
        v = doc.get(k)
        if v is not None and not isinstance(v, str):
            probs.append(f"{Reason.BAD_FIELD.value} {k}")
            v = None
        f[k] = v
    n = doc.get("failures", 0)
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if n is None:
        n = 0
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        probs.append(f"{Reason.BAD_FIELD.value} failures")
        n = 0
    f["failures"] = n
    lf = doc.get("last_failure_at")
    if lf is not None and ts(lf) is None:
        probs.append(f"{Reason.BAD_FIELD.value} last_failure_at")
    f["last_failure_at"] = _at_str(lf)
    wc = doc.get("work_complete", False)
    if not isinstance(wc, bool):
        probs.append(f"{Reason.BAD_FIELD.value} work_complete")
        wc = False
    f["work_complete"] = wc
    return f, probs


def step_names(names: Any) -> list[str]:
    """Fixed order first, then unknown names alphabetically."""
    return sorted(names, key=lambda s: (POS.get(s, 99), s))


def is_new_attempt(prev: str | None, prev_t: float | None, prev_at: str | None,
                   to: str, t: float | None, at: str | None) -> bool:
    """Does this change start the step again? (see the module docstring)"""
    if to == "":
        return False
    if not prev:
        return True
    if to == prev:
        return (t != prev_t) if (t is not None and prev_t is not None) else (at != prev_at)
    return to == "begin" or prev in ("done", "fail")


# ---- state --------------------------------------------------------------------------------
# The snapshot schema: ``layout`` 2 = the issue-22 rule fields. A snapshot of an older layout fails
# to decode, so ``Projections.load`` replays the log instead of folding into a stale shape (and
# ``rebuild --check`` stays clean after an upgrade).
STATE_TYPE = TypedDict("RunsState", {"runs": dict, "layout": Literal[2]})


def initial() -> dict:
    return {"runs": {}, "layout": 2}


def _new_run(time: str) -> dict:
    return {"source": "", "branch": None, "kind": None, "failures": 0, "last_failure_at": None,
            "work_complete": False, "continue_from": None, "board": None, "launch_rid": None,
            "error": "", "gone": False,
            "first_seen": time, "updated": time, "steps": {}, "violations": {},
            "abandoned": None, "stamp": ""}


def fold(state: dict, rec: Any) -> dict:
    """Apply one Recorded event (pure; mutates and returns ``state``)."""
    if rec.type not in _TYPES:
        return state
    ev = rec.event
    run = getattr(ev, "run", None)
    if not isinstance(run, str):
        return state
    runs = state["runs"]
    r = runs.get(run)
    if r is None:
        r = runs[run] = _new_run(rec.time)
    r["updated"] = rec.time
    r["stamp"] = rec.id
    t = rec.type
    if t == "step.changed":
        steps = r["steps"]
        s = steps.get(ev.step)
        if s is None:
            s = steps[ev.step] = {"status": "", "at": None, "data": {}, "reason": "", "n": 0,
                                  "done": False, "since": rec.time, "overdue_n": 0, "deadline_s": 0}
        n = ev.attempt or (s["n"] + (1 if ev.to == "begin" and ev.from_ != "begin" else 0))
        if n != s["n"] or ev.to != s["status"]:
            s["since"] = rec.time
        s["n"] = n
        s["status"] = ev.to
        s["at"] = ev.at
        s["data"] = ev.data
        s["reason"] = ev.reason
        if ev.to == "done":
            s["done"] = True
        rid = ev.data.get("request_id") if ev.step == "launch_intent" else None
        if r.get("launch_rid") is None and isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid).strip():
            r["launch_rid"] = str(rid)[:64]  # the run's first launch request id (launch-request-stable)
    elif t == "run.changed":
        for k in RUN_FIELDS:
            r[k] = getattr(ev, k)
        r["error"] = ev.error
        r["source"] = ev.source
        r["gone"] = ev.gone
    elif t == "rule.violated":
        key = ev.key or f"{ev.rule}:{ev.step}:{rec.seq}"
        r["violations"][key] = {"rule": ev.rule, "step": ev.step, "detail": ev.detail, "time": rec.time}
    elif t == "step.overdue":
        s = r["steps"].get(ev.step)
        if s is not None:
            s["overdue_n"] = ev.attempt or s["n"]
            s["deadline_s"] = ev.deadline_s
    elif t == "run.abandoned":
        r["abandoned"] = rec.time
    return state


# ---- detect -------------------------------------------------------------------------------
class _Ctx:
    """One detect call: the snapshot, the state and lazily computed cross-run facts."""

    def __init__(self, state: dict, snap: Any, now: float):
        self.state, self.snap, self.now = state, snap, now
        self.runs = state["runs"]
        self._intents: list | None = None
        self._taint: dict[str, bool] = {}
        self.cache: dict[Any, Any] = {}  # cross-run indexes of this tick (projections.runs_quota)
        self._views: dict[str, dict | None] = {}

    def view(self, run: str) -> dict | None:
        """A snapshot run's steps parsed (name -> parse_step), once per tick; None: no readable steps."""
        if run in self._views:
            return self._views[run]
        o = self.snap.runs.get(run)
        v = None
        if o is not None and o.error is None and isinstance(o.doc, dict):
            steps = o.doc.get("steps")
            if isinstance(steps, dict):
                v = {n: parse_step(n, e) for n, e in steps.items()}
        self._views[run] = v
        return v

    def step_of(self, run: str, step: str) -> tuple[str, float | None, dict]:
        """(status, at epoch, data) of another run's step: the snapshot's view, else the state's."""
        v = self.view(run)
        if v is not None:
            e = v.get(step)
            return (e[0], e[2], e[3]) if e is not None else ("", None, {})
        r = self.runs.get(run)
        s = r["steps"].get(step) if r else None
        if s is None:
            return "", None, {}
        return s["status"], ts(s["at"]), s["data"]

    def continue_from(self, run: str) -> list[str]:
        """The runs ``run`` continues from: its ``continue_from`` and its launch_intent's."""
        o = self.snap.runs.get(run)
        if o is not None and o.error is None and isinstance(o.doc, dict):
            v = o.doc.get("continue_from")
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

    def intents(self) -> list:
        if self._intents is None:
            self._intents = intents_index(self)
        return self._intents


# Memo of runs whose last full evaluation gave nothing: (doc, state stamp, policy, source, wake).
# Transparent: a hit returns exactly what a full evaluation would (no events), so detect stays pure.
_memo: dict[str, tuple] = {}


def detect(state: dict, snap: Any, now: float, default_deadline: float = DEFAULT_DEADLINE,
           deadlines: dict[str, float] | None = None, board_daily_quota: int = 3, sessions_per_day: int = 12,
           inactive_boards: Any = (), **_policy: Any) -> list:
    """Events for this tick, deterministic: runs sorted by id, per run in a fixed order."""
    deadlines = deadlines or {}
    cross = {"board_daily_quota": int(board_daily_quota), "sessions_per_day": int(sessions_per_day),
             "inactive_boards": tuple(sorted(inactive_boards))}
    policy = (float(default_deadline), tuple(sorted(deadlines.items())), tuple(cross.items()))
    ctx = _Ctx(state, snap, now)
    runs = state["runs"]
    out: dict[str, list] = {}
    for rid, obs in snap.runs.items():
        rs = runs.get(rid)
        m = _memo.get(rid)
        if (m is not None and rs is not None and obs.error is None and m[1] == rs["stamp"]
                and m[2] == policy and m[3] == obs.source and now <= m[4]
                and (m[0] is obs.doc or m[0] == obs.doc)):
            continue
        evs, wake = _detect_run(rid, obs, rs, ctx, default_deadline, deadlines, cross)
        if evs:
            out[rid] = evs
            _memo.pop(rid, None)
        elif rs is not None and obs.error is None:
            _memo[rid] = (obs.doc, rs["stamp"], policy, obs.source, wake)
    failed = snap.failed
    for rid, rs in runs.items():
        if rid not in snap.runs and not rs["gone"] and rs["source"] not in failed:
            out[rid] = [RunChanged(run=rid, **{k: rs.get(k) for k in RUN_FIELDS}, error=rs["error"],
                                   source=rs["source"], gone=True)]
            _memo.pop(rid, None)
    if len(_memo) > 2 * len(snap.runs) + 64:
        for k in [k for k in _memo if k not in snap.runs]:
            del _memo[k]
    return [e for rid in sorted(out) for e in out[rid]]


def _detect_run(rid: str, obs: Any, rs: dict | None, ctx: _Ctx, default_deadline: float,
                deadlines: dict, cross: dict) -> tuple[list, float]:
    """Full evaluation of one observed run: (events, time until which nothing can change)."""
    evs: list = []
    prev_steps = rs["steps"] if rs else {}
    if obs.error is not None or not isinstance(obs.doc, dict):
        err = obs.error or "steps.json is not an object"
        if rs is None or rs["error"] != err or rs["gone"] or rs["source"] != obs.source:
            base: dict[str, Any] = {k: rs.get(k) for k in RUN_FIELDS} if rs else {}
            evs.append(RunChanged(run=rid, **base, error=err, source=obs.source))
        return evs, math.inf
    doc = obs.doc
    fields, probs = parse_run(doc)
    raw_steps = doc.get("steps")
    if raw_steps is None:
        raw_steps = {}
    steps_ok = isinstance(raw_steps, dict)
    if not steps_ok:
        probs.append(Reason.STEPS_NOT_OBJECT.value)
    err = "; ".join(probs)
    if (rs is None or rs["gone"] or rs["error"] != err or rs["source"] != obs.source
            or any(rs.get(k) != fields[k] for k in RUN_FIELDS)):
        evs.append(RunChanged(run=rid, **fields, error=err, source=obs.source))
    view = (ctx.view(rid) or {}) if steps_ok else {}
    gap = next((i for i, s in enumerate(ORDER) if s not in view or view[s][0] != "done"), len(ORDER))
    changes = []  # (name, prev status, status, at, t, data, reason, attempt, new attempt, prev record)
    if steps_ok:
        names = view.keys() | prev_steps.keys() if prev_steps else view.keys()
        for name in step_names(names):
            p = prev_steps.get(name)
            pst = p["status"] if p else None
            if name in view:
                st, at, t, data, sp = view[name]
            else:
                if not pst:
                    continue
                st, at, t, data, sp = "", None, None, {}, [Reason.REMOVED.value]
            if p is not None:
                pt = ts(p["at"]) if p["at"] is not None else None
                same = st == pst and data == p["data"] and (
                    (t == pt) if (t is not None or pt is not None) else at == p["at"])
                if same:
                    continue
                new = is_new_attempt(pst, pt, p["at"], st, t, at)
            else:
                new = st != ""
            reasons = list(sp)
            if st == pst and new:
                reasons.append(Reason.RERUN.value)
            elif st == pst:
                reasons.append(Reason.DATA.value)
            if st in STATUSES and name in POS and POS[name] > gap and st != "fail":
                first = ORDER[gap]
                reasons.append(f"{Reason.OUT_OF_ORDER.value}: {first} {view[first][0] or 'not done' if first in view else 'missing'}")
            if new and st == "begin" and pst == "fail" and fields["failures"] == 0:
                reasons.append(Reason.UNCOUNTED_RETRY.value)
            n = (p["n"] if p else 0) + (1 if new else 0)
            why = "; ".join(reasons)
            changes.append((name, pst, st, at, t, data, why, n, new, p))
            evs.append(StepChanged(run=rid, step=name, from_=pst, to=st, at=at, data=data,
                                   reason=why, attempt=n))
    seen = rs["violations"] if rs else {}
    viols = check_step_rules(rid, fields, view, changes, ctx) if changes else []
    if changes:
        viols += check_cross_run(rid, fields, changes, ctx, **cross)
    retry = check_retry(rid, fields, view, changes, rs, ctx.now)
    if retry is not None:
        viols.append(retry)
    done_keys = set()
    for rule, step, key, detail in viols:
        if key not in seen and key not in done_keys:
            done_keys.add(key)
            evs.append(RuleViolated(run=rid, rule=rule.value, detail=detail, step=step, key=key))
    # overdue: a step in begin longer than its deadline, once per begin
    wake = math.inf
    failures = fields["failures"]
    if failures < MAX_FAILURES:
        changed = {c[0]: c for c in changes}
        for name, (st, at, t, _, _) in view.items():
            if st != "begin":
                continue
            p = prev_steps.get(name)
            c = changed.get(name)
            n = c[7] if c else (p["n"] if p else 1)
            if p is not None and c is None and p["overdue_n"] == n:
                continue
            start = t if t is not None else (ts(p["since"]) if p is not None and c is None else None)
            if start is None:
                continue
            dl = float(deadlines.get(name, default_deadline))
            if ctx.now - start > dl:
                evs.append(StepOverdue(run=rid, step=name, since=at or iso(start), deadline_s=dl, attempt=n))
            else:
                wake = min(wake, start + dl)
    if failures >= MAX_FAILURES and not (rs and rs["abandoned"]):
        evs.append(RunAbandoned(run=rid, failures=failures))
    return evs, wake


# ---- read models --------------------------------------------------------------------------
def next_retry(r: dict) -> float | None:
    """Earliest allowed start of the next attempt (None: no failure yet, unknown, or given up)."""
    n = r["failures"]
    lf = ts(r["last_failure_at"])
    if n < 1 or n >= MAX_FAILURES or lf is None:
        return None
    return lf + 600.0 * 2 ** (n - 1)


def run_status(rid: str, r: dict, now: float) -> dict:
    steps = r["steps"]
    rows = []
    for name in list(ORDER) + step_names(k for k in steps if k not in POS):
        s = steps.get(name)
        row = {"step": name, "status": (s["status"] or None) if s else None,
               "at": (s["at"] or s["since"]) if s else None}
        if s and s["reason"]:
            row["reason"] = s["reason"]
        rows.append(row)
    present = [x for x in rows if x["status"]]
    flight = [x["step"] for x in rows if x["status"] == "begin"]
    current = flight[-1] if flight else (present[-1]["step"] if present else None)
    done = sum(1 for n in ORDER if n in steps and steps[n]["status"] == "done")
    overdue = [n for n in step_names(steps) if steps[n]["status"] == "begin"
               and steps[n]["overdue_n"] and steps[n]["overdue_n"] == steps[n]["n"]]
    nr = next_retry(r)
    return {"run": rid, "source": r["source"], "kind": r["kind"], "branch": r["branch"],
            "steps": rows, "current": current, "in_flight": flight, "failures": r["failures"],
            "last_failure_at": r["last_failure_at"], "work_complete": r["work_complete"],
            "continue_from": r["continue_from"], "board": r.get("board"), "progress": f"{done}/{len(ORDER)}",
            "violations": sorted({v["rule"] for v in r["violations"].values()}),
            "next_retry": iso(nr) if nr is not None else None,
            "retry_wait_s": max(0.0, round(nr - now, 3)) if nr is not None else None,
            "abandoned": r["abandoned"] is not None, "overdue": overdue,
            "error": r["error"] or None, "gone": r["gone"], "updated": r["updated"]}


def status(state: dict, now: float) -> dict:
    """``{"runs": [...]}`` for ``status --json`` (merged at the top level), runs sorted by id."""
    return {"runs": [run_status(k, state["runs"][k], now) for k in sorted(state["runs"])]}


def summary(state: dict, now: float) -> list[str]:
    """One short line per run needing a human: violations, abandoned, overdue, unreadable."""
    lines = []
    for rid in sorted(state["runs"]):
        r = state["runs"][rid]
        if r["gone"]:
            continue
        st = run_status(rid, r, now)
        bits = []
        if st["violations"]:
            bits.append("broke " + ", ".join(st["violations"]))
        if st["abandoned"]:
            bits.append(f"abandoned after {r['failures']} failures")
        if st["overdue"]:
            bits.append("overdue: " + ", ".join(st["overdue"]))
        if st["error"]:
            bits.append(f"unreadable/odd steps.json: {st['error'][:80]}")
        if bits:
            lines.append(f"run {rid} ({st['progress']}, at {st['current'] or '-'}): " + "; ".join(bits))
    return lines


__all__ = ["NAME", "ORDER", "Reason", "Rule", "detect", "fold", "initial", "status", "summary"]
