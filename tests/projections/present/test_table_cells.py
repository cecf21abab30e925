"""projections.present.tables.cell: its inline fast path (short printable ASCII without a backslash) gives
exactly what ``projections.text.safe`` gives, for hostile values too (escapes, newlines, bidi,
backslashes, non-str, empty, at and past the width)."""
from __future__ import annotations

import random

from projections.present.tables import cell
from projections.text import safe


def test_cell_is_safe_of_the_value_or_a_dash():
    rnd = random.Random(19)
    values: list[object] = [None, "", "abc", "a\\b", "x" * 60, "x" * 61, "é", "\x1b[31mred", "a\nb", "a\rb",
                            5, 3.5, "-", " sp ", "\u202eevil", "ok/ok", "\x7f", "\t"]
    values += ["".join(rnd.choice("ab\\\x1b\n é-\u200b\x07") for _ in range(rnd.randint(0, 70)))
               for _ in range(5000)]
    for v in values:
        for limit in (1, 12, 40, 60):
            assert cell(v, limit) == safe("-" if v in (None, "") else v, limit), (v, limit)
