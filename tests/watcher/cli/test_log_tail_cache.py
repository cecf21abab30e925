"""append's head without a look-up (events/log.py ``_tail``): the head this connection committed
last, trusted only while SQLite's data version of the file has not moved since that commit. Every
way the file can change between two appends is tried on real files: another connection, another
process, this connection outside append, a checkpoint, a rollback (ours and a foreign one), a
writer killed inside its transaction. After each, the next append continues from the true head:
contiguous seqs, the chain verifies, versions count on, and ``_tail`` equals the head read."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import apsw
import pytest

from events.errors import AppendFailed, VersionConflict
from events.log import EventLog, Pending, row_hash
from events.types import AgentClassified, encode_data, tag_of
from tests.support.exe import ROOT

NOW = 1_764_443_000.0
HEAD_SQL = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"


def ac(agent: str = "a1") -> AgentClassified:
    return AgentClassified(agent=agent, to="RECLAMA", reason="waiting", source="fleet")


def tail_is_head(lg: EventLog) -> bool:
    """Inside a write transaction, as append asks: the cached answer is the file's."""
    lg.db.execute("BEGIN IMMEDIATE")
    try:
        return lg._tail() == lg.head()
    finally:
        lg.db.execute("ROLLBACK")


def sound(lg: EventLog, n: int) -> None:
    res = lg.verify()
    assert res.ok and res.count == n, res
    assert [r.seq for r in lg.read()] == list(range(1, n + 1))
    seen: dict[str, int] = {}
    for r in lg.read():
        seen[r.subject] = seen.get(r.subject, 0) + 1
        assert r.version == seen[r.subject], r


def insert_next(c: apsw.Connection, agent: str, *, commit: bool = True) -> None:
    """Another writer's valid next row, through the append-only trigger (raw apsw)."""
    seq, prev = c.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchall()[0]
    ev = ac(agent)
    ver = c.execute("SELECT coalesce(max(version), 0) + 1 FROM events WHERE subject=?", (ev.subject,)).fetchall()[0][0]
    head = (seq + 1, f"foreign-{seq + 1}", "2025-11-29T19:03:20Z", tag_of(ev), ev.subject, ver)
    data = encode_data(ev)
    c.execute("BEGIN IMMEDIATE")
    c.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", (*head, data, row_hash(prev, *head, data)))
    c.execute("COMMIT" if commit else "ROLLBACK")


def heads_read(lg: EventLog) -> list[str]:
    """The head look-ups append runs from now on (apsw's exec tracer)."""
    seen: list[str] = []

    def trace(_cur, sql, _bindings):
        if sql == HEAD_SQL:
            seen.append(sql)
        return True

    lg.db.exec_trace = trace
    return seen


def test_back_to_back_appends_read_no_head_and_stay_sound(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        seen = heads_read(lg)
        for i in range(5):
            lg.append([ac(f"a{i % 2}")], NOW)
        assert seen == []                                         # the cached head served every commit
        assert tail_is_head(lg)
        sound(lg, 6)


def test_another_connection_commits_in_between(db_path):
    with EventLog(db_path, durability="normal") as a, EventLog(db_path, durability="normal") as b:
        a.append([ac()], NOW)
        b.append([ac(), ac("a2")], NOW)                              # a's cache says head 1; truth is 3
        seen = heads_read(a)
        assert a.append([ac()], NOW) == [4]
        assert seen == [HEAD_SQL]                                    # the moved data version made a read it
        c = apsw.Connection(db_path)
        insert_next(c, "a2")                                         # a raw foreign writer: seq 5
        c.close()
        assert a.append([ac("a2")], NOW) == [6]
        assert [r.version for r in a.read(subject="agent:a2")] == [1, 2, 3]
        assert tail_is_head(a) and tail_is_head(b)
        sound(a, 6)


def test_another_process_commits_in_between(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        code = textwrap.dedent("""
            import sys
            from events.log import EventLog
            from events.types import AgentClassified
            with EventLog(sys.argv[1], durability="normal") as lg:
                lg.append([AgentClassified(agent="a1", to="RECLAMA", source="fleet")] * 3, 1.0)
        """)
        subprocess.run([sys.executable, "-c", code, db_path], check=True, env=dict(os.environ, PYTHONPATH=ROOT),
                       timeout=60)
        assert lg.append([ac()], NOW) == [5]
        assert [r.version for r in lg.read(subject="agent:a1")] == [1, 2, 3, 4, 5]
        sound(lg, 5)


def test_this_connection_writes_outside_append(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        insert_next(lg.db, "a1")                                     # the same connection, not through append
        assert tail_is_head(lg)
        assert lg.append([ac()], NOW) == [3]
        lg.put_snapshots(3, {"fleet": b"x"})                         # a write that leaves the events alone
        assert lg.append([ac()], NOW) == [4]
        sound(lg, 4)


def test_a_foreign_rollback_or_checkpoint_in_between(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        c = apsw.Connection(db_path)
        insert_next(c, "a1", commit=False)                           # written, then rolled back: nothing
        assert tail_is_head(lg) and lg.append([ac()], NOW) == [2]
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        assert tail_is_head(lg) and lg.append([ac()], NOW) == [3]
        insert_next(c, "a1")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()      # a commit, then the WAL emptied
        assert tail_is_head(lg) and lg.append([ac()], NOW) == [5]
        c.close()
        sound(lg, 5)


def test_our_failed_appends_leave_the_head_true(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        with pytest.raises(VersionConflict):
            lg.append([ac("a2"), Pending(ac(), expected_version=7)], NOW)
        assert tail_is_head(lg) and lg.append([ac("a9")], NOW) == [2]
        lg.db.execute("CREATE UNIQUE INDEX same_data ON events(data)")  # the next INSERT fails in SQLite
        with pytest.raises(AppendFailed):
            lg.append([ac()], NOW)
        lg.db.execute("DROP INDEX same_data")
        c = apsw.Connection(db_path)
        insert_next(c, "a3")                                         # and someone commits meanwhile
        c.close()
        assert tail_is_head(lg) and lg.append([ac()], NOW) == [4]
        sound(lg, 4)


def test_a_writer_killed_inside_its_transaction(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        code = textwrap.dedent("""
            import sys, time
            import apsw
            c = apsw.Connection(sys.argv[1])
            c.setbusytimeout(5000)
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO events SELECT seq + 1, 'killed', time, type, subject, version + 1, data, hash "
                      "FROM events ORDER BY seq DESC LIMIT 1")
            print("inside", flush=True)
            time.sleep(60)
        """)
        p = subprocess.Popen([sys.executable, "-c", code, db_path], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=ROOT))
        try:
            assert p.stdout is not None and p.stdout.readline().strip() == "inside"
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait(10)
            if p.stdout is not None:
                p.stdout.close()
        assert tail_is_head(lg) and lg.head()[0] == 1                # its row never committed
        assert lg.append([ac()], NOW) == [2]
        sound(lg, 2)


def test_without_data_version_every_append_reads_its_head(db_path, monkeypatch):
    """apsw before 3.47 has no Connection.data_version: append then reads the head each time."""
    import events.log as evlog

    monkeypatch.setattr(evlog, "DATA_VERSION", False)
    with EventLog(db_path, durability="normal") as a, EventLog(db_path, durability="normal") as b:
        seen = heads_read(a)
        a.append([ac()], NOW)
        b.append([ac()], NOW)
        assert a.append([ac()], NOW) == [3]
        assert seen == [HEAD_SQL, HEAD_SQL]
        sound(a, 3)


def test_rows_byte_for_byte_as_when_every_append_reads_its_head(tmp_path, monkeypatch):
    """Differential: the same appends (batches of one, small and trusted ones, given ids repeated,
    a foreign commit in between) write the very rows, hashes included, with the known head and
    with the head read at every commit."""
    import events.log as evlog

    def workload(path: str) -> list[tuple]:
        with EventLog(path, durability="normal") as lg:
            lg._id_prefix = "0" * 16                                 # ids as the other run's
            for i in range(30):
                lg.append([ac(f"a{i % 4}")], NOW + i)
            lg.append([ac(f"b{i}") for i in range(25)], NOW)         # a trusted batch
            lg.append([Pending(ac("a1"), id="given-1"), ac("a2"), Pending(ac("a1"), id="given-1")], NOW)
            c = apsw.Connection(path)
            insert_next(c, "a3")
            c.close()
            lg.append([ac("a3"), Pending(ac("a9"), id="given-1")], NOW)
            assert lg.verify().ok
            return lg.db.execute("SELECT * FROM events ORDER BY seq").fetchall()

    known = workload(str(tmp_path / "known.db"))
    monkeypatch.setattr(evlog, "DATA_VERSION", False)
    read = workload(str(tmp_path / "read.db"))
    assert len(known) == 30 + 25 + 2 + 1 + 1 and known == read
