"""`status` and the board as tables of escaped cells (pure): (title, header, rows) per section.

Every cell goes through ``projections.text.safe`` (agent-controlled strings are inert) and is cut
to a width; the CLI prints them as plain columns or rich tables, the board as Textual tables.
"""
from __future__ import annotations

from typing import Any

from projections.text import age as fmt_age
from projections.text import safe
from projections.present.hub import time_of
from projections.present.views import HANDLED_MARK, handled_words
from projections.fleet.waiting import words


def cell(v: Any, limit: int = 60) -> str:
    """One escaped cell (``-`` for nothing). A short printable-ASCII text without a backslash is
    its own escape (``safe``'s fast path, taken here without the call: a table of N agents has
    8N cells)."""
    if type(v) is str and v and len(v) <= limit and v.isascii() and v.isprintable() and "\\" not in v:
        return v
    return "-" if v is None or v == "" else safe(v, limit)


def fleet_rows(doc: dict[str, Any]) -> list[list[str]]:
    """agent, class, for, state/phase (and what it waits for), task, active (last activity age),
    target, DoD, handled (its mark and how: ``views.handled_words``, as of the doc's time)."""
    t = time_of(doc.get("generated_at")) or 0.0
    return [[cell(a["agent"], 40), cell(a["class"], 20), fmt_age(a["age_s"]),
             f"{cell(a.get('state'), 12)}/{cell(a.get('phase'), 14)}"
             + (f" · {cell(words(a.get('waiting_for')), 50)}" if a.get("waiting_for") else ""),
             cell(a.get("task"), 40), fmt_age(a.get("activity_age_s")), cell(a.get("target"), 30),
             cell(dod_cell(a), 24),
             cell(f"{HANDLED_MARK.get(h['how'], '?')} {handled_words(h, t)}", 48) if (h := a.get("handled")) else "-"]
            for a in doc["agents"]]


FLEET_HEAD = ["agent", "class", "for", "state/phase", "task", "active", "target", "DoD", "handled"]


def tables(doc: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every non-empty section, all cells escaped."""
    t = [("Fleet", FLEET_HEAD, fleet_rows(doc))]
    ms = doc["missions"].get("missions", {})
    if ms:
        t.append(("Missions", ["mission", "WPs", "by state", "runnable", "approval", "circuit", "flagged", "done"],
                  [[cell(mid), str(m["wps"]), cell(" ".join(f"{k}:{v}" for k, v in m["counts"].items())),
                    cell(",".join(m["runnable"])), cell(",".join(m["approval_required"])), cell(m["circuit"]),
                    cell(",".join(f["wp"] for f in m["flagged"])), "yes" if m["completed"] else "no"]
                   for mid, m in ms.items()]))
    gs = doc["swarms"].get("groups", {})
    if gs:
        t.append(("Swarms", ["group", "children", "queued", "running", "done", "failed", "killed", "timeout",
                             "settled", "flags"],
                  [[cell(gid), str(g["children"]), *[str(g["counts"].get(s, 0)) for s in
                                                      ("queued", "running", "done", "failed", "killed", "timeout")],
                    "yes" if g["settled"] else "no", cell(",".join(g["flags"]))] for gid, g in gs.items()]))
    runs = doc.get("runs") or []
    if isinstance(runs, list) and runs:
        t.append(("Runs", ["run", "branch", "progress", "at", "failures", "next retry", "violations"],
                  [[cell(r.get("run")), cell(r.get("branch")), cell(r.get("progress")), cell(r.get("current")),
                    str(r.get("failures", 0)), ("abandoned" if r.get("abandoned") else cell(r.get("next_retry"))),
                    cell(",".join(r.get("violations") or []))]
                   for r in runs if isinstance(r, dict) and not r.get("gone")]))
    ps = doc.get("plans") or {}
    if ps:
        t.append(("Plans", ["plan", "task", "state", "agent", "waits on"],
                  [[cell(pid), cell(tk["id"]), tk["state"] + (" (plan stopped)" if p["stopped"] else ""),
                    cell(tk["agent"] or "-"), cell(",".join(tk["waits_on"]) or "-")]
                   for pid, p in ps.items() for tk in p["tasks"]]))
    if doc["sources"]:
        t.append(("Sources", ["source", "state", "since", "error"],
                  [[cell(s["source"]), "FAILED" if s.get("failed") else "ok", cell(s.get("since")),
                    cell(s.get("error"), 120)] for s in doc["sources"]]))
    return [x for x in t if x[2]]


def dod_cell(a: dict[str, Any]) -> str:
    """``failed (tests ✗ lint ✓)``: the DoD status, with the checker's per-check outcome."""
    checks = ((a.get("dod") or {}).get("checks")) or []
    if not checks:
        return a["dod_status"]
    mark = {"pass": "✓", "fail": "✗", "unevaluable": "?", "skipped": "-"}
    return a["dod_status"] + " (" + " ".join(f"{c['id']} {mark.get(c['status'], '?')}" for c in checks) + ")"
