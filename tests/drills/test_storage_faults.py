"""Storage faults against a real Watcher and a real SQLite log (virtual clock):

- disk full (``PRAGMA max_page_count`` on the watcher's own connection): the append fails with
  AppendFailed, the tick does not raise, the failure is logged (the local fallback channel),
  notifier records stay pending, level-based transitions are found again, and everything commits
  once space returns: nothing lost, nothing doubled;
- the log locked by a foreign process (another connection holding BEGIN IMMEDIATE): the append
  waits for the busy timeout, then reports AppendFailed; a lock released within the timeout
  costs nothing; after release everything commits.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time

import apsw
import pytest

from events.errors import AppendFailed
from events.log import BUSY_TIMEOUT_MS, EventLog
from events.types import NoticeSent
from watcher.config import parse
from watcher.runtime.loop import Watcher
from tests.support.vclock import written_at

T0 = 1_800_000_000.0


def goal(root, agent, **kw):
    g = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": f"tests for {agent}",
         "last_activity": T0}
    g.update(kw)
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    (d / "goal.json.tmp").write_text(json.dumps(g))
    written_at(d / "goal.json.tmp", g["last_activity"])  # on the virtual clock (tests/support/vclock.py)
    os.replace(d / "goal.json.tmp", d / "goal.json")


class OneNotice:
    """A stand-in notifier: hands back one (large) notice.sent record once, like a delivery the
    worker finished; records of this kind are not re-derivable and must be kept until committed."""

    def __init__(self):
        self.calls = 0

    def step(self, states, now):
        self.calls += 1
        if self.calls == 2:  # the tick after the first: the disk is full by then
            return [NoticeSent(notice="n-drill", covers=[1], title="x" * 20000, severity="urgent")]
        return []

    def next_wake(self, states, now):
        return None


def setup(tmp_path, n=40):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i in range(n):
        goal(fleet, f"a{i:02d}")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[classify]\nstall_after = "1000d"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    return fleet, cfg, EventLog(str(tmp_path / "e.db"), durability="normal")


def history(elog):
    per: dict[str, list[str]] = {}
    for r in elog.read(0, types=["agent.classified"]):
        per.setdefault(r.event.agent, []).append(r.event.to)
    return per


@pytest.mark.drill
def test_disk_full_keeps_transitions_and_commits_when_space_returns(tmp_path, caplog):
    fleet, cfg, elog = setup(tmp_path)
    notifier = OneNotice()
    w = Watcher(cfg, elog, notifier=notifier)
    w.tick(T0)
    head = elog.head()[0]
    db = w.log.db
    pages = db.execute("PRAGMA page_count").fetchall()[0][0]
    db.execute(f"PRAGMA max_page_count={pages}")         # the disk is full from now on
    caplog.set_level(logging.ERROR, logger="fleetwatch.watcher")
    w.tick(T0 + 1)                                        # the notice record cannot be written
    assert w.pending and isinstance(w.pending[0], NoticeSent)
    for i in range(40):                                   # every agent changes while full
        goal(fleet, f"a{i:02d}", state="waiting" if i % 2 else "idle", phase="hecho")
    with pytest.raises(AppendFailed):                     # the typed error, at the edge
        w.commit([], T0 + 2)
    for k in range(5):
        assert w.tick(T0 + 3 + k) == 0                    # no crash, nothing written
    assert elog.head()[0] == head
    assert len(w.pending) == 1                            # kept, not duplicated
    assert any("append failed" in r.getMessage() for r in caplog.records)  # the fallback channel
    db.execute("PRAGMA max_page_count=1073741823")        # space returns
    n = w.tick(T0 + 10)
    assert n == 41 and not w.pending
    per = history(elog)
    for i in range(40):
        assert per[f"a{i:02d}"] == ["TRABAJANDO", "RECLAMA" if i % 2 else "DICE_TERMINADO"]
    assert [r.event.notice for r in elog.read(0, types=["notice.sent"])] == ["n-drill"]
    w.tick(T0 + 11)
    assert elog.head()[0] == head + 41 and elog.verify().ok


@pytest.mark.drill
def test_foreign_lock_waits_for_the_busy_timeout_then_reports(tmp_path, caplog):
    fleet, cfg, elog = setup(tmp_path, n=5)
    w = Watcher(cfg, elog)
    w.tick(T0)
    foreign = apsw.Connection(str(tmp_path / "e.db"))
    foreign.execute("BEGIN IMMEDIATE")                    # another process holds the write lock
    goal(fleet, "a00", state="waiting")
    caplog.set_level(logging.ERROR, logger="fleetwatch.watcher")
    t = time.monotonic()
    assert w.tick(T0 + 1) == 0                            # no crash
    waited = time.monotonic() - t
    assert waited >= BUSY_TIMEOUT_MS / 1000 * 0.9         # it waited for the busy timeout ...
    assert any("transitions not written" in r.getMessage() for r in caplog.records)  # ... then reported
    # released within the timeout: the append just waits and commits
    goal(fleet, "a01", state="waiting")
    threading.Timer(0.5, lambda: foreign.execute("ROLLBACK")).start()
    assert w.tick(T0 + 2) == 2                            # a00 (kept level) and a01
    foreign.close()
    per = history(elog)
    assert per["a00"] == ["TRABAJANDO", "RECLAMA"] and per["a01"] == ["TRABAJANDO", "RECLAMA"]
    assert elog.verify().ok
