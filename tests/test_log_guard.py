"""The append-only INSERT guard of schema v4 (events/schema.py): fleetwatch's own appends skip the
per-row look-ups (issue 19), every other insert is checked or refused (issue 14: the log cannot be
bypassed)."""
from __future__ import annotations

import sqlite3

import apsw
import pytest

from events import schema as evschema
from events.chain import row_hash
from events.log import EventLog
from events.types import AgentClassified

NOW = 1_800_000_000.0


def ac(agent: str = "a1") -> AgentClassified:
    return AgentClassified(agent=agent, to="RECLAMA", reason="waiting", source="fleet")


def _seeded(path: str, n: int = 3) -> tuple[int, bytes]:
    with EventLog(path, durability="normal") as lg:
        lg.append([ac(f"a{i}") for i in range(n)], NOW)
        return lg.head()


def _next_row(path: str) -> tuple:
    """A correct next row: next seq, new subject version and id, hash chained to the head."""
    with EventLog(path, create=False, readonly=True) as lg:
        seq, prev = lg.head()
    args = (seq + 1, "x" * 32, "2026-11-29T19:03:20.000Z", "agent.classified", "agent:zz", 1, b'{"agent":"zz"}')
    return (*args, row_hash(prev, *args))


@pytest.mark.parametrize("connect", [lambda p: apsw.Connection(p), lambda p: sqlite3.connect(p, isolation_level=None)])
def test_foreign_connection_cannot_insert_even_a_correct_next_row(db_path, connect):
    head = _seeded(db_path)
    row = _next_row(db_path)
    c = connect(db_path)
    with pytest.raises((apsw.SQLError, sqlite3.OperationalError), match=evschema.APPENDING_FN):
        c.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", row)
    with pytest.raises((apsw.SQLError, sqlite3.OperationalError), match=evschema.APPENDING_FN):
        c.execute("INSERT OR REPLACE INTO events SELECT * FROM events WHERE seq = 2")
    c.close()
    with EventLog(db_path, create=False) as lg:
        assert lg.head() == head and lg.verify().ok


def test_own_connection_outside_an_append_gets_the_row_checks(db_path):
    """log.db outside append(): the v3 checks (a correct next row in, a colliding one refused)."""
    _seeded(db_path)
    row = _next_row(db_path)
    with EventLog(db_path) as lg:
        lg.db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", row)   # correct: accepted
        with pytest.raises(apsw.ConstraintError, match="append-only"):
            lg.db.execute("INSERT OR REPLACE INTO events SELECT 5, id || 'y', time, type, subject, version, data, "
                          "hash FROM events WHERE seq = 2")
        assert lg.head()[0] == 4


def test_append_flag_is_down_after_an_append_and_after_a_failed_one(db_path):
    with EventLog(db_path) as lg:
        lg.append([ac()], NOW)
        assert lg.db.execute(f"SELECT {evschema.APPENDING_FN}()").fetchall() == [(0,)]
        lg.db.execute("CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.seq = 2 "
                      "BEGIN SELECT RAISE(ABORT, 'boom'); END")
        with pytest.raises(Exception, match="boom"):
            lg.append([ac()], NOW)
        assert lg.db.execute(f"SELECT {evschema.APPENDING_FN}()").fetchall() == [(0,)]
        with pytest.raises(apsw.ConstraintError, match="append-only"):
            lg.db.execute("INSERT OR REPLACE INTO events SELECT * FROM events WHERE seq = 1")


def test_a_writer_that_fakes_the_function_is_caught_by_the_chain(db_path):
    """Defining fleetwatch_appending() yourself is as deliberate as dropping the trigger: what it
    lets in (a REPLACE that deletes a row) breaks the chain, which verify reports."""
    _seeded(db_path, 5)
    c = apsw.Connection(db_path)
    c.create_scalar_function(evschema.APPENDING_FN, lambda: 1, 0)
    c.execute("INSERT OR REPLACE INTO events SELECT 6, id || 'y', time, type, subject, version, data, hash "
              "FROM events WHERE seq = 2")
    c.close()
    with EventLog(db_path, create=False) as lg:
        res = lg.verify()
        assert not res.ok and res.bad_seq == 2


def test_v3_log_gets_the_v4_guard(db_path):
    _seeded(db_path)
    c = apsw.Connection(db_path)   # what a v3 fleetwatch left: the v3 trigger, user_version 3
    c.execute(f"DROP TRIGGER events_no_replace; {evschema._NO_REPLACE}; PRAGMA user_version=3")
    c.close()
    with EventLog(db_path, create=False, readonly=True) as old:     # read-only: no migration, readable
        assert old.schema_version == 3 and old.verify().ok
    with EventLog(db_path) as lg:
        assert lg.schema_version == 4 and lg.guard_problems() == [] and lg.verify().ok
        lg.append([ac("new")], NOW)
        assert lg.verify().ok and lg.head()[0] == 4
