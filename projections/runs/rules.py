"""The per-run hard rules of the outer loop (docs/contract.md), as pure checks over one tick's changes.

The seven of the contract plus ``reconciled-no-reupload``, ``launch-request-stable`` and
``upload-needs-audit``. ``data.reconciled`` is read by value: ``"yes"`` (or ``true``) = the upload
was found on the account page, ``"no"`` = it was not; anything else is not a reconciliation.

Each check returns ``(Rule, step, key, detail)``; ``key`` names the occurrence so that
``projections.runs.fold.detect`` reports it once (the folded state remembers reported keys).
A step "begins" when its change starts a new attempt (see ``projections.runs.fold``): first sight of
a step that is already ``done`` counts, since it must have begun.
"""
# No `from __future__ import annotations` here: this module has a typing.NamedTuple (projections/__init__)

import hashlib
import math
from datetime import datetime, timezone
import re
from enum import Enum
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from events.timefmt import iso

SHA256 = re.compile(r"[0-9a-fA-F]{64}")
GATED = ("apply", "upload_intent", "ledger", "launch_intent")
BACKOFF_S = 600.0  # 10 minutes, doubled per failure
MAX_FAILURES = 3
AHEAD_S = 86400.0  # a retry's `at` this far ahead of the watcher's clock is not believed


# ---- parsing (pure) --------------------------------------------------------------------------
_FIRST, _END = -62135596800.0, 253402300800.0  # 0001-01-01 and 10000-01-01, UTC


def ts(v: Any) -> float | None:
    """Epoch seconds from an ISO-8601 string (naive = UTC) or a number; None if neither, or if
    its UTC day is not one of years 1..9999 ("0001-01-01T00:00:00+14:00" parses, but has no
    UTC day ``quota.day`` can name: tests/projections/runs/test_runs_hostile_values.py)."""
    if isinstance(v, str):
        try:
            d = datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith("Z") else v)
        except ValueError:
            return None
        if d.tzinfo is None:
            d = d.replace(tzinfo=timezone.utc)
        t = d.timestamp()
        return t if _FIRST <= t < _END else None
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e11:  # NaN fails the range too
        return float(v)  # epochs outside year 1970..5138 are not times
    return None


class Ctx(Protocol):
    """What a rule may read of one detect call (``projections.runs.fold._Ctx``): the tick's snapshot and
    the folded runs, the tick's time, a cache for cross-run indexes, and the steps of any run."""

    snap: Any
    runs: dict[str, dict]
    now: float
    cache: dict[Any, Any]

    def doc(self, run: str) -> dict | None: ...

    def view(self, run: str) -> dict | None: ...

    def step_of(self, run: str, step: str) -> tuple[str, float | None, dict]: ...

    def tainted(self, run: str) -> bool: ...


class Change(NamedTuple):
    """One step's change in this tick, as every rule reads it (``projections.runs.fold`` makes them)."""

    step: str
    prev: str | None      # the status before this tick (None: the step was never seen)
    status: str           # "" = removed from steps.json
    at: str | None
    t: float | None       # ``at`` as epoch seconds
    data: dict            # the rule-relevant data
    reason: str
    attempt: int          # the step's attempt number after this change
    new: bool             # this change starts a new attempt
    rec: dict | None      # the step's folded record before this tick (None: never seen)


class Rule(str, Enum):
    """Rule names are part of the contract: never rename."""

    UPLOAD_INTENT_EVIDENCE = "upload-intent-evidence"
    SINGLE_OPEN_INTENT = "single-open-intent"
    LAUNCH_REQUEST_ID = "launch-request-id"
    DEPLOY_GATE = "deploy-gate"
    AUDIT_BRANCH = "audit-branch"
    NO_REDO = "no-redo"
    RETRY_BACKOFF = "retry-backoff"
    RECONCILED_NO_REUPLOAD = "reconciled-no-reupload"
    LAUNCH_REQUEST_STABLE = "launch-request-stable"
    UPLOAD_NEEDS_AUDIT = "upload-needs-audit"
    BOARD_DAILY_QUOTA = "board-daily-quota"
    DUPLICATE_UPLOAD = "duplicate-upload"
    SESSION_CONCURRENCY = "session-concurrency"
    SESSION_DAILY_CAP = "session-daily-cap"
    INACTIVE_BOARD = "inactive-board"


def reconciled(data: dict) -> str:
    """``data.reconciled`` by value: "yes", "no", or "" (absent or any other value)."""
    v = data.get("reconciled")
    if v is True:
        return "yes"
    if isinstance(v, str) and v.strip().lower() in ("yes", "no"):
        return v.strip().lower()
    return ""


def present(v: Any) -> bool:
    """An id is there: a non-blank text or an integer."""
    return (isinstance(v, str) and v.strip() != "") or (isinstance(v, int) and not isinstance(v, bool))


def intents_index(ctx: Ctx) -> list[tuple[int, float, str]]:
    """Open upload intents of every known run, earliest first: (seen before this tick? 0 : 1,
    at, run). Open = upload_intent present, not reconciled, upload_confirmed not done. Once per
    tick (``ctx.cache``)."""
    if "intents" in ctx.cache:
        return ctx.cache["intents"]
    out = ctx.cache["intents"] = []
    for run in set(ctx.snap.runs) | set(ctx.runs):
        st, t, data = ctx.step_of(run, "upload_intent")
        if st not in ("begin", "done", "fail") or reconciled(data):
            continue
        if ctx.step_of(run, "upload_confirmed")[0] == "done":
            continue
        rs = ctx.runs.get(run)
        known = rs is not None and rs["steps"].get("upload_intent", {}).get("status")
        out.append((0 if known else 1, t if t is not None else math.inf, run))
    out.sort()
    return out


class Look(NamedTuple):
    """One step's change as a step rule reads it: the run, its fields and step view, the detect
    context, the run's folded record (None: never seen), the change, and whether
    ``audit-branch`` already fired for it (``upload-needs-audit`` then stays silent)."""

    rid: str
    fields: dict
    view: dict
    ctx: Ctx
    rs: dict | None
    ch: Change
    branch: bool


def _audit_branch(lk: Look) -> str:
    """A gated step begins (or launch_intent's ``data.continue_from`` changes) while the run is held
    to the audit branch: its branch is diagnose_only, its audit verdict fail or review or tainted,
    or it continues from a tainted run. A run's ``continue_from`` holds every gated step;
    launch_intent's ``data.continue_from`` holds that launch."""
    ch, view = lk.ch, lk.view
    cf_new = ch.step == "launch_intent" and ch.data.get("continue_from") != \
        (ch.rec["data"] if ch.rec else {}).get("continue_from")
    if ch.step not in GATED or not (ch.new or cf_new):
        return ""
    why = []
    if lk.fields.get("branch") == "diagnose_only":
        why.append("branch is diagnose_only")
    a = view.get("audit")
    data = a[3] if a else {}
    if data.get("verdict") in ("fail", "review"):
        why.append(f"audit verdict is {data['verdict']}")
    if data.get("tainted"):
        why.append("audit is tainted")
    li = view.get("launch_intent") if ch.step == "launch_intent" else None
    cfs = (lk.fields.get("continue_from"), (li[3] if li else {}).get("continue_from"))
    for cf in dict.fromkeys(c for c in cfs if isinstance(c, str)):  # agent-written: any JSON value
        if cf and cf != lk.rid and lk.ctx.tainted(cf):
            why.append(f"it continues from tainted run {cf}")
    return f"{ch.step} began while {', '.join(why)}" if why else ""


def _launch_request_stable(lk: Look) -> str:
    """launch_intent carries another request_id than the run's first one ("" when stable)."""
    new = lk.ch.data.get("request_id")
    if lk.ch.step != "launch_intent" or not present(new):
        return ""
    old = (lk.rs or {}).get("launch_rid")
    if not present(old) and lk.ch.rec is not None:
        old = lk.ch.rec["data"].get("request_id")
    if present(old) and rid_key(old) != rid_key(new):
        return f"launch_intent retried with request_id {rid_key(new)!r}, first {rid_key(old)!r} (a retry keeps its id)"
    return ""


def _reconciled_no_reupload(lk: Look) -> str:
    ch, p = lk.ch, lk.ch.rec
    if ch.new and ch.step == "upload_intent" and p is not None and p["status"] in ("begin", "done", "fail") and \
            "yes" in (reconciled(p["data"]), reconciled(ch.data)):
        return (f"upload_intent began again (attempt {ch.attempt}) after reconciled: yes "
                "(found on the account page: never re-upload)")
    return ""


def _upload_needs_audit(lk: Look) -> str:
    """upload_intent begins without audit done with verdict pass ("" when it has one, or when
    ``audit-branch`` already fired for this change)."""
    if not lk.ch.new or lk.ch.step != "upload_intent" or lk.branch:
        return ""
    a = lk.view.get("audit")
    if a is None or a[0] == "":
        return "upload_intent began with no audit"
    if a[0] != "done":
        return f"upload_intent began while audit is {a[0]} (done with verdict pass required)"
    v = a[3].get("verdict")
    if v != "pass":
        return f"upload_intent began after audit verdict {str(v)[:32] if v is not None else 'missing'} (pass required)"
    return ""


def _no_redo(lk: Look) -> str:
    ch, p = lk.ch, lk.ch.rec
    if ch.new and p is not None and (p["done"] or ch.prev == "done"):
        return f"{ch.step} was done and began again (attempt {ch.attempt})"
    return ""


def _single_open_intent(lk: Look) -> str:
    """upload_intent begins while an earlier upload intent (this run's, or another run's that began
    earlier) is still open ("" when none)."""
    ch, p = lk.ch, lk.ch.rec
    if not ch.new or ch.step != "upload_intent":
        return ""
    if p is not None and p["status"] in ("begin", "done", "fail"):
        confirmed = lk.view.get("upload_confirmed", ("",))[0] == "done" or (
            lk.rs is not None and lk.rs["steps"].get("upload_confirmed", {}).get("status") == "done")
        if not confirmed and not reconciled(p["data"]) and not reconciled(ch.data):
            return "an earlier upload_intent of this run was neither confirmed nor reconciled"
    ours = (1, ch.t if ch.t is not None else math.inf, lk.rid)
    for key in intents_index(lk.ctx):
        if key >= ours:
            break
        if key[2] != lk.rid:
            return f"run {key[2]} has an open upload_intent (no upload_confirmed, not reconciled)"
    return ""


def _deploy_gate(lk: Look) -> str:
    """launch_intent began before validate and deploy were both done ("" when the gate held)."""
    ch, view = lk.ch, lk.view
    if not ch.new or ch.step != "launch_intent":
        return ""
    missing = [s for s in ("validate", "deploy") if s not in view or view[s][0] != "done"]
    if missing:
        return "launch_intent began before " + " and ".join(missing) + " done"
    if ch.status == "begin" and ch.t is not None:
        late = [s for s in ("validate", "deploy") if view[s][2] is not None and view[s][2] > ch.t]
        if late:
            return "launch_intent began before " + " and ".join(late) + " was done (by at)"
    return ""


def _upload_intent_evidence(lk: Look) -> str:
    data = lk.ch.data
    if lk.ch.step != "upload_intent":
        return ""
    sha = data.get("sha256")
    miss = [m for m, ok in (("a 64-hex data.sha256", isinstance(sha, str) and SHA256.fullmatch(sha) is not None),
                            ("data.candidate", present(data.get("candidate")))) if not ok]
    return "upload_intent lacks " + " and ".join(miss) if miss else ""


def _launch_request_id(lk: Look) -> str:
    if lk.ch.step == "launch_intent" and not present(lk.ch.data.get("request_id")):
        return "launch_intent has no data.request_id"
    return ""


# The step rules, one function each keyed by its rule, tried in this order for every change of a
# step (a rule answers what it found, "" for nothing); the order is the order of their events
STEP_RULES: dict[Rule, Callable[[Look], str]] = {
    Rule.AUDIT_BRANCH: _audit_branch,
    Rule.LAUNCH_REQUEST_STABLE: _launch_request_stable,
    Rule.RECONCILED_NO_REUPLOAD: _reconciled_no_reupload,
    Rule.UPLOAD_NEEDS_AUDIT: _upload_needs_audit,
    Rule.NO_REDO: _no_redo,
    Rule.SINGLE_OPEN_INTENT: _single_open_intent,
    Rule.DEPLOY_GATE: _deploy_gate,
    Rule.UPLOAD_INTENT_EVIDENCE: _upload_intent_evidence,
    Rule.LAUNCH_REQUEST_ID: _launch_request_id,
}


def check_step_rules(rid: str, fields: dict, view: dict, changes: list[Change], ctx: Ctx) -> list:
    """Step rules (:data:`STEP_RULES`) for this tick's changes (:class:`Change` rows) of one run:
    ``(Rule, step, key, detail)``, the key ``rule:step#attempt`` (``launch-request-stable``: and
    the request id)."""
    out = []
    rs = ctx.runs.get(rid)
    for ch in changes:
        if ch.status == "":
            continue
        lk = Look(rid, fields, view, ctx, rs, ch, False)
        for rule, check in STEP_RULES.items():
            detail = check(lk)
            if not detail:
                continue
            key = f"{rule.value}:{ch.step}#{ch.attempt}"
            if rule is Rule.LAUNCH_REQUEST_STABLE:
                key = f"{key}:{rid_key(ch.data['request_id'])}"
            elif rule is Rule.AUDIT_BRANCH:
                lk = lk._replace(branch=True)
            out.append((rule, ch.step, key, detail))
    return out


def rid_key(v: Any) -> str:
    """A request id as the runs state keeps it: itself up to 64 characters, else its first 48
    and a digest of the whole (bounded, and two long ids that share a beginning stay apart)."""
    s = str(v)
    if len(s) <= 64:
        return s
    return f"{s[:48]}~{hashlib.sha256(s.encode('utf-8', 'surrogatepass')).hexdigest()[:15]}"


def check_retry(fields: dict, view: dict, changes: list[Change], rs: dict | None, now: float):
    """retry-backoff for the attempt after the run's latest failure, or None."""
    n = fields["failures"]
    if n < 1:
        return None
    lfa = fields["last_failure_at"]
    key = f"{Rule.RETRY_BACKOFF.value}:{n}@{lfa or '-'}"
    if rs is not None and key in rs["violations"]:
        return None
    lf = ts(lfa)
    ev, evstep = None, None
    if lf is not None:
        for name, (st, _, t, _, _) in view.items():
            if t is not None and t > lf and st not in ("fail", ""):
                if t > now + AHEAD_S:  # an `at` a day ahead of the clock (2099): there by now
                    t = now  # (within a day: the writer's clock, as L is; a skew is no retry)
                if ev is None or t < ev:
                    ev, evstep = t, name
    if rs is not None and rs["failures"] == n and rs["last_failure_at"] == lfa:
        for c in changes:  # a begin without `at` after the failure was recorded: started by now
            if c.new and c.status == "begin" and c.t is None and (ev is None or now < ev):
                ev, evstep = now, c.step
    if ev is None:
        return None
    if n >= MAX_FAILURES:
        return (Rule.RETRY_BACKOFF, evstep, key, f"attempt after failure {n} ({evstep} at {iso(ev)}): "
                f"no attempt is allowed after {MAX_FAILURES} failures")
    if lf is None:
        return None
    wait = BACKOFF_S * 2 ** (n - 1)
    if ev < lf + wait:
        return (Rule.RETRY_BACKOFF, evstep, key, f"attempt {n + 1} started by {iso(ev)} ({evstep}), "
                f"{(ev - lf) / 60:.1f} min after failure {n}; {wait / 60:.0f} min required")
    return None
