"""A replay reads only the columns the folds read (events/replay.py): every projection folded over
those lean records ends in the very state it reaches over full ``Recorded`` rows, and damaged rows
are skipped and noted as ``EventLog.read`` notes them. Real logs, every event type."""
from __future__ import annotations

import apsw
import pytest

from events.log import EventLog
from events.replay import Folded, FoldedWithId, replay
from events.types import EVENT_TYPES
from projections.base import encode_state, registry
from watcher.runtime import rebuild_par
from watcher.runtime.state import Projections
from watcher.runtime.state import rebuild as rebuild_one

from tests.support.eventgen import sample
from tests.support.seededlogs import churn

NOW = 1_800_000_000.0


@pytest.fixture
def log(tmp_path):
    elog = churn(str(tmp_path / "e.db"), appends=200, seed=23)
    for k, tag in enumerate(sorted(EVENT_TYPES)):   # and one of every type, whatever churn left out
        elog.append([sample(tag)], NOW + 86400 * 30 + k)
    elog.append([sample("agent.classified")], NOW + 86400 * 31)
    yield elog
    elog.close()


def full_states(elog: EventLog) -> dict[str, bytes]:
    """Each projection folded event by event over ``read`` (every column: the live path's records)."""
    p = Projections()
    for rec in elog.read(0):
        p.fold(rec)
    return p.encoded()


def test_every_projection_folds_lean_records_to_the_same_state(log):
    want = full_states(log)
    p = Projections()
    assert p.catch_up(log) == log.head()[0]          # the start-up replay
    assert p.encoded() == want
    q, diff = rebuild_one(log, store=False)          # `rebuild` in one process
    assert diff is None and q.encoded() == want
    for names in (rebuild_par.WORKER, tuple(n for n in registry() if n not in rebuild_par.WORKER)):
        for typed in (True, False):                  # the worker's typed read, this process's read of every row
            g = rebuild_par.fold_group(log, names, log.head()[0], types=typed)
            assert {n: encode_state(s) for n, s in g.states.items()} == {n: want[n] for n in names}


def test_ids_are_read_only_for_a_fold_that_reads_them(log):
    """runs' fold reads ``rec.id`` (READS_ID): a group with runs reads ids, others do not, and a
    lean record has no field a fold must not count on (reading one fails, never a blank)."""
    assert Projections(registry(("runs",))).reads_id
    assert not Projections(registry(("notify", "swarms", "fanout"))).reads_id
    plain, with_id = next(replay(log, 0)), next(replay(log, 0, ids=True))
    assert type(plain) is Folded and type(with_id) is FoldedWithId
    full = next(log.read(0))
    assert (with_id.seq, with_id.id, with_id.time, with_id.type, with_id.event) == (
        full.seq, full.id, full.time, full.type, full.event)
    for field in ("subject", "version", "data", "hash", "id"):
        with pytest.raises(AttributeError):
            getattr(plain, field)


def test_a_damaged_row_is_skipped_and_noted_as_read_notes_it(log, tmp_path):
    """Rows whose data is text, does not decode, or whose time the folds cannot parse."""
    path = log.path
    log.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db = apsw.Connection(path)
    db.execute("DROP TRIGGER IF EXISTS events_no_update")
    db.execute("UPDATE events SET data = 'not a blob' WHERE seq = 5")
    db.execute("UPDATE events SET data = x'7b7b' WHERE seq = 9")
    db.execute("UPDATE events SET time = 'yesterday' WHERE seq = 14")
    db.close()
    a = EventLog(path, create=False, readonly=True)
    b = EventLog(path, create=False, readonly=True)
    try:
        seqs = [r.seq for r in a.read(0)]
        assert [r.seq for r in replay(b, 0)] == seqs
        assert set(a.damaged) == {5, 9, 14} and b.damaged == a.damaged
        c = EventLog(path, create=False, readonly=True)
        assert [r.seq for r in replay(c, 0, ids=True, chunk=3)] == seqs and c.damaged == a.damaged
        c.close()
    finally:
        a.close()
        b.close()
