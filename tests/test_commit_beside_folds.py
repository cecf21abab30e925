"""A big batch's COMMIT runs beside the caller's folds (events/overlap.py, issue 19): the first
tick of a big fleet folds its events while SQLite writes and fsyncs them. What must hold: the two
really run side by side from ``overlap.ROWS`` rows (and in order below), a failed COMMIT is an
AppendFailed with nothing written (the watcher drops its folds: its states are loaded again), a
fold that raises leaves a committed batch and a log whose next append goes on from it, and a
system that gives no thread still commits. Real SQLite (its commit hook is called inside the
COMMIT, in the committing thread), real files, real goal.json files for the watcher."""
from __future__ import annotations

import threading

import pytest

from events import overlap
from events.errors import AppendFailed
from events.log import EventLog
from events.types import AgentClassified
from tests.test_watcher import T0, goal, make
from watcher.runtime.loop import Watcher

NOW = 1_764_443_000.0
BIG = overlap.ROWS


def batch(n: int, tag: str = "a") -> list[AgentClassified]:
    return [AgentClassified(agent=f"{tag}{i}", to="TRABAJANDO", reason="busy", source="fleet") for i in range(n)]


def anchored(lg: EventLog) -> None:
    seq, h = lg.head()
    assert lg.anchor() == (seq, h.hex())


def test_a_big_batch_folds_while_its_commit_runs(db_path):
    """From ROWS rows, ``during`` sees the COMMIT under way (the commit hook entered, waiting for
    it): one after the other, the fold would wait for a hook that never comes and report False."""
    entered, folded = threading.Event(), threading.Event()
    seen: list[bool] = []

    def hook() -> bool:           # inside the COMMIT
        entered.set()
        folded.wait(30)
        return False              # let it commit

    def during(recs) -> None:
        seen.append(entered.wait(30))
        assert [r.seq for r in recs] == list(range(1, BIG + 1))
        folded.set()

    with EventLog(db_path) as lg:
        lg.db.set_commit_hook(hook)
        assert lg.append(batch(BIG), NOW, during=during) == list(range(1, BIG + 1))
        assert seen == [True]
        lg.db.set_commit_hook(None)
        assert lg.head()[0] == BIG
        anchored(lg)
        assert lg.verify().ok


def test_a_small_batch_folds_before_its_commit(db_path):
    entered = threading.Event()
    seen: list[bool] = []

    def hook() -> bool:
        entered.set()
        return False

    with EventLog(db_path) as lg:
        lg.db.set_commit_hook(hook)
        lg.append(batch(BIG - 1), NOW, during=lambda recs: seen.append(entered.is_set()))
        assert seen == [False] and entered.is_set()


@pytest.mark.parametrize("size", [BIG - 1, BIG])
def test_a_failed_commit_beside_the_folds_writes_nothing(db_path, size):
    calls: list[int] = []
    with EventLog(db_path, durability="normal") as lg:
        lg.append(batch(1, "first"), NOW)
        lg.db.set_commit_hook(lambda: True)   # True: the COMMIT becomes a rollback
        with pytest.raises(AppendFailed):
            lg.append(batch(size), NOW, during=lambda recs: calls.append(len(recs)))
        lg.db.set_commit_hook(None)
        assert calls == [size]                # it ran, once; the caller drops what it did
        assert lg.head()[0] == 1 and lg.anchor() == (1, lg.head()[1].hex())
        assert lg.append(batch(size), NOW) == list(range(2, size + 2))   # the same batch, now committed
        anchored(lg)
        assert lg.verify().ok


def test_a_fold_that_raises_beside_the_commit_leaves_a_committed_batch(db_path):
    def during(recs) -> None:
        raise ValueError("a fold's bug")

    with EventLog(db_path, durability="normal") as lg:
        with pytest.raises(ValueError, match="a fold's bug"):
            lg.append(batch(BIG), NOW, during=during)
        assert lg.head()[0] == BIG                      # committed: the COMMIT ran beside it
        assert lg.append(batch(3, "next"), NOW) == [BIG + 1, BIG + 2, BIG + 3]  # on from it
        anchored(lg)
        assert lg.verify().ok


def test_a_fold_that_raises_in_a_small_batch_writes_nothing(db_path):
    def during(recs) -> None:
        raise ValueError("a fold's bug")

    with EventLog(db_path, durability="normal") as lg:
        with pytest.raises(ValueError):
            lg.append(batch(BIG - 1), NOW, during=during)
        assert lg.head()[0] == 0
        assert lg.append(batch(2), NOW) == [1, 2]
        assert lg.verify().ok


def test_no_thread_to_be_had_still_commits(db_path, monkeypatch):
    """The system refuses a new thread (a process or memory limit): the fold, then the COMMIT."""
    def refused(self) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    calls: list[int] = []
    with EventLog(db_path) as lg:
        assert lg.append(batch(BIG), NOW, during=lambda recs: calls.append(len(recs)))[-1] == BIG
        assert calls == [BIG] and lg.head()[0] == BIG
        assert lg.verify().ok


def test_a_first_tick_whose_big_commit_fails_folds_nothing_and_doubles_nothing(tmp_path):
    """A watcher's first tick over ROWS agents, its COMMIT refused: the folds that ran beside it
    are dropped (no agent in the fleet), the next tick commits each agent once."""
    fleet, cfg = make(tmp_path)
    for i in range(BIG):
        goal(fleet, f"a{i:04d}")
    elog = EventLog(f"{tmp_path}/e.db")
    w = Watcher(cfg, elog)
    try:
        elog.db.set_commit_hook(lambda: True)
        w.tick(T0 + 1)                                  # AppendFailed is the tick's own to handle
        assert w.unwritten == 1 and w.proj["fleet"]["agents"] == {} and w.proj.seq == 0
        assert elog.head()[0] == 0
        elog.db.set_commit_hook(None)
        w.tick(T0 + 3)
        got = [r.event.agent for r in elog.read(0, types=["agent.classified"])]
        assert sorted(got) == [f"a{i:04d}" for i in range(BIG)]
        assert len(w.proj["fleet"]["agents"]) == BIG and w.proj.seq == elog.head()[0]
        assert elog.verify().ok
    finally:
        w.close()
        elog.close()
