"""An idle tick of a big fleet does little: no catch-up query on a log nobody wrote to
(watcher/runtime/walquiet.py), no agent judged again when the change hint is empty,
and a rolling resync of at most ``watch.resync_rate`` files a second.

Each was a measured cost of an idle 10,000-agent watcher (seventeenth session: an idle tick runs
cache-cold after its 2 s sleep, where an empty catch-up query took 3-10 ms of CPU, the memo
copies ~7 ms and each resync ``stat`` 20-37 us). Real files, real SQLite logs (a second
connection as the other writer), the watcher's own tick; the wall clock of ``Quiet`` is moved
where a test needs the WAL's last write to be old.
"""
from __future__ import annotations

import json
import math
import os
import time

import pytest

from events.errors import ConfigError
from events.log import EventLog
from events.types import DodVerdict
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.runtime.walquiet import FORCE_S, RACY_NS, Quiet

T0 = 1_800_000_000.0
LATER_NS = 5 * RACY_NS   # "now" as Quiet sees it: the WAL's last write is old


def _write(root, folder: str, doc: dict) -> str:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "goal.json.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, d / "goal.json")
    return str(d / "goal.json")


def _fleet(tmp_path, n: int = 20):
    root = tmp_path / "fleet"
    for i in range(n):
        _write(root, f"a{i:02d}", {"agent": f"a{i:02d}", "state": "busy", "dod_contract": "x",
                                   "last_activity": T0})
    db = str(tmp_path / "e.db")
    cfg = parse(f'[store]\npath = "{db}"\n[classify]\nstall_after = "1h"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    elog = EventLog(db)
    return root, Watcher(cfg, elog), elog


def _reads_of_events(elog: EventLog):
    """Statements on the watcher's connection that read the events table, from SQLite's trace."""
    seen: list[str] = []

    def trace(cursor, sql, bindings):
        if "FROM events" in sql:
            seen.append(sql)
        return True

    elog.db.exec_trace = trace
    return seen


def test_an_idle_tick_runs_no_catch_up_query_and_another_writers_event_is_still_folded(tmp_path):
    root, w, elog = _fleet(tmp_path)
    w.quiet = Quiet(elog.path, wall_ns=lambda: time.time_ns() + LATER_NS)
    w.tick(T0, True, None)                         # every agent classified, committed
    w.tick(T0 + 2, True, set())                    # our own commit moved the WAL: read once
    seen = _reads_of_events(elog)
    for k in range(3):
        w.tick(T0 + 4 + 2 * k, True, set())
    assert seen == []                              # three idle ticks, not one catch-up query
    other = EventLog(elog.path)                    # another writer's connection (as `ack` is)
    other.append([DodVerdict(agent="a03", verdict="met", verifier="ci", evidence="pytest: green")], T0 + 10)
    head = other.head()[0]
    other.close()
    w.tick(T0 + 12, True, set())
    assert any("FROM events" in s for s in seen)   # the WAL moved: the catch-up ran
    assert w.proj.seq == head                      # and folded the other writer's verdict
    assert w.proj["dod"]["agents"]["a03"]["verdict"]["verdict"] == "met"
    elog.close()


def test_a_wal_written_within_the_racy_window_is_read_every_time(tmp_path):
    """An mtime under RACY_NS old may be shared by a write still to come: never trusted."""
    _root, w, elog = _fleet(tmp_path, 3)
    w.tick(T0, True, None)
    q = Quiet(elog.path)                           # the real clock: the commit was just now
    assert q.maybe_changed() and q.maybe_changed()
    q = Quiet(elog.path, wall_ns=lambda: time.time_ns() + LATER_NS)
    assert q.maybe_changed() and not q.maybe_changed()
    elog.close()


def test_the_catch_up_query_runs_at_least_every_force_s(tmp_path):
    _root, w, elog = _fleet(tmp_path, 3)
    w.tick(T0, True, None)
    mono = [100.0]
    q = Quiet(elog.path, clock=lambda: mono[0], wall_ns=lambda: time.time_ns() + LATER_NS)
    assert q.maybe_changed() and not q.maybe_changed()
    mono[0] += FORCE_S - 1
    assert not q.maybe_changed()
    mono[0] += 2
    assert q.maybe_changed()                       # forced, whatever the file says
    assert not q.maybe_changed()
    elog.close()


def test_no_wal_file_means_read(tmp_path):
    q = Quiet(str(tmp_path / "nothing.db"), wall_ns=lambda: time.time_ns() + LATER_NS)
    assert q.maybe_changed() and q.maybe_changed()


def test_an_idle_tick_judges_no_agent_and_a_change_only_its_own(tmp_path):
    """An idle tick judges no agent, the fleet's or dod's (the schedulers' records of what each
    was last judged with stay the very same), and a changed file has only its own agent judged
    again."""
    root, w, elog = _fleet(tmp_path)
    w.tick(T0, True, None)
    w.tick(T0 + 2, True, set())
    s1, d1 = dict(w.fleet.sched.seen), dict(w.tickers["dod"].sched.seen)
    w.tick(T0 + 4, True, set())                    # nothing changed: nobody judged
    s2, d2 = dict(w.fleet.sched.seen), dict(w.tickers["dod"].sched.seen)
    assert s2.keys() == s1.keys() and all(s2[a] is s1[a] for a in s1)
    assert d2.keys() == d1.keys() and all(d2[a] is d1[a] for a in d1)
    p = _write(root, "a07", {"agent": "a07", "state": "waiting", "dod_contract": "x", "last_activity": T0 + 5})
    w.tick(T0 + 6, True, {p})
    s3, d3 = dict(w.fleet.sched.seen), dict(w.tickers["dod"].sched.seen)
    assert w.proj["fleet"]["agents"]["a07"]["class"] == "RECLAMA"
    assert [a for a in s1 if s3[a] is not s2[a]] == ["a07"]
    assert [a for a in d1 if d3[a] is not d2[a]] == ["a07"]
    assert s3["a07"][0].state == "waiting" and s2["a07"][0].state == "busy"
    elog.close()


def test_the_rolling_resync_stats_at_most_resync_rate_files_a_tick_and_still_finds_every_change(tmp_path):
    """``sweep_most`` (``fleetwatch run``: resync_rate x interval) bounds each full tick's slice;
    a change inotify never reported is then found within files / most full ticks."""
    root, w, elog = _fleet(tmp_path, 20)
    src = w.sources[0]
    w.sweep, w.sweep_most = 1.0, 3                 # "everything each tick", capped at 3 files
    t = T0
    w.tick(t, True, None)
    with open(root / "a13" / "goal.json", "r+") as f:   # in place, same inode, no report
        f.write(json.dumps({"agent": "a13", "state": "waiting", "dod_contract": "x", "last_activity": T0}).ljust(90))
    found, cursors = None, []
    for k in range(1, math.ceil(20 / 3) + 2):
        t += 2.0
        w.tick(t, True, set())
        cursors.append(src._cursor)
        if found is None and w.proj["fleet"]["agents"]["a13"]["class"] == "RECLAMA":
            found = k
    steps = [b - a for a, b in zip(cursors, cursors[1:]) if b > a]
    assert steps and max(steps) <= 3               # never more than 3 files a sweep
    assert found is not None and found <= math.ceil(20 / 3) + 1
    elog.close()


def test_resync_rate_is_checked_and_named(tmp_path):
    assert parse("").watch.resync_rate == 100
    assert parse("[watch]\nresync_rate = 5000\n").watch.resync_rate == 5000
    for bad in ("0", "-1", '"100"', "1.5", "true"):
        with pytest.raises(ConfigError, match="watch.resync_rate"):
            parse(f"[watch]\nresync_rate = {bad}\n")
