"""Short human text shared by projections and the CLI (pure)."""
from __future__ import annotations


def age(seconds: float | None) -> str:
    """``42s``, ``7m``, ``3h05m``, ``2d``; ``-`` when unknown. Negative ages read as 0s."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d"


# ---- escaping what agents control ------------------------------------------------------------
# Agent ids, tasks, reasons, paths and phases come from files the agents write. Printed raw they
# could move the cursor, set the terminal title, clear the screen, reorder text (bidi overrides)
# or start a new line that forges a whole log line. ``safe`` renders every such character as a
# visible escape, so one value is always exactly one line of plain text.
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_BIDI_AND_FORMAT = frozenset(
    [0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D,
     0x202E, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF])


def _escaped(ch: str) -> str:
    """``ch``, or its visible escape when a terminal could act on it (or it is a backslash)."""
    o = ord(ch)
    if not (o < 0x20 or 0x7F <= o < 0xA0 or o in _BIDI_AND_FORMAT or ch == "\\" or 0xD800 <= o < 0xE000):
        return ch
    return _ESCAPES.get(ch) or (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")


def safe(value: object, limit: int | None = None) -> str:
    """``value`` as one line of inert text: C0/C1 controls (ESC, CR, LF, BEL…), DEL, bidi
    overrides, zero-width/format characters and lone surrogates (bytes of an argument or file
    name that is not UTF-8: stdout cannot encode them) become visible escapes (``\\x1b``,
    ``\\n``, ``\\u202e``, ``\\udcff``); backslashes are doubled so an escape cannot be faked.
    ``limit`` cuts the result (with ``…``) after escaping. Idempotent on already-safe ASCII text."""
    s = value if isinstance(value, str) else str(value)
    if s.isprintable() and s.isascii() and "\\" not in s:
        out = s
    else:
        out = "".join(map(_escaped, s))
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "…"
    return out


_JSON_TABLE = {o: f"\\u{o:04x}" for o in (*range(0x7F, 0xA0), *_BIDI_AND_FORMAT)}


def inert_json(text: str) -> str:
    """A JSON text with the characters JSON leaves raw and a terminal may act on (DEL, the C1
    controls such as U+009B CSI, bidi overrides, zero-width and format characters: those ``safe``
    escapes, bar the ones JSON escapes itself) written as ``\\uXXXX``. Every JSON reader decodes the
    same values (JSON's structure is ASCII, so such a character can only stand inside a string,
    where its escape means itself); `tail --json` read on a screen stays inert. Lone surrogates
    cannot reach here (the encoders refuse them)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return text.translate(_JSON_TABLE)


_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE = r"\\(?:([\\nrt])|x([0-9a-f]{2})|u([0-9a-f]{4}))"   # the escapes ``safe`` writes


def unescape(text: str) -> str | None:
    """The raw text whose ``safe`` form is ``text`` (an id as `status` or `tail` prints it), or
    None when ``text`` is no such form (a lone backslash, an unknown or uppercase escape). ``safe``
    is one-to-one, so this is its inverse: ``unescape(safe(x)) == x``."""
    if "\\" not in text:
        return text
    import re

    if "\\" in re.sub(_ESCAPE, "", text):   # a backslash that starts no escape
        return None
    raw = re.sub(_ESCAPE, lambda m: _UNESCAPES[m[1]] if m[1] else chr(int(m[2] or m[3], 16)), text)
    return raw if safe(raw) == text else None
