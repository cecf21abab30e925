"""The append-only guards hold around the appender's own batches, small and big: every statement
and every connection meets them, after a big append and after a failed one (issue 14: the log
cannot be bypassed)."""
from __future__ import annotations

import sqlite3

import apsw
import pytest

from events.errors import AppendFailed
from events.log import EventLog
from events.types import AgentClassified

NOW = 1_800_000_000.0
BIG = 20


def ac(agent: str = "a1") -> AgentClassified:
    return AgentClassified(agent=agent, to="RECLAMA", reason="waiting", source="fleet")


REPLACE = ("INSERT OR REPLACE INTO events SELECT 999, id || 'y', time, type, subject, version, data, hash "
           "FROM events WHERE seq = 2")


def test_foreign_connection_still_meets_the_guard_after_big_appends(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac(f"a{i}") for i in range(BIG)], NOW)
        head = lg.head()
    c = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute(REPLACE)
    c.close()
    with EventLog(db_path, create=False) as lg:
        assert lg.head() == head and lg.verify().ok


def test_guards_hold_after_a_big_append_and_after_a_failed_one(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac(f"a{i}") for i in range(BIG)], NOW)
        with pytest.raises(apsw.ConstraintError, match="append-only"):
            lg.db.execute(REPLACE)
        lg.db.execute("CREATE UNIQUE INDEX same_data ON events(data)")   # makes the next batch fail mid-INSERT
        with pytest.raises(AppendFailed):
            lg.append([ac("same")] * BIG, NOW)
        with pytest.raises(apsw.ConstraintError, match="append-only"):
            lg.db.execute(REPLACE)
        with pytest.raises(apsw.ConstraintError, match="append-only"):
            lg.db.execute("DELETE FROM events WHERE seq = 1")
        assert lg.head()[0] == BIG and lg.verify().ok


def test_big_append_aborts_a_collision(db_path):
    """PRIMARY KEY and UNIQUE (subject, version) do not depend on triggers: a stale version cache
    (a bug) makes the batch fail whole, nothing written."""
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac("a1")], NOW)
        lg._versions["agent:a1"] = 0
        lg._complete = True
        lg._known_head = lg.head()[0]
        with pytest.raises(AppendFailed, match="UNIQUE|append-only"):
            lg.append([ac("a1")] + [ac(f"b{i}") for i in range(BIG)], NOW)
        assert lg.head()[0] == 1 and lg.verify().ok


def test_appends_go_through_the_triggers(db_path):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        lg.db.execute("CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.seq = 2 "
                      "BEGIN SELECT RAISE(ABORT, 'boom'); END")
        with pytest.raises(AppendFailed, match="boom"):
            lg.append([ac()], NOW)
        with pytest.raises(AppendFailed, match="boom"):
            lg.append([ac(f"c{i}") for i in range(BIG)], NOW)
        assert lg.head()[0] == 1
