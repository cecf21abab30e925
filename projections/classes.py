"""The one table of agent classes: rank, severity, label and colour (pure).

Every reader — the fleet fold, notify, status, summary, sd_notify, the board, the demo — takes the
order and the meaning of the termination machine's classes from here; no other module writes the
list out. Rank 0 needs the human most (the contract's urgency order: RECLAMA, DICE_TERMINADO,
ESTANCADO, MAL_LANZADO, TRABAJANDO, CERRADO). Colours are rich style names: RECLAMA red,
ESTANCADO yellow, DICE_TERMINADO cyan, MAL_LANZADO magenta; TRABAJANDO green, CERRADO dim.
"""
# No `from __future__ import annotations` here: this module's typing.NamedTuple would compile each
# of its string field annotations (a ForwardRef each), and a process's first compile() builds
# CPython's AST types; `status` loads it, and five such modules were ~12 M instructions of its
# start (tests/test_cli_start.py: the fast paths compile nothing)

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


class ClassInfo(NamedTuple):
    cls: Cls
    rank: int          # 0 = needs the human most
    severity: str      # notify severity of entering this class ("" = no condition)
    label: str         # plural, for grouped push lines and summaries ("need you")
    colour: str        # rich style


TABLE: tuple[ClassInfo, ...] = (
    ClassInfo(Cls.RECLAMA, 0, "urgent", "need you", "bold red"),
    ClassInfo(Cls.DICE_TERMINADO, 1, "info", "claim done", "cyan"),
    ClassInfo(Cls.ESTANCADO, 2, "warning", "stalled", "yellow"),
    ClassInfo(Cls.MAL_LANZADO, 3, "warning", "mislaunched", "magenta"),
    ClassInfo(Cls.TRABAJANDO, 4, "", "working", "green"),
    ClassInfo(Cls.CERRADO, 5, "", "closed", "dim"),
)

INFO: dict[str, ClassInfo] = {i.cls.value: i for i in TABLE}
ORDER: tuple[str, ...] = tuple(i.cls.value for i in TABLE)          # urgency order
RANK: dict[str, int] = {i.cls.value: i.rank for i in TABLE}
SEVERITY: dict[str, str] = {i.cls.value: i.severity for i in TABLE if i.severity}
COLOUR: dict[str, str] = {i.cls.value: i.colour for i in TABLE}
LABEL: dict[str, str] = {i.cls.value: i.label for i in TABLE}
NAMES: frozenset[str] = frozenset(ORDER)


def rank(cls: str) -> int:
    """Urgency rank of ``cls`` (unknown classes sort last)."""
    return RANK.get(cls, len(TABLE))
