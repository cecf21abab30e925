"""The one table of agent classes, in urgency order (a class's rank is its row: 0 needs the human
most, the contract's urgency order): each class's severity, label, colours, board glyph, place in
the termination machine and what makes it (pure).

Every reader takes the classes from here and no other module writes their names out (a test
fails on a class-name string literal elsewhere in the package); each ``ClassInfo`` column says
who reads it. The README's and the goal schema's text of the termination machine and the board's
legend are built from the table (``make readme``; tests/repo/test_classes_table.py checks them).
"""
# No `from __future__ import annotations` here: this module has a typing.NamedTuple (projections/__init__)

from enum import Enum
from typing import NamedTuple


class Cls(str, Enum):
    """The termination machine's classes (stable strings: they are in the log)."""

    RECLAMA = "RECLAMA"
    DICE_TERMINADO = "DICE_TERMINADO"
    ESTANCADO = "ESTANCADO"
    MAL_LANZADO = "MAL_LANZADO"
    TRABAJANDO = "TRABAJANDO"
    CERRADO = "CERRADO"


# each class's value as a plain str, for readers that compare recorded classes (a str compares
# with a str several times faster than with a ``Cls`` member)
RECLAMA: str = Cls.RECLAMA.value
DICE_TERMINADO: str = Cls.DICE_TERMINADO.value
ESTANCADO: str = Cls.ESTANCADO.value
MAL_LANZADO: str = Cls.MAL_LANZADO.value
TRABAJANDO: str = Cls.TRABAJANDO.value
CERRADO: str = Cls.CERRADO.value


class ClassInfo(NamedTuple):
    cls: Cls
    severity: str      # notify severity of entering this class ("" = no condition, not an attention class)
    label: str         # plural, for grouped push lines and summaries ("need you")
    colour: str        # rich style (status, summary, the board)
    web: str           # CSS colour on the phone pages ("" = the page's default)
    match: int         # the termination machine's order: classify's first matching rule wins
    push_label: str    # the title group of a push (projections.notify.msg.BUCKETS)
    glyph: str         # the board's mark, told apart without colour (one character, distinct)
    mono: str          # the board's emphasis with NO_COLOR ("" = none)
    when: str          # what makes it (the README's and the goal schema's table)


# in urgency order: a class's rank is its row (0 needs the human most)
TABLE: tuple[ClassInfo, ...] = (
    ClassInfo(Cls.RECLAMA, "urgent", "need you", "bold red", "#b00", 2, "need you", "!", "bold reverse",
              "`state` `waiting`, or `phase` `preguntando`/`bloqueado`: **needs you**"),
    ClassInfo(Cls.DICE_TERMINADO, "info", "claim done", "cyan", "#077", 3, "ready for review", "?", "bold",
              "`state` `idle` and `phase` `hecho`: claims done, a verifier must check"),
    ClassInfo(Cls.ESTANCADO, "warning", "stalled", "yellow", "#a60", 4, "stalled", "~", "italic",
              "`state` `idle`, phase not `hecho`, no activity for `[classify] stall_after` (15m)"),
    ClassInfo(Cls.MAL_LANZADO, "warning", "mislaunched", "magenta", "#a0a", 1, "mislaunched", "x", "underline",
              "unreadable, not JSON, not an object or a regular file, unknown `state`, no/empty `dod_contract`"),
    ClassInfo(Cls.TRABAJANDO, "", "working", "green", "", 5, "working", "·", "",
              "anything else (busy, or idle within `stall_after`)"),
    ClassInfo(Cls.CERRADO, "", "closed", "dim", "", 0, "closed", " ", "",
              "seen by no source any more, `ended`, or its tmux pane died"),
)

INFO: dict[str, ClassInfo] = {i.cls.value: i for i in TABLE}
ORDER: tuple[str, ...] = tuple(i.cls.value for i in TABLE)          # urgency order
RANK: dict[str, int] = {i.cls.value: n for n, i in enumerate(TABLE)}   # urgency: 0 = needs the human most
SEVERITY: dict[str, str] = {i.cls.value: i.severity for i in TABLE if i.severity}
COLOUR: dict[str, str] = {i.cls.value: i.colour for i in TABLE}
LABEL: dict[str, str] = {i.cls.value: i.label for i in TABLE}
WEB: dict[str, str] = {i.cls.value: i.web for i in TABLE if i.web}
GLYPH: dict[str, str] = {i.cls.value: i.glyph for i in TABLE}
MONO: dict[str, str] = {i.cls.value: i.mono for i in TABLE if i.mono}
NAMES: frozenset[str] = frozenset(ORDER)
ATTENTION: tuple[str, ...] = tuple(c for c in ORDER if c in SEVERITY)   # the classes that need the human
MATCH: tuple[Cls, ...] = tuple(i.cls for i in sorted(TABLE, key=lambda i: i.match))
# the contract's termination-machine table: as classify tries its rules, but CERRADO (no source
# sees the agent) last
MACHINE: tuple[ClassInfo, ...] = tuple(sorted(TABLE, key=lambda i: (i.cls is Cls.CERRADO, i.match)))


def rank(cls: str) -> int:
    """Urgency rank of ``cls`` (unknown classes sort last)."""
    return RANK.get(cls, len(TABLE))


def plain_colour(info: ClassInfo) -> str:
    """The colour's name without its emphasis ("bold red" -> "red")."""
    return info.colour.split()[-1]


def machine_markdown() -> str:
    """The README's table of the termination machine (docs/readme/03-goal.md, ``make readme``)."""
    rows = [f"| {i.cls.value} ({plain_colour(i)}) | {i.when} |" for i in MACHINE]
    return "\n".join(["| class | when |", "|---|---|", *rows]) + "\n"


def glyph_legend() -> str:
    """The README's legend of the board's glyphs (docs/readme/04-board.md, ``make readme``)."""
    return ", ".join(f"`{i.glyph}` {i.cls.value} {plain_colour(i)}" for i in TABLE if i.glyph.strip())


def machine_sentence() -> str:
    """The goal schema's one-line account of the machine (watcher/schema/goal.schema.json)."""
    live = [i for i in MACHINE if i.cls is not Cls.CERRADO]
    return " > ".join(f"{i.cls.value} ({i.when.replace('`', '').replace('*', '')})" for i in live)
