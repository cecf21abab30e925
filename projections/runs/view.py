"""The runs projection's read models: each run's row for ``status --json`` and the board
(``run_status``), the document (``status``) and the short lines of ``summary``. Pure reads of the
folded state (projections/runs/fold.py); re-exported there."""
from events.timefmt import iso
from projections.runs.parse import ORDER, POS, step_names
from projections.runs.rules import BACKOFF_S, MAX_FAILURES, ts


def next_retry(r: dict) -> float | None:
    """Earliest allowed start of the next attempt (None: no failure yet, unknown, or given up)."""
    n = r["failures"]
    lf = ts(r["last_failure_at"])
    if n < 1 or n >= MAX_FAILURES or lf is None:
        return None
    return lf + BACKOFF_S * 2 ** (n - 1)


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
    for rid, r in sorted(state["runs"].items()):
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
