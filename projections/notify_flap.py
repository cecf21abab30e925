"""Flap detection for the notify projection (pure): Nagios-style weighted percent state change.

The fold only appends ``class, time, seq`` to a flat per-subject list (``classes``: the last
HIST_KEEP = 41 entries, O(1) per event). The percent at each of the last 21 entries needs that
entry's 20 predecessors, which the 41 kept entries always hold, so :func:`entries` rebuilds the
exact per-entry percents on demand and :func:`flap_state` runs the hysteresis over them at
plan time. A caller that plans every tick keeps a :class:`FlapMemo` and passes it in (the
notifier does): then a plan looks again only at the subjects whose list changed, and extends
the percents of a list that only grew (times in order) by its new entries. Without one, every
call computes from the list (the same result: the memo is only a cache).
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any

HIST_N = 21                 # classes in the percent (20 transition slots)
HIST_KEEP = 2 * HIST_N - 1  # entries kept per subject: each of the last 21 has its 20 predecessors
FLAP_WINDOW = 3600.0        # only class changes this recent count toward the flap percent
_W = HIST_N - 2
_PCT = itemgetter(3)       # an entry's percent


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


class FlapMemo:
    """The per-subject results of :func:`entries` and the hysteresis summaries, kept by the caller
    from one plan to the next (``watcher.runtime.notifier.Notifier`` owns one). An entry is used
    only for the very list it was computed from (held here, so it is that object) while its
    length, first seq and last seq are unchanged: the fold only appends increasing seqs and trims
    the front, so those identify the content. Bounded: cleared beyond MAX subjects.
    Saves: the percents of every subject on every plan (the notifier plans each tick).

    A list that only grew (its old last seq still there) and whose times are in order is
    extended (:func:`_extended`): the percents of the new entries continue the running count
    kept with the entry, the old ones are kept. With times in order the count at an entry holds
    exactly the changes of its 20 predecessors within the hour whatever entry the count started
    from, so this is :func:`_entries` of the whole list (pinned by tests/test_notify_flap.py's
    differential tests); while a clock step back is in the list, it is computed anew.
    ``synthetic``: subject -> (episode start, last entry, cid, condition) of the FLAPPING
    condition the planner built from an entry (``projections.notify_plan.flap_conds``)."""

    MAX = 8192
    __slots__ = ("by_subject", "synthetic")

    def __init__(self) -> None:
        # subject -> [flat, len, first seq, last seq, entries, {(high, low): summary},
        #             running count (see _entries; empty until extended)]
        self.by_subject: dict[str, list] = {}
        self.synthetic: dict[str, tuple] = {}

    def entry(self, subject: str, flat: list) -> list:
        m = self.by_subject.get(subject)
        if m is not None and m[0] is flat and m[1] == len(flat) and m[2] == flat[2] and m[3] == flat[-1]:
            return m
        if m is not None and m[0] is flat:
            hist = _extended(m, flat)
            if hist is not None:
                m[1:6] = [len(flat), flat[2], flat[-1], hist, {}]
                return m
        if len(self.by_subject) >= self.MAX:
            self.by_subject.clear()
            self.synthetic.clear()
        m = self.by_subject[subject] = [flat, len(flat), flat[2], flat[-1], _entries(flat), {}]
        m.append([])
        return m


def _in_order(times: list) -> bool:
    return times == sorted(times)


def _extended(m: list, flat: list) -> list | None:
    """The entries of ``flat``, the memo entry ``m``'s list after appends (and the trims that
    keep it at HIST_KEEP), from ``m``'s entries and its running count (``m[6]``); None when it
    cannot be (times out of order, the old last entry gone or replaced, a short list trimmed)."""
    last = m[3]                        # the seq of the last entry computed
    n = len(flat) // 3
    k = next((i for i in range(n) if flat[3 * (n - 1 - i) + 2] <= last), n)   # entries appended since
    # (k == n: the index is -1, the newest seq, which is not ``last``). A trimmed front is fine
    # once every kept percent's 20 predecessors are in the list (the fold trims only a full
    # list); a list trimmed shorter than that (never by the fold) is recomputed. Times in order
    # over the whole list: every kept percent's window is in order, and there the running count
    # holds exactly its changes within the hour, whatever came before (also for the percents
    # kept from a list whose front, since trimmed, was out of order)
    if not (flat[3 * (n - 1 - k) + 2] == last and (n >= HIST_KEEP or flat[2] == m[2]) and _in_order(flat[1::3])):
        return None
    # the first time, a count started at the first new entry's 20th predecessor
    new = _entries(flat, m[6], n - k if m[6] else max(0, n - k - HIST_N + 1))
    return (m[4] + new[max(0, len(new) - k):])[-HIST_N:]


def entries(flat: list, subject: str = "", memo: FlapMemo | None = None) -> list[list[Any]]:
    """The last 21 ``[class, time, seq, percent]`` of a flat ``classes`` list (with a ``memo``:
    do not mutate the result)."""
    return _entries(flat) if memo is None else memo.entry(subject, flat)[4]


def _entries(flat: list, run: list | None = None, first: int = 0) -> list[list[Any]]:
    """The percent at each entry is :func:`flap_percent` at its time over it and its 20
    predecessors (times in log order; a clock stepping back only keeps a change counted a
    little longer), computed in one pass with a running sum. ``run`` = [number of the entry at
    position ``first``, class before it, counted changes, sum of their numbers]: the count to
    go on from (None or empty: a fresh one from position ``first``), advanced in place to the end
    of ``flat`` (unless None); the result is the last 21 entries from position ``first`` on."""
    out = []
    n0, prev, tr, total_i = run if run else (first, None, [], 0)   # (entries numbered from any start)
    # tr: counted changes (entry number, time), oldest first; total_i: sum of their entry numbers
    m = len(flat) // 3
    last = m - HIST_N
    for p in range(first, m):
        n = n0 + p - first
        cls, t = flat[3 * p], flat[3 * p + 1]
        if prev is not None and prev != cls:
            tr.append((n, t))
            total_i += n
        prev = cls
        lo, cut = n - HIST_N + 1, t - FLAP_WINDOW
        while tr and (tr[0][0] <= lo or tr[0][1] < cut):
            total_i -= tr.pop(0)[0]
        if p >= last:
            k = len(tr)
            # sum over counted changes of 0.75 + 0.5 * (slot - 1) / 19, slot = 20 - (n - i)
            total = 0.75 * k + 0.5 * (_W * k - n * k + total_i) / _W if k else 0.0
            out.append([cls, t, flat[3 * p + 2], round(100.0 * total / (HIST_N - 1), 2)])
    if run is not None:
        run[:] = [n0 + m - first, prev, tr, total_i]
    return out


def _summary(hist: list, high: float, low: float) -> tuple[float, list | None, float | None]:
    """(highest percent, entry that started the current episode or None, time of the last
    entry below ``low``): the hysteresis over the entries, independent of ``now``."""
    start = None
    last_low = None
    for e in hist:
        if start is None and e[3] >= high:
            start = e
        elif start is not None and e[3] < low:
            start = None
        if e[3] < low and (last_low is None or e[1] > last_low):
            last_low = e[1]
    return max(map(_PCT, hist)), start, last_low


def flap_state(flat: list, sent: list | None, now: float, policy: Any, subject: str = "",
               memo: FlapMemo | None = None) -> tuple[list | None, list, bool]:
    """(entry that started the current flapping episode or None, :func:`entries`, notified?).

    Hysteresis over the percent at each class change: flapping starts when it reaches
    ``flap_high`` and ends when it falls below ``flap_low`` (also checked at ``now``, so a
    subject that went quiet settles by time alone). ``sent`` = ``[cid, time]`` of the last
    flapping notice: it covers this episode unless the subject settled after it was sent.
    ``memo`` (with the ``subject`` the list belongs to): the caller's :class:`FlapMemo`."""
    if len(flat) < 24 or flat[-2] < now - FLAP_WINDOW:
        return None, [], False  # fewer than 8 classes, or nothing recent
    if memo is None:
        hist, summaries = _entries(flat), {}
    else:   # (the memo entry itself: this runs for every subject on every plan)
        m = memo.entry(subject, flat)
        hist, summaries = m[4], m[5]
    key = (policy.flap_high, policy.flap_low)
    summ = summaries.get(key)
    if summ is None:
        summ = summaries[key] = _summary(hist, *key)
    top, start, last_low = summ
    if top < policy.flap_high or start is None:
        return None, hist, False
    # the percent at ``now`` equals the one stored at the last change unless changes aged out
    pct = hist[-1][3] if hist[0][1] >= now - FLAP_WINDOW else flap_percent(hist, now)
    if pct < policy.flap_low:
        return None, hist, False
    return start, hist, sent is not None and (last_low is None or last_low <= sent[1])
