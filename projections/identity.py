"""Who is who: agent and verifier ids compared by identity, not spelling (pure).

``identity(s)`` is the key two ids must share to be the same party: NFKD (full-width ``ａ１`` is
``a1``) with every combining mark removed (``á`` and ``a`` + U+0301 are ``a``), common Cyrillic and
Greek homoglyphs mapped to the Latin letter they imitate (``а`` U+0430 is ``a``), casefolded (and
decomposed again: a casefold can add a mark), every whitespace, control and format character
removed (``a 1``, ``a\\t1``, ``a1`` + zero-width space are ``a1``), and any ``agent:`` prefix
dropped. The homoglyph map is a small skeleton of the confusables that pass for Latin letters in
ids; it does not map digits to letters (``l1`` and ``11`` stay apart). ``blank(s)``: nothing
visible in ``s``.
"""
from __future__ import annotations

import unicodedata

# uppercase and lowercase forms that render like a Latin letter (Unicode confusables, the subset
# seen in ids); applied before and after casefolding, so either case maps
_SKELETON = {
    # Cyrillic capitals
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T",
    "Х": "X", "У": "Y", "Ѕ": "S", "І": "I", "Ј": "J", "Ү": "Y", "Ԛ": "Q", "Ԝ": "W",
    # Cyrillic small
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s",
    "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ү": "y", "к": "k", "н": "h", "м": "m", "т": "t",
    "в": "b",
    # Greek capitals
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Greek small
    "α": "a", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "υ": "u", "χ": "x", "γ": "y",
}
_TABLE = str.maketrans(_SKELETON)
_INVISIBLE = ("Cc", "Cf", "Zs", "Zl", "Zp")
PREFIX = "agent:"


def _visible(s: str) -> str:
    return "".join(ch for ch in s if not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE)


def _unmarked(s: str) -> str:
    """NFKD without its combining marks (categories Mn, Mc, Me)."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", s) if unicodedata.category(ch)[0] != "M")


def identity(s: object) -> str:
    """The comparison key of an id ("" for a blank or non-string id)."""
    if not isinstance(s, str):
        return ""
    if s.isascii() and s.isprintable() and " " not in s:
        t = s.lower()   # the common id, same key: NFKC, the skeleton and _visible change no such text
        # (a speed path, kept: docs/bench.md, the tricks table)
    else:
        t = _visible(_unmarked(_unmarked(s).translate(_TABLE).casefold()).translate(_TABLE))
    while t.startswith(PREFIX):
        t = t[len(PREFIX):]
    return t


def same_identity(a: object, b: object) -> bool:
    """True when ``a`` and ``b`` name the same party (two blank ids never do)."""
    ia = identity(a)
    return ia != "" and ia == identity(b)


def blank(s: object) -> bool:
    """Nothing visible: empty, or only whitespace, control and format characters."""
    return not isinstance(s, str) or _visible(unicodedata.normalize("NFKC", s)) == ""
