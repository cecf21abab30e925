"""Flap detection for the notify projection (pure): Nagios-style weighted percent state change.

The fold only appends ``class, time, seq`` to a flat per-subject list (``classes``: the last
HIST_KEEP = 41 entries, O(1) per event). The percent at each of the last 21 entries needs that
entry's 20 predecessors, which the 41 kept entries always hold, so :func:`entries` rebuilds the
exact per-entry percents on demand and :func:`flap_state` runs the hysteresis over them at
plan time, from the list alone: nothing is kept between calls.
"""
from __future__ import annotations

from typing import Any

HIST_N = 21                 # classes in the percent (20 transition slots)
HIST_KEEP = 2 * HIST_N - 1  # entries kept per subject: each of the last 21 has its 20 predecessors
FLAP_WINDOW = 3600.0        # only class changes this recent count toward the flap percent
_W = HIST_N - 2


def flap_percent(hist: list, at: float) -> float:
    """Weighted percent state change over the last 21 classes up to ``at`` (``hist``: entries
    ``[class, time, ...]``): 20 transition slots weighted 0.75 (oldest) .. 1.25 (newest); a
    transition counts when the class differs and it happened within FLAP_WINDOW of ``at``."""
    h = [e for e in hist if e[1] <= at][-HIST_N:]
    total = 0.0
    n = len(h)
    for j in range(1, n):
        if h[j][0] != h[j - 1][0] and h[j][1] >= at - FLAP_WINDOW:
            slot = HIST_N - 1 - (n - 1 - j)  # newest transition -> slot 20
            total += 0.75 + 0.5 * (slot - 1) / (HIST_N - 2)
    return 100.0 * total / (HIST_N - 1)


def entries(flat: list) -> list[list[Any]]:
    """The last 21 ``[class, time, seq, percent]`` of a flat ``classes`` list. The percent at each
    entry is :func:`flap_percent` at its time over it and its 20 predecessors (times in log order;
    a clock stepping back only keeps a change counted a little longer), computed in one pass with
    a running sum."""
    out = []
    prev: Any = None
    tr: list[tuple[int, float]] = []   # counted changes (entry number, time), oldest first
    total_i = 0                        # the sum of their entry numbers
    m = len(flat) // 3
    last = m - HIST_N
    for n in range(m):
        cls, t = flat[3 * n], flat[3 * n + 1]
        if prev is not None and prev != cls:
            tr.append((n, t))
            total_i += n
        prev = cls
        lo, cut = n - HIST_N + 1, t - FLAP_WINDOW
        while tr and (tr[0][0] <= lo or tr[0][1] < cut):
            total_i -= tr.pop(0)[0]
        if n >= last:
            k = len(tr)
            # sum over counted changes of 0.75 + 0.5 * (slot - 1) / 19, slot = 20 - (n - i)
            total = 0.75 * k + 0.5 * (_W * k - n * k + total_i) / _W if k else 0.0
            out.append([cls, t, flat[3 * n + 2], round(100.0 * total / (HIST_N - 1), 2)])
    return out


def flap_state(flat: list, sent: list | None, now: float, policy: Any) -> tuple[list | None, list, bool]:
    """(entry that started the current flapping episode or None, :func:`entries`, notified?).

    Hysteresis over the percent at each class change: flapping starts when it reaches
    ``flap_high`` and ends when it falls below ``flap_low`` (also checked at ``now``, so a
    subject that went quiet settles by time alone). ``sent`` = ``[cid, time]`` of the last
    flapping notice: it covers this episode unless the subject settled after it was sent."""
    if len(flat) < 24 or flat[-2] < now - FLAP_WINDOW:
        return None, [], False  # fewer than 8 classes, or nothing recent
    hist = entries(flat)
    start: list | None = None        # the entry that started the current episode
    last_low: float | None = None    # the latest time of an entry below flap_low
    for e in hist:
        if start is None and e[3] >= policy.flap_high:
            start = e
        elif start is not None and e[3] < policy.flap_low:
            start = None
        if e[3] < policy.flap_low and (last_low is None or e[1] > last_low):
            last_low = e[1]
    if start is None:
        return None, hist, False
    # the percent at ``now`` equals the one stored at the last change unless changes aged out
    pct = hist[-1][3] if hist[0][1] >= now - FLAP_WINDOW else flap_percent(hist, now)
    if pct < policy.flap_low:
        return None, hist, False
    return start, hist, sent is not None and (last_low is None or last_low <= sent[1])
