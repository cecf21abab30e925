"""Terminal rendering of `status`, `summary` and `tail` lines (no typer: the fast start path and
the commands both call these functions).

Invariants
- Every cell and line is escaped with ``projections.text.safe`` (agent-controlled strings can
  never move the cursor or start a forged line); rich markup is never parsed from data (cells are
  ``Text`` objects) and rich's auto-highlighter is off (``RECLAMA:4`` is not painted as a number).
- Colours come from the one class table (``projections.classes``); rich honours ``NO_COLOR``.
- Event lines come from the one event renderer (``projections.render``).
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

from projections import classes
from projections.render import plain, record_segments
from projections.text import age as fmt_age
from projections.text import safe


def console(file: TextIO | None = None) -> Any:
    """A rich Console for humans: no highlighter, no markup from data, soft wrap."""
    from rich.console import Console

    return Console(file=file or sys.stdout, highlight=False, soft_wrap=True)


def _cell(v: Any, limit: int = 60) -> str:
    return safe("-" if v in (None, "") else v, limit)


def fleet_rows(doc: dict[str, Any]) -> list[list[str]]:
    """agent, class, for, state/phase, task, active (last activity age), target, DoD."""
    return [[_cell(a["agent"], 40), a["class"], fmt_age(a["age_s"]),
             f"{_cell(a.get('state'), 12)}/{_cell(a.get('phase'), 14)}", _cell(a.get("task"), 40),
             fmt_age(a.get("activity_age_s")), _cell(a.get("target"), 30), _cell(a["dod_status"], 12)]
            for a in doc["agents"]]


FLEET_HEAD = ["agent", "class", "for", "state/phase", "task", "active", "target", "DoD"]


def tables(doc: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every non-empty section, all cells escaped."""
    t = [("Fleet", FLEET_HEAD, fleet_rows(doc))]
    ms = doc["missions"].get("missions", {})
    if ms:
        t.append(("Missions", ["mission", "WPs", "by state", "runnable", "approval", "circuit", "flagged", "done"],
                  [[_cell(mid), str(m["wps"]), _cell(" ".join(f"{k}:{v}" for k, v in m["counts"].items())),
                    _cell(",".join(m["runnable"])), _cell(",".join(m["approval_required"])), _cell(m["circuit"]),
                    _cell(",".join(f["wp"] for f in m["flagged"])), "yes" if m["completed"] else "no"]
                   for mid, m in ms.items()]))
    gs = doc["swarms"].get("groups", {})
    if gs:
        t.append(("Swarms", ["group", "children", "queued", "running", "done", "failed", "killed", "timeout",
                             "settled", "flags"],
                  [[_cell(gid), str(g["children"]), *[str(g["counts"].get(s, 0)) for s in
                                                      ("queued", "running", "done", "failed", "killed", "timeout")],
                    "yes" if g["settled"] else "no", _cell(",".join(g["flags"]))] for gid, g in gs.items()]))
    runs = doc.get("runs") or []
    if isinstance(runs, list) and runs:
        t.append(("Runs", ["run", "branch", "progress", "at", "failures", "next retry", "violations"],
                  [[_cell(r.get("run")), _cell(r.get("branch")), _cell(r.get("progress")), _cell(r.get("current")),
                    str(r.get("failures", 0)), ("abandoned" if r.get("abandoned") else _cell(r.get("next_retry"))),
                    _cell(",".join(r.get("violations") or []))]
                   for r in runs if isinstance(r, dict) and not r.get("gone")]))
    if doc["sources"]:
        t.append(("Sources", ["source", "state", "since", "error"],
                  [[_cell(s["source"]), "FAILED" if s.get("failed") else "ok", _cell(s.get("since")),
                    _cell(s.get("error"), 120)] for s in doc["sources"]]))
    return [x for x in t if x[2]]


def headline(doc: dict[str, Any]) -> str:
    counts = " ".join(f"{c}:{n}" for c, n in doc["classes"].items() if n)
    return " · ".join(x for x in (f"fleet: {len(doc['agents'])} agent(s)", counts, f"log head {doc['head']}") if x)


def status_plain(doc: dict[str, Any]) -> str:
    """`status` for a pipe: aligned plain columns."""
    out = [headline(doc)]
    for title, head, rows in tables(doc):
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        out += ["", title, "  " + "  ".join(h.ljust(w[i]) for i, h in enumerate(head)).rstrip()]
        out += ["  " + "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    return "\n".join(out) + "\n"


def status_rich(doc: dict[str, Any], con: Any = None) -> None:
    """`status` on a terminal: tables with the class column coloured by the class table."""
    from rich.table import Table
    from rich.text import Text

    con = con or console()
    head = Text("fleet", style="bold")
    head.append(f": {len(doc['agents'])} agent(s) · ")
    for c, n in doc["classes"].items():
        if n:
            head.append(f"{c}:{n}", style=classes.COLOUR.get(c, ""))
            head.append(" ")
    head.append(f"· log head {doc['head']}")
    con.print(head)
    for title, hdr, rows in tables(doc):
        tb = Table(title=title, title_justify="left", highlight=False)
        for h in hdr:
            tb.add_column(h, overflow="fold")
        for r in rows:
            style = classes.COLOUR.get(r[1], "") if title == "Fleet" else ""
            tb.add_row(*(Text(c, style=style if i == 1 else "") for i, c in enumerate(r)))
        con.print(tb)


def summary_text(groups: list[tuple[str, list[str]]], fleet_size: int) -> str:
    """`summary` as plain lines: ``GROUP (n)`` then one escaped line per item."""
    if not groups:
        return f"all quiet: {fleet_size} agent(s), nothing needs you\n"
    out = []
    for g, lines in groups:
        out.append(f"{g} ({len(lines)})")
        out += [f"  {safe(line, 300)}" for line in lines]
    return "\n".join(out) + "\n"


def summary_rich(groups: list[tuple[str, list[str]]], fleet_size: int, con: Any = None) -> None:
    """`summary` on a terminal: group headings in their class colour (violations bold red)."""
    from rich.text import Text

    con = con or console()
    if not groups:
        con.print(Text(f"all quiet: {fleet_size} agent(s), nothing needs you", style="green"))
        return
    for g, lines in groups:
        style = classes.COLOUR.get(g) or ("bold red" if g in ("VIOLATIONS", "APPROVALS") else "bold")
        con.print(Text(f"{g} ({len(lines)})", style=style))
        for line in lines:
            con.print(Text(f"  {safe(line, 300)}"))


def tail_line(rec: Any, *, verbose: bool = False) -> str:
    """One plain `tail` line (pipes, the service log)."""
    return plain(record_segments(rec, verbose=verbose))


def tail_text(rec: Any, *, verbose: bool = False) -> Any:
    """One coloured `tail` line (a rich Text, never parsed as markup)."""
    from rich.text import Text

    return Text.assemble(*record_segments(rec, verbose=verbose))
