"""WAL checkpoints off the tick (watcher/runtime/checkpoint.py): a thread with its own connection
checkpoints a real log while the writer appends; nothing is lost, the WAL stays bounded, and the
writer's own automatic checkpoint is only the backstop."""
from __future__ import annotations

import os
import time

from events.log import EventLog
from events.types import AgentClassified
from watcher.runtime.checkpoint import BACKSTOP_PAGES, Checkpointer

T0 = 1_800_000_000.0


def _wait(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.02)
    return pred()


def test_the_thread_checkpoints_what_the_writer_appends_and_loses_nothing(tmp_path):
    db = str(tmp_path / "e.db")
    elog = EventLog(db, durability="normal", lock=True)
    elog.set_autocheckpoint(BACKSTOP_PAGES)
    ck = Checkpointer(elog.path, every_bytes=256 << 10, look_s=0.02).start()
    try:
        for k in range(40):  # ~40 batches of 500 events: several MB of WAL
            elog.append([AgentClassified(agent=f"a{k}-{i}", to="TRABAJANDO", reason="x" * 100) for i in range(500)],
                        T0 + k)
        assert _wait(lambda: ck.runs >= 2), ck.runs
    finally:
        ck.close()
    assert elog.head()[0] == 20_000
    elog.close()
    again = EventLog(db, create=False)
    assert sum(1 for _ in again.read(0)) == 20_000
    v = again.verify()
    assert v.ok and v.count == 20_000, v
    again.close()
    assert not os.path.exists(db + "-wal") or os.path.getsize(db + "-wal") < 64 << 20


def test_a_checkpointer_on_a_missing_log_says_so_and_ends(tmp_path, caplog):
    ck = Checkpointer(str(tmp_path / "nowhere.db"), look_s=0.01).start()
    ck.close(5)
    assert ck.runs == 0
    assert "background checkpoints off" in caplog.text
