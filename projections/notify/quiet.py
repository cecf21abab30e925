"""Quiet hours (pure): is ``now`` inside a ``[notify] quiet`` window, and when does it end?

Windows are local wall-clock ranges ``"HH:MM-HH:MM"`` in the zone ``tz`` (a ``tzinfo`` the edge
builds from ``quiet_tz``, default the system zone); a window whose end is before its start runs
over midnight (``"22:00-07:00"``); ``24:00`` is the end of the day. Overlapping or adjacent
windows chain into one. The end is computed on the local calendar (so a DST change moves it by
the hour, as a person expects) and returned as epoch seconds.

The planner holds, with reason ``quiet``, every non-urgent item (and urgent ones too when
``quiet_urgent`` is false) while :func:`quiet_until` is not None, and wakes at its end, when
everything held goes out as one summary per destination.
"""
from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from enum import Enum


class QuietReason(str, Enum):
    HELD = "quiet"                      # recorded (notice.held, reason quiet), sent when quiet hours end
    HELD_RECORDED = "quiet-already-recorded"


def parse_window(w: str) -> tuple[int, int]:
    """``"22:00-07:00"`` -> (1320, 420) minutes after local midnight."""
    a, _, b = w.strip().partition("-")

    def mins(x: str) -> int:
        h, _, m = x.strip().partition(":")
        return int(h) * 60 + int(m)

    return mins(a), mins(b)


def _end_of(local: datetime, start: int, end: int) -> datetime | None:
    """The local end of the window containing ``local``, or None when outside it."""
    m = local.hour * 60 + local.minute
    day = local.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    if start == end:
        return None
    if start < end:
        return day + timedelta(minutes=end) if start <= m < end else None
    if m >= start:
        return day + timedelta(days=1, minutes=end)
    return day + timedelta(minutes=end) if m < end else None


def quiet_until(now: float, windows: tuple[str, ...] | list[str], tz: tzinfo | None) -> float | None:
    """Epoch seconds when the quiet period containing ``now`` ends, or None outside quiet hours."""
    if not windows:
        return None
    spans = [parse_window(w) for w in windows]
    t = now
    found: float | None = None
    for _ in range(len(spans) + 1):   # chain overlapping windows
        local = datetime.fromtimestamp(t, tz)
        ends = [e for e in (_end_of(local, a, b) for a, b in spans) if e is not None]
        if not ends:
            break
        end_local = max(ends)
        end = end_local.replace(tzinfo=tz).timestamp() if tz is not None else end_local.timestamp()
        if end <= t:  # a DST gap can make a local end land before t: do not loop
            break
        found = end
        t = end
    return found
