"""append's commit path (events/log.py, issue 19): the caches are updated before COMMIT (so after
it only the data version and the head anchor's pwrite are left), the given ids are looked up at
the first Pending that carries one, and BEGIN/COMMIT go through one kept cursor. These tests fail
a real COMMIT (SQLite's commit hook turns it into a rollback) and check that nothing the failed
batch put in a cache survives it: versions, the head, the (type, block) pairs, the anchor. Real
files, no mocks."""
from __future__ import annotations

import apsw
import pytest

from events import anchor
from events.errors import AppendFailed
from events.log import EventLog, Pending
from events.schema import BLOCK_SHIFT
from events.types import AgentClassified, DodVerdict, RuleViolated

NOW = 1_764_443_000.0


def ac(agent: str = "a1") -> AgentClassified:
    return AgentClassified(agent=agent, to="RECLAMA", reason="waiting", source="fleet")


def anchored(lg: EventLog) -> None:
    """The head file names the log's head exactly (the writer's last commit)."""
    seq, h = lg.head()
    assert lg.anchor() == (seq, h.hex())


def listed(lg: EventLog) -> set[tuple[str, int]]:
    return set(lg.db.execute("SELECT type, block FROM event_types").fetchall())


def versions(lg: EventLog) -> list[tuple[str, int]]:
    return lg.db.execute("SELECT subject, version FROM events ORDER BY seq").fetchall()


def refuse_commits(lg: EventLog, on: bool) -> None:
    lg.db.set_commit_hook((lambda: True) if on else None)  # True: the COMMIT becomes a rollback


@pytest.mark.parametrize("size", [1, 3, 20])  # one row, a small batch, a trusted batch (no triggers)
def test_a_failed_commit_leaves_no_cache_behind(db_path, size):
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac()], NOW)
        refuse_commits(lg, True)
        batch = [RuleViolated(run="T1", rule="r", detail="d")] + [ac() for _ in range(size - 1)]
        with pytest.raises(AppendFailed):
            lg.append(batch, NOW)
        refuse_commits(lg, False)
        assert lg.head()[0] == 1 and lg.anchor() == (1, lg.head()[1].hex())  # the anchor never named it
        assert ("rule.violated", 0) not in listed(lg)
        assert lg.append(batch, NOW) == list(range(2, 2 + size))  # the same batch, now committed
        assert ("rule.violated", 0) in listed(lg)                 # its pair listed: not taken as known
        assert [v for s, v in versions(lg) if s == "agent:a1"] == list(range(1, size + 1))
        anchored(lg)
        assert lg.verify().ok


def test_a_failed_commit_at_a_new_block(db_path):
    """The first row of a block: its (type, block) pair is new, the commit fails, the retry lists it."""
    first = 1 << BLOCK_SHIFT
    with EventLog(db_path, durability="normal") as lg:
        lg.append([ac(f"a{i % 7}") for i in range(first - 1)], NOW)
        refuse_commits(lg, True)
        with pytest.raises(AppendFailed):
            lg.append([ac()], NOW)
        refuse_commits(lg, False)
        assert ("agent.classified", 1) not in listed(lg)
        assert lg.append([ac()], NOW) == [first]
        assert ("agent.classified", 1) in listed(lg)
        anchored(lg)
        assert lg.verify().ok


def test_given_ids_looked_up_at_the_first_one(db_path):
    """Structs first, then given ids: a stored id answers its seq, a repeated one the first's, a new
    one is appended; a batch of Structs alone asks no id look-up (nothing given)."""
    with EventLog(db_path, durability="normal") as lg:
        [s1] = lg.append([Pending(ac(), id="given-1")], NOW)
        queries: list[str] = []

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            queries.append(sql)
            return True

        lg.db.exec_trace = trace
        assert lg.append([ac("a2"), ac("a3")], NOW) == [2, 3]
        assert not [q for q in queries if "WHERE id IN" in q]
        got = lg.append([ac("a4"), Pending(ac("a5"), id="given-1"), Pending(ac("a6"), id="given-2"),
                         Pending(ac("a7"), id="given-2"), DodVerdict(agent="a1", verdict="met", verifier="v")], NOW)
        lg.db.exec_trace = None
        assert got == [4, s1, 5, 5, 6]
        assert len([q for q in queries if "WHERE id IN" in q]) == 1
        assert lg.db.execute("SELECT id FROM events WHERE seq = 5").fetchall() == [("given-2",)]
        assert lg.append([Pending(ac(), id="given-2")], NOW) == [5]  # all known: nothing written
        anchored(lg)
        assert lg.verify().ok


def test_the_anchor_after_every_commit(db_path):
    """After each append the head file holds that commit's head, whatever the batch's size; an
    append whose ids are all known writes no row and leaves it as it was."""
    with EventLog(db_path, durability="normal") as lg:
        for batch in ([ac()], [ac(f"b{i}") for i in range(5)], [ac(f"c{i}") for i in range(40)], [ac()]):
            lg.append(batch, NOW)
            anchored(lg)
            assert anchor.read(db_path) == (lg.head()[0], lg.head()[1].hex())
        lg.append([Pending(ac(), id="x")], NOW)
        before = open(anchor.path_of(lg.path), "rb").read()
        assert lg.append([Pending(ac(), id="x")], NOW) == [lg.head()[0]]
        assert open(anchor.path_of(lg.path), "rb").read() == before
        assert len(before) == 86 and before == anchor.line(*lg.head())
