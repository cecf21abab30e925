"""UTC time text for events: ``iso`` (epoch -> ISO-8601 with ms and ``Z``) and ``parse_iso``.

Pure (standard library only), so projections can import it without the store's apsw.
"""
from __future__ import annotations

import time as _time
from datetime import datetime, timezone
from functools import lru_cache

_iso_last: tuple[float, str] = (float("nan"), "")


def iso(ts: float | datetime) -> str:
    """UTC ISO-8601 with milliseconds and ``Z`` (the last answer is cached: appends of one tick
    share their ``now``)."""
    global _iso_last
    if isinstance(ts, datetime):
        ts = ts.timestamp()
    last = _iso_last
    if last[0] == ts:
        return last[1]
    ms = int(round(ts * 1000))
    s, ms = divmod(ms, 1000)
    out = _time.strftime("%Y-%m-%dT%H:%M:%S", _time.gmtime(s)) + f".{ms:03d}Z"
    _iso_last = (ts, out)
    return out


@lru_cache(maxsize=4096)
def parse_iso(s: str) -> float:
    """The epoch seconds of an ISO-8601 text (memoised by value: a pure function, called per event
    by several folds, and the events of one append share their time)."""
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()
