"""The report's figures from a report state (pure): stable JSON field names, percentiles, the
per-day series and the one-line "today" summary for the board and the phone page.

``figures(state, until)`` never changes ``state``: episodes still open at ``until`` (an agent
still in RECLAMA, a claim still unverified, a watcher still up) are added to the totals as open,
on copies. Durations are seconds (numbers), counts integers. Percentiles interpolate linearly
between closest ranks (p50 of 10, 20, 30 minutes is 20 minutes).
"""
from __future__ import annotations

import copy
from typing import Any

from projections.report import fold as report
from projections.classes import RECLAMA
from projections.text import age

SCHEMA = 1


def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` with linear interpolation; None if empty."""
    if not values:
        return None
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (pos - lo), 3)


def spread(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "total_s": round(sum(values), 3), "p50_s": quantile(values, 0.5),
            "p90_s": quantile(values, 0.9), "max_s": max(values) if values else None}


def _closed_at(state: dict, until: float) -> dict:
    """A copy of ``state`` with every open interval closed at ``until`` (as if it ended then),
    plus how many were open. While the watcher is stopped nothing is known: intervals end at its
    stop."""
    st = copy.deepcopy(state)
    if st["up_since"] is None and st.get("stopped_at") is not None:
        until = min(until, st["stopped_at"])
    open_reclama = sum(1 for a in st["agents"].values() if a["cls"] == RECLAMA)
    open_claims = 0
    for agent, a in list(st["agents"].items()):
        if a["claim"] is not None:
            open_claims += 1
            report.add(st, report.day_key(until), "unverified")
            a["claim"] = None
        if until > a["since"]:
            report.close_class(st, agent, a, until, a["cls"])
    if st["up_since"] is not None and until > st["up_since"]:
        report.book_uptime(st, st["up_since"], until)
    st["open"] = {"reclama": open_reclama, "claims": open_claims}
    return st


def _days(st: dict, since: float | None, until: float) -> list[dict[str, Any]]:
    """One row per day from the later of ``since`` and the log's first event (no day before it
    holds anything) to ``until``."""
    if st["first"] is None:   # an empty log: no day holds anything
        return []
    start = st["first"] if since is None else max(since, st["first"])
    first, last = int(start // report.DAY_S), int(until // report.DAY_S)
    out = []
    for d in range(first, last + 1):
        name = report.day_name(d)
        row = st["days"].get(name) or dict.fromkeys(report.DAY_FIELDS, 0)
        out.append({"day": name, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}})
    return out


def figures(state: dict[str, Any], until: float, since: float | None = None) -> dict[str, Any]:
    """Every figure of the report, JSON-ready (see the README's report section for the fields)."""
    st = _closed_at(state, until)
    days = _days(st, since, until)
    sm = st["samples"]
    tot = {k: sum(d[k] for d in days) for k in report.DAY_FIELDS}   # over the range
    n = {k: int(v) for k, v in tot.items()}
    stall_next: dict[str, dict[str, int]] = {"after_nudge": {}, "without_nudge": {}}
    for key, times in sorted(st["stall_next"].items()):
        kind, _, to = key.partition(":")
        stall_next["after_nudge" if kind == "nudged" else "without_nudge"][to] = times
    return {
        "schema": SCHEMA,
        "range": {"since": since if since is not None else st["first"], "until": until, "days": len(days)},
        "dod": {"met": n["met"], "failed": n["failed"], "unevaluable": n["unevaluable"], "claims": n["claims"],
                "false_done": n["false_done"], "caught_by_checks": n["caught_by_checks"],
                "false_done_rate": round(n["false_done"] / n["claims"], 4) if n["claims"] else None,
                "never_verified": n["unverified"], "open_claims": st["open"]["claims"],
                "claim_to_verdict": spread(sm["claim_verdict"]),
                "self_approvals_refused": st["self_refused"]},
        "load": {"pushes": n["pushes"], "items": n["items"],
                 "items_per_push": round(n["items"] / n["pushes"], 3) if n["pushes"] else None,
                 "pushes_by_hour": list(st["hours"]),
                 "reclama": {**spread(sm["reclama"]), "episodes": n["reclama"],
                             "agent_hours": round(tot["reclama_s"] / 3600.0, 3), "open": st["open"]["reclama"]},
                 "acks": n["acks"], "escalations": n["escalations"]},
        "stalls": {**spread(sm["stall"]), "episodes": n["stalls"], "nudges": n["nudges"], **stall_next},
        "agents": {a: {"seconds": {c: round(s, 3) for c, s in sorted(v["time"].items())},
                       "met": v["met"], "failed": v["failed"], "unevaluable": v["unevaluable"],
                       "claims": v["claims"]}
                   for a, v in sorted(st["per_agent"].items())},
        "runs": {"steps_done": n["steps_done"], "steps_failed": n["steps_failed"],
                 "violations": dict(sorted(st["rules"].items())), "retries": st["retries"],
                 "abandoned": st["abandoned"]},
        "missions": {"wps_done": n["wps_done"], "approvals": st["approvals"],
                     "approval_wait": spread(sm["approval"]), "circuit_opens": st["circuit_opens"],
                     "violations": dict(sorted(st["wp_rules"].items()))},
        "watcher": {"uptime_s": round(st["uptime_s"], 3), "starts": st["starts"], "restarts": st["restarts"],
                    "source_failures": dict(sorted(st["src_failures"].items())),
                    "source_down": spread(sm["source_failed"]), "sources_down_now": sorted(st["src_down"])},
        "days": days,
    }


def today_line(state: dict[str, Any], now: float) -> str:
    """``today: 3 DoD met, 1 failed · 5 pushes · waited on you 1h20m (2 now)`` — for the board's
    header and the phone page (UTC day of ``now``)."""
    st = _closed_at(state, now)
    d = st["days"].get(report.day_key(now)) or dict.fromkeys(report.DAY_FIELDS, 0)
    parts = [f"{d['met']} DoD met" + (f", {d['failed']} failed" if d["failed"] else ""),
             f"{d['pushes']} push" + ("" if d["pushes"] == 1 else "es"),
             f"waited on you {age(d['reclama_s'])}" + (f" ({st['open']['reclama']} now)" if st["open"]["reclama"] else "")]
    if d["false_done"]:
        parts.insert(1, f"{d['false_done']} false done")
    return "today: " + " · ".join(parts)
