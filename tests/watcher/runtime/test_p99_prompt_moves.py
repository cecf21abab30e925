"""watchdog's inotify queue with ``waker.prompt_moves``: a rename whose two halves are paired no
longer holds the events behind it for the whole pairing delay (the 0.5 s gaps of the 50k churn
bench). The delays here are an hour: a queue that slept its delay would never answer; the joins'
bounds catch a broken test, they time nothing."""
from __future__ import annotations

import importlib
import threading

import pytest

from watcher.runtime import waker

watchdog = pytest.importorskip("watchdog")

HOUR = 3600.0


def _queue_class() -> type:
    assert waker.prompt_moves() is True
    for name in waker._MOVE_QUEUE_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        return mod.DelayedQueue
    raise AssertionError("no watchdog queue module")


def _get_in_thread(q) -> tuple[threading.Thread, list]:
    got: list = []
    t = threading.Thread(target=lambda: got.append(q.get()), daemon=True)
    t.start()
    return t, got


def test_a_paired_rename_does_not_hold_the_queue():
    """The consumer waits on a delayed IN_MOVED_FROM at the head; its IN_MOVED_TO comes, the
    grouper takes the first half out and queues the pair: the consumer gets the pair at once
    (with watchdog's own get it slept the delay out, here an hour)."""
    q = _queue_class()(HOUR)
    q.put("from", delay=True)
    t, got = _get_in_thread(q)
    t.join(0.2)   # let it find the delayed head (either way it must answer below)
    assert got == []
    assert q.remove(lambda e: e == "from") == "from"
    q.put(("from", "to"))
    t.join(30)
    assert got == [("from", "to")]


def test_an_unpaired_rename_still_waits_and_order_is_kept():
    """A delayed head that nobody pairs still comes first, after its delay; what was queued
    behind it comes after it, in order; a closed queue answers None."""
    q = _queue_class()(0.05)
    q.put("from", delay=True)
    q.put("x")
    q.put("y")
    assert [q.get(), q.get(), q.get()] == ["from", "x", "y"]
    q.close()
    assert q.get() is None


def test_close_wakes_a_consumer_waiting_on_a_delayed_head():
    q = _queue_class()(HOUR)
    q.put("from", delay=True)
    t, got = _get_in_thread(q)
    t.join(0.2)
    q.close()
    t.join(30)
    assert got == [None]


def test_the_patch_is_made_once_and_groupers_take_it():
    """A second call changes nothing; a move grouper made afterwards queues through it."""
    cls = _queue_class()
    assert waker.prompt_moves() is True and _queue_class() is cls
    try:
        from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper
    except ImportError:
        pytest.skip("watchdog < 7: the queue lives in inotify_buffer")
    assert type(InotifyMoveEventGrouper()._queue) is cls
