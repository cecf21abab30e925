"""A projection snapshot that cannot be trusted is only a lost cache (issue 23): edited bytes, a
bound snapshot that does not decode, snapshots at different seqs, one missing, an older layout.
Each time the watcher replays the log, ends in exactly the state of a full replay, and its next
tick on the same files writes nothing."""
from __future__ import annotations

import sqlite3

import msgspec
import pytest

from events.log import EventLog
from projections.base import encode_state
from watcher.runtime.loop import Watcher
from watcher.runtime.state import Projections, rebuild

from tests.support.goalfleet import T0, goal, make


def history(tmp_path):
    """A real log: 40 agents through RECLAMA, stalls, closes; snapshots stored at its head."""
    fleet, cfg = make(tmp_path, stall="5m")
    for i in range(40):
        goal(fleet, f"a{i:02d}")
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(T0)
    for i in range(0, 40, 3):
        goal(fleet, f"a{i:02d}", state="waiting", phase="preguntando")
    w.tick(T0 + 10)
    w.tick(T0 + 600)                                      # the idle ones stall
    for i in range(0, 40, 7):
        (fleet / f"a{i:02d}" / "goal.json").unlink()
    w.tick(T0 + 700)
    w.tick(T0 + 701)                                      # second miss: CERRADO
    w.snapshot()
    w.close()
    elog.close()
    return fleet, cfg


def full_replay(path) -> dict[str, bytes]:
    elog = EventLog(str(path))
    p = Projections()
    p.catch_up(elog)
    elog.close()
    return p.encoded()


def restart_and_tick(tmp_path, cfg) -> tuple[dict[str, bytes], int, dict[str, str]]:
    """A new Watcher on the log (Projections.load), its states, and what one tick appends."""
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    states = w.proj.encoded()
    problems = dict(elog.snapshot_problems)
    head = elog.head()[0]
    w.tick(T0 + 702)
    n = elog.head()[0] - head
    w.close()
    elog.close()
    return states, n, problems


def sql(tmp_path, q: str, *args) -> None:
    c = sqlite3.connect(str(tmp_path / "e.db"))
    with c:
        c.execute(q, args)
    c.close()


def test_a_good_snapshot_is_used_and_equals_a_full_replay(tmp_path):
    _, cfg = history(tmp_path)
    want = full_replay(tmp_path / "e.db")
    states, n, problems = restart_and_tick(tmp_path, cfg)
    assert states == want and n == 0 and problems == {}


def _edited(tmp_path):
    (data,) = sqlite3.connect(str(tmp_path / "e.db")).execute(
        "SELECT data FROM snapshots WHERE name = 'fleet'").fetchone()
    assert b"RECLAMA" in data
    sql(tmp_path, "UPDATE snapshots SET data = ? WHERE name = 'fleet'", data.replace(b"RECLAMA", b"TRABAJANDO"))


def _bound_garbage(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    seq = elog.head()[0]
    elog.put_snapshots(seq, {"notify": b'{"conds": [1, 2'})       # bound to the chain, not JSON
    elog.close()


def _bound_wrong_shape(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    elog.put_snapshots(elog.head()[0], {"notify": msgspec.json.encode({"conds": {}})})   # an older layout
    elog.close()


def _older_seq(tmp_path):
    elog = EventLog(str(tmp_path / "e.db"))
    p = Projections()
    for rec in elog.read(0, limit=5):
        p.fold(rec)
    elog.put_snapshots(p.seq, {"dod": encode_state(p.states["dod"])})   # one projection at seq 5
    elog.close()


def _missing(tmp_path):
    sql(tmp_path, "DELETE FROM snapshots WHERE name = 'runs'")


@pytest.mark.parametrize("corrupt", [_edited, _bound_garbage, _bound_wrong_shape, _older_seq, _missing])
def test_an_untrusted_snapshot_means_a_replay_equal_to_the_full_one(tmp_path, corrupt):
    _, cfg = history(tmp_path)
    want = full_replay(tmp_path / "e.db")
    corrupt(tmp_path)
    states, n, problems = restart_and_tick(tmp_path, cfg)
    assert states == want                                   # the same state as a full replay
    assert n == 0                                           # nothing classified or pushed again
    if corrupt is _edited:
        assert "fleet" in problems                          # the reason is kept for verify/doctor


def test_rebuild_check_names_the_edited_snapshot_and_rewrites_it(tmp_path):
    history(tmp_path)
    _edited(tmp_path)
    elog = EventLog(str(tmp_path / "e.db"))
    _, diff = rebuild(elog, check=True)
    assert diff is None                    # an unbound snapshot is not compared: it is not trusted
    assert "fleet" in elog.snapshots() and elog.snapshot_problems == {}   # rewritten, bound again
    elog.close()
    assert full_replay(tmp_path / "e.db") == restart_and_tick(tmp_path, make(tmp_path, stall="5m")[1])[0]
