"""Terminal rendering of `status`, `summary` and `tail` lines (no typer: the fast start path and
the commands both call these functions).

Invariants
- Every cell and line is escaped with ``projections.text.safe`` (agent-controlled strings can
  never move the cursor or start a forged line); rich markup is never parsed from data (cells are
  ``Text`` objects) and rich's auto-highlighter is off (``RECLAMA:4`` is not painted as a number).
- Colours come from the one class table (``projections.classes``); rich honours ``NO_COLOR``.
- Event lines come from the one event renderer (``projections.present.render``).
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

from projections import classes
from projections.text import safe


def console(file: TextIO | None = None) -> Any:
    """A rich Console for humans: no highlighter, no markup from data, soft wrap."""
    from rich.console import Console

    return Console(file=file or sys.stdout, highlight=False, soft_wrap=True)


def headline(doc: dict[str, Any]) -> str:
    counts = " ".join(f"{c}:{n}" for c, n in doc["classes"].items() if n)
    return " · ".join(x for x in (f"fleet: {len(doc['agents'])} agent(s)", counts, f"log head {doc['head']}") if x)


def status_plain(doc: dict[str, Any]) -> str:
    """`status` for a pipe: aligned plain columns."""
    from projections.present.tables import tables  # here: `tail` renders no table

    out = [headline(doc)]
    for title, head, rows in tables(doc):
        _, fmt = _layout(head, rows)
        out += ["", title, (fmt % tuple(head)).rstrip()]
        out += [(fmt % tuple(r)).rstrip() for r in rows]
    return "\n".join(out) + "\n"


def _layout(head: list[str], rows: list[list[str]]) -> tuple[list[int], str]:
    """A section's column widths and its line format: each cell left-justified to its column's
    width ("%-Ns" of a str is its ljust(N)), one format per line: cheaper than joining ljusts."""
    w = [max(map(len, col)) for col in zip(head, *rows)]
    return w, "  " + "  ".join(f"%-{n}s" for n in w)


RICH_ROWS = 200  # above this, aligned coloured columns: a rich Table measures every cell (5,000 agents: 4 s)


def status_rich(doc: dict[str, Any], con: Any = None) -> None:
    """`status` on a terminal: tables with the class column coloured by the class table; for more
    than ``RICH_ROWS`` agents the same columns as `status_plain`, coloured (~100x cheaper)."""
    from rich.table import Table
    from rich.text import Text

    from projections.present.tables import tables

    con = con or console()
    head = Text("fleet", style="bold")
    head.append(f": {len(doc['agents'])} agent(s) · ")
    for c, n in doc["classes"].items():
        if n:
            head.append(f"{c}:{n}", style=classes.COLOUR.get(c, ""))
            head.append(" ")
    head.append(f"· log head {doc['head']}")
    con.print(head)
    if len(doc["agents"]) > RICH_ROWS:
        con.print(_columns(tables(doc)))
        return
    for title, hdr, rows in tables(doc):
        tb = Table(title=title, title_justify="left", highlight=False)
        for h in hdr:
            tb.add_column(h, overflow="fold")
        for r in rows:
            style = classes.COLOUR.get(r[1], "") if title == "Fleet" else ""
            tb.add_row(*(Text(c, style=style if i == 1 else "") for i, c in enumerate(r)))
        con.print(tb)


def _columns(sections: list[tuple[str, list[str], list[list[str]]]]) -> Any:
    """The sections as one rich Text: `status_plain`'s aligned columns, the Fleet class cells in
    their class colour (every cell is already escaped: ``projections.present.tables``)."""
    from rich.text import Text

    out = Text()
    for title, hdr, rows in sections:
        w, fmt = _layout(hdr, rows)
        at, to = 4 + w[0], 4 + w[0] + w[1]  # where the class cell stands in each line
        out.append(f"\n{title}\n", style="bold")
        out.append((fmt % tuple(hdr)).rstrip() + "\n", style="bold")
        for r in rows:
            line = (fmt % tuple(r)).rstrip()
            style = classes.COLOUR.get(r[1], "") if title == "Fleet" else ""
            out.append(line[:at])
            out.append(line[at:to], style=style)
            out.append(line[to:] + "\n")
    out.rstrip()
    return out


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
    from projections.present.render import plain, record_segments  # here: `status` and `summary` print no event line

    return plain(record_segments(rec, verbose=verbose))


def tail_text(rec: Any, *, verbose: bool = False) -> Any:
    """One coloured `tail` line (a rich Text, never parsed as markup)."""
    from rich.text import Text

    from projections.present.render import record_segments

    return Text.assemble(*record_segments(rec, verbose=verbose))
