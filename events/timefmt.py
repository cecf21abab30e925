"""UTC time text for events: ``iso`` (epoch -> ISO-8601 with ms and ``Z``) and ``parse_iso``.

Pure (standard library only), so projections can import it without the store's apsw.
"""
from __future__ import annotations

import time as _time
from datetime import datetime, timezone
from functools import lru_cache

_iso_last: tuple[float, str] = (float("nan"), "")
_iso_minutes: dict[int, str] = {}  # epoch minute -> its "YYYY-MM-DDTHH:MM:" text (bounded: MINUTES)
MINUTES = 4096
# "SS." and "mmmZ" of every second and millisecond: the tail of a minute's text is two look-ups
# and one concatenation, cheaper than formatting "{sec:02d}.{ms:03d}Z" (a first tick formats one
# last activity per agent); the tables are built from digit strings by concatenation, cheaper at
# import (every CLI start) than formatting each entry
_DIGITS = "0123456789"
_SECONDS = tuple([a + b + "." for a in "012345" for b in _DIGITS])
_MILLIS = tuple([ab + c + "Z" for ab in [a + b for a in _DIGITS for b in _DIGITS] for c in _DIGITS])


def iso(ts: float | datetime) -> str:
    """UTC ISO-8601 with milliseconds and ``Z`` (the last answer is cached: appends of one tick
    share their ``now``; so is the text of each minute seen lately, whose seconds and milliseconds
    are then formatted alone: a first tick formats every agent's last activity, and ``strftime``
    took most of that)."""
    global _iso_last
    if isinstance(ts, datetime):
        ts = ts.timestamp()
    last = _iso_last
    if last[0] == ts:
        return last[1]
    ms = int(round(ts * 1000))
    s, ms = divmod(ms, 1000)
    m, sec = divmod(s, 60)  # POSIX time has no leap seconds: every minute is 60 s
    head = _iso_minutes.get(m)
    if head is None:
        t = _time.gmtime(m * 60)
        head = _time.strftime("%Y-%m-%dT%H:%M:", t)
        if t.tm_year < 1000:  # glibc's %Y gives year 1 as "1-01-01", which no ISO parser reads
            head = f"{t.tm_year:04d}" + head[head.index("-"):]
        if len(_iso_minutes) >= MINUTES:
            _iso_minutes.clear()
        _iso_minutes[m] = head
    out = head + _SECONDS[sec] + _MILLIS[ms]
    _iso_last = (ts, out)
    return out


@lru_cache(maxsize=4096)
def parse_iso(s: str) -> float:
    """The epoch seconds of an ISO-8601 text (memoised by value: a pure function, called per event
    by several folds, and the events of one append share their time)."""
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()


def log_time(s: str) -> float:
    """Epoch seconds of a log time (``YYYY-MM-DDTHH:MM:SS.mmmZ``, as :func:`iso` writes it): the
    minute's epoch (whole seconds, exact) plus the seconds; any other shape goes through
    :func:`parse_iso`. The report fold reads ``rec.time`` with it; ``events.records.check_time``
    refuses a row whose time it (or ``parse_iso``) cannot read."""
    if len(s) == 24 and s[23] == "Z":
        return datetime.fromisoformat(s[:16] + ":00+00:00").timestamp() + float(s[17:23])
    return parse_iso(s)
