"""A same-size rewrite of goal.json within one mtime tick (issue 47): the goals source compared
(inode, size, mtime) only, so where timestamps are coarse (whole seconds) an agent going from busy
to idle in place, within the second, was never seen. Real files, real stats, the real source."""
from __future__ import annotations

import json
import os
import time

from watcher.config import Source
from watcher.sources.files import GoalsSource


def _write_in_place(path, doc: dict, mtime_ns: int) -> None:
    """Same inode, same size, the same (whole-second) mtime: all the key can see."""
    raw = json.dumps(doc).encode()
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.write(raw)
        f.truncate()
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_same_size_rewrite_in_the_same_coarse_second_is_seen(tmp_path):
    d = tmp_path / "a1"
    d.mkdir()
    g = d / "goal.json"
    second = (time.time_ns() // 1_000_000_000 + 2) * 1_000_000_000   # whole seconds, as a coarse fs stamps
    _write_in_place(g, {"agent": "a1", "state": "busy", "dod_contract": "x"}, second)
    src = GoalsSource(Source(name="fleet", kind="goals", glob=f"{tmp_path}/*/goal.json"))
    first = src.poll(time.time())
    assert [a.state for a in first.agents] == ["busy"]
    ino = g.stat().st_ino
    _write_in_place(g, {"agent": "a1", "state": "idle", "dod_contract": "x"}, second)
    assert g.stat().st_ino == ino and g.stat().st_mtime_ns == second
    for _ in range(3):   # the next polls (each a full one: no inotify here)
        res = src.poll(time.time())
    assert [a.state for a in res.agents] == ["idle"]


def test_an_old_file_is_not_read_again(tmp_path):
    d = tmp_path / "a1"
    d.mkdir()
    g = d / "goal.json"
    old = (time.time_ns() // 1_000_000_000 - 3600) * 1_000_000_000
    _write_in_place(g, {"agent": "a1", "state": "busy", "dod_contract": "x"}, old)
    src = GoalsSource(Source(name="fleet", kind="goals", glob=f"{tmp_path}/*/goal.json"))
    src.poll(time.time())
    assert not src._suspects and not src.cache[str(g)].racy
