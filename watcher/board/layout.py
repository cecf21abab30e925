"""What the board draws, sized to the terminal (pure: rows of ``views.status_doc`` in, texts out).

One agent per line while the fleet fits the screen, else cells several to a line (``per_line``:
a cell at least ``CELL_MIN`` wide, two at 80 columns, so 30 agents fit 80×24). Either way every
agent shows, in this order of priority: its class (a glyph and the class name, coloured as the
README says; with NO_COLOR a distinct emphasis per class and the name spelled out), its id, its
time in class, its DoD status, its handling mark and what it needs (``views`` words for what it
waits for, else its reason); then, with room, its task and target. Columns that do not fit are
left out whole, never cut off the screen; a text longer than its column ends in ``…``.

Invariants: every string from the log goes through ``projections.text.safe`` (via ``cell``) and
into a ``Text`` (never parsed as markup); the header is one ``Text`` per line, each cut to the width
(it never wraps).
"""
from __future__ import annotations

from typing import Any

from rich.text import Text

from projections import classes
from projections.present.tables import cell, dod_cell
from projections.text import age as fmt_age
from projections.present.views import HANDLED_MARK, handled_words, waiting_for
from projections.fleet.waiting import words

CELL_MIN = 38      # a compact cell's least width (its padding aside): two cells in 80 columns
PAD = 2            # DataTable's padding around each cell
GLYPH = classes.GLYPH   # a glyph per class: told apart without colour too (the class table's)
SHORT = {c: c[:4] for c in classes.ORDER}   # RECL, DICE, ESTA, MAL_, TRAB, CERR
MONO = classes.MONO     # with NO_COLOR: an emphasis per attention class (the class table's)
DOD_SHORT: dict[str | None, str] = {"met": "met", "failed": "FAIL", "unevaluable": "unev", "pending": "pend",
                                     "claimed": "clmd", "self-approved": "SELF"}


# the class table's colour names as exact colours: Textual maps ANSI names through its theme, where
# red and magenta came out as one colour (MAL_LANZADO looked like RECLAMA)
HEX = {"red": "#ff5f5f", "cyan": "#5fd7d7", "yellow": "#d7af00", "magenta": "#d787ff", "green": "#5faf5f"}


def class_style(cls: str, mono: bool) -> str:
    """The class's style: its colour from the class table (as an exact colour), or with NO_COLOR
    its emphasis (``MONO``)."""
    if mono:
        return MONO.get(cls, "")
    return " ".join(HEX.get(w, w) for w in classes.COLOUR.get(cls, "").split())


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters (``…`` last when cut)."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


TERSE = {"permission": "perm", "question": "question", "dialog": "dialog", "input": "input", "blocked": "blocked"}


def need(a: dict[str, Any], terse: bool = False) -> str:
    """What the agent needs, in words: what a RECLAMA agent waits for, else its reason
    (``terse``: ``perm Bash`` for ``waiting for permission: Bash``, for a cell)."""
    w = a.get("waiting_for") if "waiting_for" in a else waiting_for(a)
    if terse and isinstance(w, dict) and w.get("kind") in TERSE:
        return TERSE[w["kind"]] + (f" {w['tool']}" if isinstance(w.get("tool"), str) and w.get("tool") else "")
    said = words(w)
    if said:
        return said
    reason = a.get("reason") or ""
    return "" if reason == a.get("state") else reason   # "busy" for a busy agent says nothing


def handled_mark(a: dict[str, Any], now: float, long: bool) -> str:
    """``✓ acked by web:phone`` (long) or ``✓ack`` (short); "" when nobody handled it."""
    h = a.get("handled")
    if not h:
        return ""
    mark = HANDLED_MARK.get(h.get("how"), "?")
    return f"{mark} {handled_words(h, now)}" if long else f"{mark}{h.get('how', '?')[:3]}"


# ---- one agent per line ---------------------------------------------------------------------
# (key, header, least width, most width): in priority order; "need" takes what is left
COLUMNS = (("mark", "", 1, 1), ("agent", "agent", 5, 24), ("class", "class", 14, 14), ("for", "for", 5, 5),
           ("dod", "DoD", 7, 22), ("handled", "handled", 7, 24), ("need", "needs / reason", 12, 60),
           ("task", "task", 10, 60), ("target", "target", 9, 20))
# the room left, shared out in rounds: (column, up to this width)
ROOM = (("dod", 9), ("handled", 14), ("need", 30), ("target", 10), ("task", 30), ("need", 40), ("task", 60),
        ("target", 20), ("dod", 22), ("handled", 24), ("need", 60))


def columns(width: int, longest_id: int = 8) -> list[tuple[str, str, int]]:
    """(key, header, width) of the columns that fit ``width``: in priority order at their least
    width (the agent column as wide as the longest id shown, up to 24), then the room left shared
    out (``need`` first, then task, target and the rest)."""
    chosen: list[list[Any]] = []
    used = 0
    for key, head, least, most in COLUMNS:
        if key == "agent":
            least = most = max(least, min(most, longest_id))
        if used + least + PAD > width:
            break
        chosen.append([key, head, least, most])
        used += least + PAD
    room = width - used
    for key, upto in ROOM:
        for c in chosen:
            if c[0] == key and room > 0:
                more = max(0, min(room, min(upto, c[3]) - c[2]))
                c[2] += more
                room -= more
    return [(k, h, w) for k, h, w, _ in chosen]


def row_cells(a: dict[str, Any], cols: list[tuple[str, str, int]], now: float, mono: bool) -> list[Text]:
    """One agent as the cells of ``cols``."""
    style = class_style(a["class"], mono)
    out = []
    for key, _, w in cols:
        if key == "mark":
            out.append(Text(GLYPH.get(a["class"], "?"), style=style))
        elif key == "agent":
            out.append(Text(fit(cell(a["agent"], 80), w), style="bold" if classes.rank(a["class"]) == 0 else ""))
        elif key == "class":
            out.append(Text(fit(cell(a["class"], 20), w), style=style))
        elif key == "for":  # "≈": at a hub, as of the last time its host was heard (stale)
            out.append(Text(("≈" if a.get("stale") else "") + fmt_age(a.get("age_s")), style="dim" if a.get("stale") else ""))
        elif key == "dod":
            out.append(Text(fit(cell(dod_cell(a), 80), w), style=_dod_style(a)))
        elif key == "handled":
            out.append(Text(fit(cell(handled_mark(a, now, True), 80), w), style="dim"))
        elif key == "need":
            out.append(Text(fit(cell(need(a), 200), w)))
        elif key == "task":
            out.append(Text(fit(cell(a.get("task"), 200), w)))
        elif key == "target":
            out.append(Text(fit(cell(a.get("target"), 80), w)))
    return out


def _dod_style(a: dict[str, Any]) -> str:
    st = a.get("dod_status")
    return "bold" if st == "failed" else "dim" if st == "pending" else ""


# ---- several agents per line ----------------------------------------------------------------
def per_line(width: int) -> int:
    return max(1, width // (CELL_MIN + PAD))


def cell_width(width: int) -> int:
    return max(10, width // per_line(width) - PAD)


def tile(a: dict[str, Any], width: int, now: float, mono: bool, idw: int = 8) -> Text:
    """``! a07 RECL  12m pend ✓ perm Bash``: glyph, id (``idw`` wide), class, time in class, DoD,
    handling mark (blank when unhandled) and what it needs, in ``width`` characters."""
    style = class_style(a["class"], mono)
    t = Text()
    t.append(GLYPH.get(a["class"], "?"), style=style)
    t.append(" ")
    t.append(f"{fit(cell(a['agent'], 80), idw):<{idw}}", style="bold" if classes.rank(a["class"]) == 0 else "")
    t.append(" ")
    t.append(SHORT.get(a["class"], fit(cell(a["class"], 20), 4)), style=style)
    t.append(f" {('≈' if a.get('stale') else '') + fmt_age(a.get('age_s')):>4} ", style="dim" if a.get("stale") else "")
    t.append(f"{DOD_SHORT.get(a.get('dod_status'), fit(cell(a.get('dod_status'), 20), 4)):<4}", style=_dod_style(a))
    h = a.get("handled")
    t.append(f" {HANDLED_MARK.get(h.get('how'), '?') if h else ' '} ", style="bold")
    t.append(fit(cell(need(a, terse=True), 200), width - len(t.plain)))
    return t


def id_width(rows: list[dict[str, Any]], most: int) -> int:
    """The id column of cells: the longest id shown, at least 3, at most ``most``."""
    return max(3, min(most, max((len(cell(a["agent"], 80)) for a in rows), default=3)))


# ---- the header -------------------------------------------------------------------------------
def counts_line(doc: dict[str, Any], width: int, mono: bool) -> Text:
    """``fleetwatch 30 agents  RECLAMA 6 (2 handled) …``: class names in full when they fit,
    else their four letters; handled agents of a class counted apart. Cut to ``width``."""
    handled: dict[str, int] = {}
    for a in doc["agents"]:
        if a.get("handled"):
            handled[a["class"]] = handled.get(a["class"], 0) + 1
    live = sum(n for c, n in doc["classes"].items() if c != classes.CERRADO)
    for name in (lambda c: c, lambda c: SHORT.get(c, c)):
        t = Text("fleetwatch ", style="bold")
        t.append(f"{live} agents ")
        for c in classes.ORDER:
            n = doc["classes"].get(c, 0)
            if n:
                t.append(f" {name(c)} {n}", style=class_style(c, mono))
                if handled.get(c):
                    t.append(f" ({handled[c]} handled)", style="dim")
        if len(t.plain) <= width:
            return t
    t.truncate(width, overflow="ellipsis")
    return t


def cut(t: Text, width: int) -> Text:
    if len(t.plain) > width:
        t.truncate(max(1, width), overflow="ellipsis")
    return t
