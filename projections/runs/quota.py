"""The outer loop's cross-run rules, as pure checks over one tick's changes of one run.

Each check sees every run the watcher knows (this tick's snapshot first, then the folded state)
through the detect context of ``projections.runs.fold`` and returns ``(Rule, step, key, detail)``
rows like ``projections.runs.rules``; the key makes each occurrence reported once.

- ``board-daily-quota``: more than ``board_daily_quota`` runs of one board (steps.json's
  top-level ``board``) with ``upload_confirmed`` done on one UTC day (the day of its ``at``).
  The confirmations are ranked by (at, run); each one past the quota is one violation.
- ``duplicate-upload``: an ``upload_intent`` begins with the (board, sha256) of another run's
  earlier upload that went through (upload_intent done, upload_confirmed done or reconciled yes).
- ``session-concurrency``: a run starts being in flight while another one is (concurrency 1).
  In flight: not gone, not ``work_complete``, under 3 failures, some step in ``begin``.
- ``session-daily-cap``: more than ``sessions_per_day`` runs started on one UTC day (a run starts
  at its earliest step ``at``, else when first seen); each run past the cap is one violation.
- ``inactive-board``: a ``launch_intent`` begins on a board listed in ``inactive_boards``.
"""
from __future__ import annotations

import math
from datetime import date
from typing import Any

from projections.runs.rules import MAX_FAILURES, SHA256, Change, Ctx, Rule, reconciled, ts

CONCURRENCY = 1
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def day(t: float | None) -> str:
    """The UTC date of an epoch ("" for None): whole days since 1970 (no strftime: slower)."""
    if t is None:
        return ""
    d = date.fromordinal(_EPOCH_ORDINAL + int(t // 86400))
    return f"{d.year}-{d.month:02d}-{d.day:02d}"  # as strftime("%Y-%m-%d"): year 1 is "1-01-01"


def board_of(ctx: Ctx, run: str) -> str | None:
    d = ctx.doc(run)
    if d is not None:
        b = d.get("board")
        return b if isinstance(b, str) and b else None
    r = ctx.runs.get(run)
    return r.get("board") if r else None


def _all_runs(ctx: Ctx) -> list[str]:
    return sorted(set(ctx.snap.runs) | set(ctx.runs))  # gone runs happened too


def in_flight_now(ctx: Ctx, run: str) -> bool:
    """In flight in this tick's view (snapshot, else state)."""
    d = ctx.doc(run)
    if d is None:
        o = ctx.snap.runs.get(run)
        r = ctx.runs.get(run)
        return o is not None and r is not None and in_flight_before(r)  # unreadable: last known
    if d.get("work_complete") is True:
        return False
    n = d.get("failures", 0)
    if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= MAX_FAILURES:
        return False
    steps = d.get("steps")
    return isinstance(steps, dict) and any(isinstance(e, dict) and e.get("status") == "begin" for e in steps.values())


def in_flight_before(r: dict | None) -> bool:
    """In flight in the folded state (before this tick)."""
    if r is None or r["gone"] or r["work_complete"] or r["failures"] >= MAX_FAILURES:
        return False
    return any(s["status"] == "begin" for s in r["steps"].values())


def _ats(ctx: Ctx, run: str, status: str | None = None) -> list[float]:
    """The ``at`` times of a run's steps (only those in ``status``, when given), snapshot else state."""
    v = ctx.view(run)
    if v is not None:
        ats = [e[2] for e in v.values() if status is None or e[0] == status]
    else:
        r = ctx.runs.get(run)
        ats = [ts(s["at"]) for s in (r["steps"].values() if r else ()) if status is None or s["status"] == status]
    return [t for t in ats if t is not None]


def _started(ctx: Ctx, run: str) -> float:
    """When a run started: its earliest step ``at``, else when first seen (else now)."""
    memo = ctx.cache.setdefault("started", {})
    if run not in memo:
        r = ctx.runs.get(run)
        memo[run] = min(_ats(ctx, run), default=(ts(r["first_seen"]) or ctx.now) if r else ctx.now)
    return memo[run]


def check_cross_run(rid: str, fields: dict, changes: list[Change], ctx: Ctx, board_daily_quota: int = 3,
                    sessions_per_day: int = 12, inactive_boards: tuple = ()) -> list:
    """The cross-run rules for this tick's changes of run ``rid`` (rows of runs_rules)."""
    out: list = []
    board = fields.get("board")
    rs = ctx.runs.get(rid)
    for c in changes:
        name, pst, st, at, t, data, _, n, new, p = c
        if name == "upload_confirmed" and st == "done" and (new or pst != "done") and board and board_daily_quota > 0:
            d: Any = _quota(ctx, rid, board, t, board_daily_quota)
            if d:
                out.append((Rule.BOARD_DAILY_QUOTA, name, f"{Rule.BOARD_DAILY_QUOTA.value}:{d[0]}", d[1]))
        if name == "upload_intent" and new and board:
            d = _duplicate(ctx, rid, board, t, data)
            if d:
                out.append((Rule.DUPLICATE_UPLOAD, name, f"{Rule.DUPLICATE_UPLOAD.value}:{name}#{n}", d))
        if name == "launch_intent" and new and board and board in inactive_boards:
            out.append((Rule.INACTIVE_BOARD, name, f"{Rule.INACTIVE_BOARD.value}:{name}#{n}",
                        f"launch_intent began on board {board}, listed in [steps] inactive_boards"))
    begins = [c for c in changes if c.new and c.status == "begin"]
    if begins and not in_flight_before(rs) and in_flight_now(ctx, rid):
        d = _concurrent(ctx, rid)
        if d:
            c = begins[0]
            out.append((Rule.SESSION_CONCURRENCY, c.step, f"{Rule.SESSION_CONCURRENCY.value}:{c.step}#{c.attempt}", d))
    if rs is None and sessions_per_day > 0:
        d = _daily_cap(ctx, rid, sessions_per_day)
        if d:
            out.append((Rule.SESSION_DAILY_CAP, None, f"{Rule.SESSION_DAILY_CAP.value}:{d[0]}", d[1]))
    return out


def _quota(ctx: Ctx, rid: str, board: str, t: float | None, quota: int) -> tuple[str, str] | None:
    """(day, detail) when this confirmation is past the board's quota for its UTC day."""
    dy = day(t if t is not None else ctx.now)
    index = ctx.cache.get("confirmed")
    if index is None:  # (board, UTC day) -> {run: rank by (at, run)} of confirmed uploads, once per tick
        rows: dict[tuple[Any, str], list] = {}
        for run in _all_runs(ctx):
            b = board_of(ctx, run)
            st, t2, _ = ctx.step_of(run, "upload_confirmed") if b else ("", None, {})
            if st == "done":
                t2 = t2 if t2 is not None else ctx.now
                rows.setdefault((b, day(t2)), []).append((t2, run))
        index = ctx.cache["confirmed"] = {k: {r: i for i, (_, r) in enumerate(sorted(v))} for k, v in rows.items()}
    i = index.get((board, dy), {}).get(rid, -1)
    if i < quota:
        return None
    return dy, f"upload {i + 1} confirmed on board {board} on {dy} (UTC): the quota is {quota} a day"


def _uploaded(ctx: Ctx, run: str) -> tuple[str, float] | None:
    """(sha256, at) of a run's upload that went through, else None."""
    st, t, d = ctx.step_of(run, "upload_intent")
    sha = d.get("sha256")
    if not isinstance(sha, str) or SHA256.fullmatch(sha) is None:
        return None
    if st == "done" or reconciled(d) == "yes" or ctx.step_of(run, "upload_confirmed")[0] == "done":
        return sha.lower(), t if t is not None else math.inf
    return None


def _duplicate(ctx: Ctx, rid: str, board: str, t: float | None, data: dict) -> str:
    sha = data.get("sha256")
    if not isinstance(sha, str) or SHA256.fullmatch(sha) is None:
        return ""
    index: Any = ctx.cache.get("uploads")
    if index is None:  # (board, sha256) -> [(at, run)] of uploads that went through, once per tick
        index = ctx.cache["uploads"] = {}
        for run in _all_runs(ctx):
            u = _uploaded(ctx, run)
            b = board_of(ctx, run)
            if u is not None and b:
                index.setdefault((b, u[0]), []).append((u[1], run))
    ours = (t if t is not None else math.inf, rid)
    for at_, run in sorted(index.get((board, sha.lower()), [])):
        if run != rid and (at_, run) < ours:
            return f"sha256 {sha[:12]}… was already uploaded to board {board} by run {run}"
    return ""


def _flights(ctx: Ctx) -> tuple[list[str], dict[str, int], list[str]]:
    """(runs in flight now that already were before this tick, rank of the others by first begin,
    the others in that order)."""
    c = ctx.cache.get("flight")
    if c is None:
        old, new = [], []
        for run in _all_runs(ctx):
            if in_flight_now(ctx, run):
                if in_flight_before(ctx.runs.get(run)):
                    old.append(run)
                else:
                    new.append((min(_ats(ctx, run, "begin"), default=math.inf), run))
        order = [r for _, r in sorted(new)]
        c = ctx.cache["flight"] = (old, {r: i for i, r in enumerate(order)}, order)
    return c


def _concurrent(ctx: Ctx, rid: str) -> str:
    """Other runs in flight (since before this tick, or starting earlier in it) while ``rid`` starts."""
    old, rank, order = _flights(ctx)
    k = rank.get(rid, 0)
    earlier = order[:min(k, 3)]
    n = len(old) - (rid in old) + k
    if n + 1 <= CONCURRENCY:
        return ""
    shown = ([r for r in old[:4] if r != rid][:3] + earlier)[:3]
    more = f" (+{n - len(shown)})" if n > len(shown) else ""
    return f"{n + 1} outer-loop events in flight at once (at most {CONCURRENCY}): also {', '.join(shown)}{more}"


def _daily_cap(ctx: Ctx, rid: str, cap: int) -> tuple[str, str] | None:
    start = _started(ctx, rid)
    dy = day(start)
    key = ("daily", dy)
    ranked = ctx.cache.get(key)
    if ranked is None:
        rows = [(s, run) for run in _all_runs(ctx) for s in (_started(ctx, run),) if day(s) == dy]
        ranked = ctx.cache[key] = {r: i for i, (_, r) in enumerate(sorted(rows))}
    i = ranked.get(rid, -1)
    if i < cap:
        return None
    return dy, f"session {i + 1} on {dy} (UTC): at most {cap} outer-loop events a day"
