"""events.timefmt.iso: the text of an epoch time, byte for byte what strftime gives, with its
per-minute memo (a first tick formats every agent's last activity)."""
from __future__ import annotations

import random
import time

import pytest

from events import timefmt
from events.timefmt import iso, parse_iso


def _plain(ts: float) -> str:
    ms = int(round(ts * 1000))
    s, ms = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{ms:03d}Z"


def test_iso_minute_memo_gives_what_strftime_gives():
    rnd = random.Random(19)
    edges = [0.0, 59.9994, 59.9995, 59.9996, 60.0, -0.4, -61.5, 1e-9, 951782400.0, 253402300799.999]
    values = edges + [rnd.uniform(0, 4e9) for _ in range(20_000)] + \
        [rnd.uniform(1.7e9, 1.7e9 + 900) for _ in range(20_000)]
    for v in values:
        assert iso(v) == _plain(v), v
        assert abs(parse_iso(iso(v)) - v) <= 0.0006


def test_iso_minute_memo_stays_bounded():
    for m in range(timefmt.MINUTES * 2 + 7):
        iso(m * 60.0 + 1.5)
    assert len(timefmt._iso_minutes) <= timefmt.MINUTES


@pytest.mark.parametrize("bad", [1e20, float("inf")])
def test_iso_out_of_range_still_raises(bad):
    with pytest.raises((OverflowError, ValueError, OSError)):
        iso(bad)


def test_iso_tail_tables_are_the_formatted_text():
    """The "SS." and "mmmZ" tables (built by concatenation, cheap at import) are exactly what
    formatting each second and millisecond gives."""
    assert timefmt._SECONDS == tuple(f"{s:02d}." for s in range(60))
    assert timefmt._MILLIS == tuple(f"{m:03d}Z" for m in range(1000))
