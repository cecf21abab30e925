"""The event log (events/log.py) and the writer lock (events/lock.py) on real SQLite files."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import apsw
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import events.log as evlog
import events.schema as evschema
from events.errors import AppendFailed, ChainBroken, SchemaError, StoreError, VersionConflict, WriterLocked
from events.lock import WriterLock, holder_pid
from events.log import GENESIS, EventLog, Pending, Recorded, row_hash
from events.types import EVENT_TYPES, AgentClassified, Unknown, WatcherStarted, encode_data, tag_of

from tests.support.eventgen import sample
from tests.support.exe import ROOT

NOW = 1_764_443_000.0  # virtual clock: 2025-11-29T19:03:20Z


def ac(agent: str = "a7", to: str = "TRABAJANDO", **kw) -> AgentClassified:
    return AgentClassified(agent=agent, to=to, source="fleet", **kw)


def sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def py(code: str, *args: str, **kw) -> subprocess.Popen:
    """A real Python subprocess running ``code`` with the checkout importable."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def tampered_copy(src: EventLog, dst: str, sql: str, *args) -> str:
    """A copy of the log with the append-only triggers dropped, ``sql`` applied and the triggers
    put back (a careful tamperer: only the chain and the head anchor can tell)."""
    src.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(src.path, dst)
    c = apsw.Connection(dst)
    c.execute("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP TRIGGER events_no_replace")
    c.execute(sql, args)
    evschema.restore_guards(c)
    c.close()
    return dst


# ---- append, read, round trip --------------------------------------------------------------
@pytest.mark.parametrize("tag", sorted(EVENT_TYPES))
def test_round_trip_every_event_type(log, tag):
    ev = sample(tag)
    [seq] = log.append([ev], NOW)
    [rec] = list(log.read(seq - 1))
    assert (rec.seq, rec.type, rec.subject, rec.version) == (seq, tag, ev.subject, 1)
    assert rec.event == ev and tag_of(rec.event) == tag
    assert rec.time == "2025-11-29T19:03:20.000Z"
    full = msgspec.json.decode(msgspec.json.encode(ev))
    assert full.pop("type") == tag and rec.to_json()["data"] == full  # data has no tag
    assert log.verify().ok


def test_seqs_contiguous_versions_per_subject_and_chain(log):
    assert log.append([ac("a1"), ac("a2"), ac("a1")], NOW) == [1, 2, 3]
    assert log.append([ac("a1")], NOW + 1) == [4]
    recs = list(log.read())
    assert [(r.subject, r.version) for r in recs] == [("agent:a1", 1), ("agent:a2", 1), ("agent:a1", 2), ("agent:a1", 3)]
    prev = GENESIS
    for r in recs:
        assert r.hash == row_hash(prev, r.seq, r.id, r.time, r.type, r.subject, r.version, r.data)
        prev = r.hash
    assert log.head() == (4, prev)
    res = log.verify()
    assert (res.ok, res.head_seq, res.head_hash, res.count) == (True, 4, prev.hex(), 4)
    assert len({r.id for r in recs}) == 4 and all(len(r.id) == 32 for r in recs)


def test_empty_append_and_empty_log(log):
    assert log.append([], NOW) == []
    assert log.head() == (0, GENESIS) and list(log.read()) == [] and log.last(5) == []
    assert log.verify().ok and log.verify().head_seq == 0


def test_idempotent_id_across_and_within_batches(log):
    w = WatcherStarted(version="1", pid=1)
    assert log.append([Pending(w, id="start-1")], NOW) == [1]
    assert log.append([Pending(w, id="start-1"), Pending(w, id="start-2"), Pending(w, id="start-2")], NOW) == [1, 2, 2]
    assert [r.id for r in log.read()] == ["start-1", "start-2"]
    assert log.verify().ok


def test_version_conflict_is_typed_and_writes_nothing(log):
    log.append([ac("a1"), ac("a1")], NOW)                            # agent:a1 at version 2
    assert log.append([Pending(ac("a1"), expected_version=2)], NOW) == [3]
    with pytest.raises(VersionConflict) as ei:
        log.append([ac("a2"), Pending(ac("a1"), expected_version=2)], NOW)
    assert (ei.value.subject, ei.value.expected, ei.value.actual) == ("agent:a1", 2, 3)
    assert log.head()[0] == 3                                        # the whole batch is absent
    assert log.append([ac("a2")], NOW) == [4]                        # and the log works on
    assert [r.version for r in log.read(3)] == [1]


def test_version_cache_sees_other_writers(db_path):
    a, b = EventLog(db_path, durability="normal"), EventLog(db_path, durability="normal")
    a.append([ac("a1")], NOW)
    b.append([ac("a1")], NOW)                                        # a's cache says 1; truth is 2
    a.append([ac("a1")], NOW)
    assert [r.version for r in a.read()] == [1, 2, 3]
    with pytest.raises(VersionConflict):
        b.append([Pending(ac("a1"), expected_version=2)], NOW)
    a.close(), b.close()


@pytest.mark.parametrize("sql", ["UPDATE events SET type='x' WHERE seq=1", "DELETE FROM events WHERE seq=1",
                                 "DELETE FROM events"])
def test_update_and_delete_refused(log, sql):
    log.append([ac()], NOW)
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        log.db.execute(sql)
    assert log.verify().ok and log.head()[0] == 1


def test_read_filters_last_and_limit(log):
    log.append([ac("a1"), WatcherStarted(version="1", pid=1), ac("a2"), ac("a10"), sample("rule.violated")], NOW)
    assert [r.seq for r in log.read(types=["agent.classified"])] == [1, 3, 4]
    assert [r.seq for r in log.read(subject="agent:a1")] == [1, 4]    # prefix
    assert [r.seq for r in log.read(1, limit=2)] == [2, 3]
    assert [r.seq for r in log.read(chunk=2)] == [1, 2, 3, 4, 5]      # chunked reads stay in order
    assert [r.seq for r in log.last(2)] == [4, 5]
    assert [r.seq for r in log.last(2, types=["agent.classified"])] == [3, 4]
    assert [r.seq for r in log.last(99)] == [1, 2, 3, 4, 5]
    assert log.start_of_last(2) == 3 and log.start_of_last(0) == 5
    assert all(r.event is None for r in log.read(decode=False))


def test_verified_read_raises_at_the_first_bad_seq(log, tmp_path):
    log.append([ac(f"a{i}") for i in range(6)], NOW)
    assert [r.seq for r in log.read(2, verify=True, types=["agent.classified"], limit=2)] == [3, 4]
    bad = EventLog(tampered_copy(log, str(tmp_path / "bad.db"),
                                 "UPDATE events SET data=CAST(replace(CAST(data AS TEXT),'a4','a9') AS BLOB) WHERE seq=5"))
    got = []
    with pytest.raises(ChainBroken) as ei:
        for r in bad.read(verify=True):
            got.append(r.seq)
    assert ei.value.seq == 5 and got == [1, 2, 3, 4]


def test_unknown_type_from_a_newer_version_decodes_and_verifies(log):
    log.append([ac()], NOW)
    seq, prev = log.head()
    args = (seq + 1, "x1", "2025-11-29T19:03:20.000Z", "thing.new", "thing:1", 1, b'{"type":"thing.new","k":1}')
    log.db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", (*args, row_hash(prev, *args)))
    log.db.execute("INSERT OR IGNORE INTO event_types VALUES ('thing.new', ?)", (args[0] >> evschema.BLOCK_SHIFT,))
    [rec] = list(log.read(1))
    assert isinstance(rec.event, Unknown) and rec.event.raw["k"] == 1
    assert rec.to_json()["data"] == {"k": 1} and log.verify().ok


def test_snapshots_commit_with_the_batch(log):
    def snap(recs: list[Recorded]) -> dict[str, bytes]:
        return {"fleet": f"{recs[-1].seq}:{len(recs)}".encode()}

    log.append([ac("a1"), ac("a2")], NOW, snapshot=snap)
    assert log.snapshots() == {"fleet": (2, b"2:2")}
    with pytest.raises(RuntimeError):
        log.append([ac("a3")], NOW, snapshot=lambda recs: (_ for _ in ()).throw(RuntimeError("boom")))
    assert log.head()[0] == 2 and log.snapshots() == {"fleet": (2, b"2:2")}
    log.put_snapshots(2, {"dod": b"{}"})
    assert log.snapshots()["dod"] == (2, b"{}")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([None, "i1", "i2", "i3"])),
                         max_size=6), max_size=5))
def test_property_any_batches_keep_the_invariants(tmp_path, batches):
    path = str(tmp_path / f"p{time.monotonic_ns()}.db")
    with EventLog(path, durability="normal") as lg:
        seen: dict[str, int] = {}
        for b in batches:
            out = lg.append([Pending(ac(a), id=i) for a, i in b], NOW)
            for (a, i), s in zip(b, out):
                if i is not None:
                    assert seen.setdefault(i, s) == s                # an id maps to one seq forever
        recs = list(lg.read())
        assert [r.seq for r in recs] == list(range(1, len(recs) + 1))
        per: dict[str, int] = {}
        for r in recs:
            per[r.subject] = per.get(r.subject, 0) + 1
            assert r.version == per[r.subject]
        assert lg.verify().ok


# ---- crash safety ----------------------------------------------------------------------------
WRITER = """
import sys, time
from events.log import EventLog
from events.types import AgentClassified
path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
log = EventLog(path, durability="full")
evs = [AgentClassified(agent=f"a{i % 97}", to="TRABAJANDO", reason="r" * 60) for i in range(n)]
def snap(recs):
    if mode == "hold":           # inside the transaction, every row inserted, not committed
        print("inside", flush=True)
        time.sleep(60)
    return {}
print("go", flush=True)
while True:
    log.append(evs, 1.0, snapshot=snap)
    print("done", flush=True)
"""


@pytest.mark.parametrize("mode,delay", [("hold", 0), ("loop", 0.15), ("loop", 0.4), ("loop", 0.9)])
def test_kill_9_mid_batch_leaves_whole_batches(db_path, mode, delay):
    n = 20_000
    EventLog(db_path).close()
    p = py(WRITER, db_path, mode, str(n))
    assert p.stdout.readline().strip() == "go"
    if mode == "hold":
        assert p.stdout.readline().strip() == "inside"
    else:
        time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    p.stdout.close(), p.stderr.close()
    with EventLog(db_path) as lg:
        count = lg.head()[0]
        print("rows after kill:", count)
        assert count % n == 0, f"{count} rows: a batch was partly written"
        if mode == "hold":
            assert count == 0
        res = lg.verify()
        assert res.ok and res.count == count, res
        lg.append([ac()], NOW)                                       # the log is usable again
        assert lg.verify().ok


# ---- verify: tampering, gaps, truncation ------------------------------------------------------
def test_verify_names_the_tampered_seq(log, tmp_path):
    log.append([ac(f"a{i}") for i in range(8)], NOW)
    raw = list(log.read(4, limit=1))[0].data
    i = raw.index(b"TRABAJANDO")
    changed = raw[:i] + b"X" + raw[i + 1:]                           # one byte of one row
    bad = EventLog(tampered_copy(log, str(tmp_path / "t.db"), "UPDATE events SET data=? WHERE seq=5", changed))
    res = bad.verify()
    assert (res.ok, res.bad_seq, res.head_seq) == (False, 5, 4) and "hash mismatch" in res.problem


def test_verify_finds_a_gap(log, tmp_path):
    log.append([ac(f"a{i}") for i in range(5)], NOW)
    res = EventLog(tampered_copy(log, str(tmp_path / "g.db"), "DELETE FROM events WHERE seq=3")).verify()
    assert (res.ok, res.bad_seq) == (False, 3) and "missing" in res.problem


def test_expect_head_catches_truncation(log, tmp_path):
    log.append([ac(f"a{i}") for i in range(6)], NOW)
    head = log.verify()
    want = (head.head_seq, head.head_hash)
    assert log.verify(expect_head=want).ok
    assert log.verify(expect_head=(3, list(log.read(2, limit=1))[0].hash.hex())).ok   # an older head is fine
    cut = EventLog(tampered_copy(log, str(tmp_path / "c.db"), "DELETE FROM events WHERE seq > 4"))
    assert cut.verify().ok                                           # the chain alone cannot tell
    res = cut.verify(expect_head=want)
    assert (res.ok, res.bad_seq) == (False, 5) and "truncated" in res.problem
    res = log.verify(expect_head=(6, "00" * 32))
    assert (res.ok, res.bad_seq) == (False, 6)


# ---- files, schema, durability --------------------------------------------------------------
def test_file_modes_and_durability(tmp_path):
    path = str(tmp_path / "deep" / "er" / "events.db")
    for durability, level in (("full", 2), ("normal", 1)):
        with EventLog(path, durability=durability) as lg:
            lg.append([ac()], NOW)
            assert lg.db.execute("PRAGMA synchronous").fetchall()[0][0] == level
            assert lg.db.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
            assert lg.db.execute("PRAGMA wal_autocheckpoint").fetchall()[0][0] == evlog.WAL_AUTOCHECKPOINT
            assert lg.db.execute("PRAGMA journal_size_limit").fetchall()[0][0] == evlog.JOURNAL_SIZE_LIMIT
            for suffix in ("", "-wal", "-shm"):
                assert os.stat(path + suffix).st_mode & 0o777 == 0o600, suffix


def _foreign(path: str) -> None:
    c = apsw.Connection(path)
    c.execute("CREATE TABLE notes(x); INSERT INTO notes VALUES (1)")
    c.close()


def _newer(path: str) -> None:
    EventLog(path).close()
    c = apsw.Connection(path)
    c.execute("PRAGMA journal_mode=DELETE").fetchall()
    c.execute(f"PRAGMA user_version={evlog.SCHEMA_VERSION + 1}")
    c.close()


@pytest.mark.parametrize("make,err", [
    (_foreign, SchemaError),                                          # another app's SQLite database
    (_newer, SchemaError),                                            # a newer fleetwatch schema
    (lambda p: open(p, "wb").write(b"hello, not a database\n" * 50), StoreError),  # not SQLite
])
def test_refused_files_are_untouched(tmp_path, make, err):
    path = str(tmp_path / "x.db")
    make(path)
    before, listing = sha(path), sorted(os.listdir(tmp_path))
    for create in (True, False):
        with pytest.raises(err) as ei:
            EventLog(path, create=create)
        assert ei.value.hint and ei.value.path == path
    assert sha(path) == before and sorted(os.listdir(tmp_path)) == listing


def test_bad_paths(tmp_path):
    with pytest.raises(StoreError, match="directory"):
        EventLog(str(tmp_path))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        EventLog(str(tmp_path / "afile" / "sub" / "events.db"))               # a parent is a file
    with pytest.raises(StoreError, match="no event log"):
        EventLog(str(tmp_path / "none.db"), create=False)
    assert not (tmp_path / "none.db").exists()


def test_migration_from_an_older_schema(db_path, monkeypatch):
    with EventLog(db_path) as lg:
        lg.append([ac()], NOW)
    v = evschema.SCHEMA_VERSION
    monkeypatch.setattr(evschema, "SCHEMA_VERSION", v + 1)
    monkeypatch.setitem(evschema.MIGRATIONS, v, "ALTER TABLE snapshots ADD COLUMN note TEXT;")
    with EventLog(db_path) as lg:
        assert lg.db.execute("PRAGMA user_version").fetchall()[0][0] == v + 1
        assert "note" in [r[1] for r in lg.db.execute("PRAGMA table_info(snapshots)")]
        assert lg.verify().ok and lg.head()[0] == 1


def test_failed_migration_changes_nothing(db_path, monkeypatch):
    with EventLog(db_path) as lg:
        lg.append([ac()], NOW)
    v = evschema.SCHEMA_VERSION
    monkeypatch.setattr(evschema, "SCHEMA_VERSION", v + 1)
    monkeypatch.setitem(evschema.MIGRATIONS, v, "ALTER TABLE snapshots ADD COLUMN note TEXT; SELECT * FROM nope;")
    with pytest.raises(SchemaError, match="migration failed"):
        EventLog(db_path)
    monkeypatch.setattr(evschema, "SCHEMA_VERSION", v)
    with EventLog(db_path) as lg:
        assert lg.db.execute("PRAGMA user_version").fetchall()[0][0] == v
        assert "note" not in [r[1] for r in lg.db.execute("PRAGMA table_info(snapshots)")]
        assert lg.verify().ok


def _v1_log(path: str) -> list[tuple]:
    """A log written by schema v1 (UNIQUE(id), ids as v1 generated them, one caller-given id)."""
    c = apsw.Connection(path)
    c.execute(evschema.MIGRATIONS[0])
    c.execute(f"PRAGMA application_id={evschema.APPLICATION_ID}; PRAGMA user_version=1")
    prev, rows = GENESIS, []
    for seq, id_, agent in [(1, "19ad0c1e6f8a3b1c2d4e5f6000000000", "a1"), (2, "start-1", "a2"),
                            (3, "19ad0c1e6f8a3b1c2d4e5f6000000001", "a1")]:
        ev = ac(agent)
        args = (seq, id_, "2025-11-29T19:03:20.000Z", "agent.classified", ev.subject, 1 + (seq == 3),
                encode_data(ev))
        prev = row_hash(prev, *args)
        rows.append((*args, prev))
    c.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", rows)
    c.execute("INSERT INTO snapshots VALUES ('fleet', 3, x'7b7d')")
    c.close()
    return rows


def test_migration_v1_to_v3_keeps_rows_chain_ids_and_idempotency(db_path):
    rows = _v1_log(db_path)
    with EventLog(db_path) as lg:
        assert lg.db.execute("PRAGMA user_version").fetchall()[0][0] == evschema.SCHEMA_VERSION
        assert [tuple(r) for r in lg.db.execute("SELECT * FROM events ORDER BY seq")] == rows  # byte for byte
        assert lg.guard_problems() == []
        assert lg.snapshots() == {}                                  # unbound (v1): dropped, replayed
        assert lg.verify().ok and lg.verify().head_hash == rows[-1][-1].hex()
        idx = {r[1] for r in lg.db.execute("SELECT * FROM sqlite_master WHERE type IN ('index', 'trigger')")}
        assert {"events_given_id", "events_no_update", "events_no_delete", "events_no_replace"} <= idx
        assert not any(t.startswith("events_v1") for t in idx)
        # v1 ids (its generated ones included) stay idempotency keys
        assert lg.append([Pending(ac("z"), id="start-1"), Pending(ac("z"), id=rows[2][1])], NOW) == [2, 3]
        assert lg.append([ac("a1")], NOW) == [4] and [r.version for r in lg.read(3)] == [3]
        with pytest.raises(apsw.ConstraintError, match="append-only"):
            lg.db.execute("DELETE FROM events WHERE seq=1")
        with pytest.raises(apsw.ConstraintError):                    # caller-given ids stay unique in SQL
            lg.db.execute("INSERT INTO events SELECT 99, id, time, type, 'x', 1, data, hash FROM events WHERE seq=2")


def test_failed_v1_to_v2_migration_leaves_v1(db_path, monkeypatch):
    rows = _v1_log(db_path)
    monkeypatch.setitem(evschema.MIGRATIONS, 1, evschema.MIGRATIONS[1] + "SELECT * FROM nope;")
    with pytest.raises(SchemaError, match="migration failed"):
        EventLog(db_path)
    c = apsw.Connection(db_path)
    assert c.execute("PRAGMA user_version").fetchall()[0][0] == 1
    assert [tuple(r) for r in c.execute("SELECT * FROM events ORDER BY seq")] == rows
    assert "events_v1" not in {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    c.close()


def test_generated_ids_name_their_seq_and_count_as_idempotency_keys(log):
    seqs = log.append([ac("a1"), ac("a2")], NOW)
    recs = list(log.read())
    assert [int(r.id[16:], 16) for r in recs] == seqs                # <16 hex><seq as 16 hex>
    assert all(len(r.id) == 32 and int(r.id, 16) >= 0 for r in recs)
    # a generated id given back (e.g. copied from `tail --json`) is found, not appended again
    assert log.append([Pending(ac("a9"), id=recs[1].id), Pending(ac("a9"), id=recs[0].id[:16] + "f" * 16)],
                      NOW) == [2, 3]
    # an id of the generated form that names another row's seq is an ordinary caller-given id
    forged = "0" * 16 + f"{1:016x}"
    assert log.append([Pending(ac("a9"), id=forged)], NOW) == [4]
    assert log.append([Pending(ac("a9"), id=forged)], NOW) == [4]
    other = EventLog(log.path)                                       # another connection: another prefix
    [s] = other.append([ac("a3")], NOW)
    assert list(log.read(s - 1))[0].id[:16] != recs[0].id[:16] and other.append(
        [Pending(ac("a3"), id=recs[0].id)], NOW) == [1]
    other.close()
    assert log.verify().ok


def test_checkpoint_moves_the_wal_into_the_database(log, db_path):
    log.append([ac(f"a{i}") for i in range(50)], NOW)
    reader = EventLog(db_path, create=False)
    assert len(list(reader.read())) == 50                            # a reader between calls pins nothing
    log.checkpoint()
    busy, frames, done = log.db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
    assert (busy, frames) == (0, done) and frames > 0                # every frame already copied back
    log.append([ac("b")], NOW)                                       # the WAL restarts from its start
    assert log.db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0][1] < frames
    reader.close()
    assert log.verify().ok


def test_two_processes_creating_one_log(db_path):
    code = "import sys; from events.log import EventLog; EventLog(sys.argv[1]).close(); print('ok')"
    ps = [py(code, db_path) for _ in range(4)]
    outs = [p.communicate(timeout=30) for p in ps]
    assert [o.strip() for o, _ in outs] == ["ok"] * 4, outs


# ---- readers, followers -----------------------------------------------------------------------
def test_readers_never_block_the_writer(log, db_path):
    log.append([ac("a1")], NOW)
    reader = apsw.Connection(db_path)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM events").fetchall()[0][0] == 1  # holds a read txn
    log.append([ac("a2")], NOW)                                      # no SQLITE_BUSY in WAL mode
    assert reader.execute("SELECT count(*) FROM events").fetchall()[0][0] == 1  # its snapshot
    reader.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM events").fetchall()[0][0] == 2
    reader.close()


def test_read_and_follow_hold_no_transaction_between_items(log, db_path):
    log.append([ac(f"a{i}") for i in range(10)], NOW)
    r = EventLog(db_path, create=False)
    it = r.read(chunk=3)
    next(it)
    assert not r.db.in_transaction
    f = r.follow(0, stop=lambda: False)
    next(f)
    assert not r.db.in_transaction
    r.close()


def test_follow_delivers_new_events_quickly_and_stops(db_path, log):
    log.append([ac("a0")], NOW)
    reader = EventLog(db_path, create=False)
    got: list[tuple[int, float]] = []
    stop = threading.Event()

    def run() -> None:
        for rec in reader.follow(0, types=["agent.classified"], subject="agent:", stop=stop.is_set):
            got.append((rec.seq, time.monotonic()))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 60                                 # liveness only, generous under load
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    clock = time.pthread_getcpuclockid(t.ident)                      # the follower's own CPU, not the
    cpu0 = time.clock_gettime(clock)                                 # other threads a worker still runs
    time.sleep(0.5)                                                  # idle: nothing to read
    idle_cpu = time.clock_gettime(clock) - cpu0
    lat = []
    for i in range(1, 4):
        t0 = time.monotonic()
        log.append([WatcherStarted(version="1", pid=i), ac(f"a{i}")], NOW)  # the filter skips the first
        while len(got) <= i and time.monotonic() - t0 < 30:          # liveness only, generous under load
            time.sleep(0.005)
        lat.append(got[-1][1] - t0)
    stop.set()
    t.join(5)
    assert not t.is_alive()
    assert [s for s, _ in got] == [1, 3, 5, 7]
    # latency is a benchmark row (tests/bench), not a timed assertion: each append arrived above
    assert idle_cpu < 0.25, idle_cpu                                 # an idle follower does not spin
    reader.close()


# ---- the writer lock -------------------------------------------------------------------------
HOLDER = """
import sys, time
from events.log import EventLog
EventLog(sys.argv[1], lock=True)
print("held", flush=True)
time.sleep(60)
"""


def test_second_writer_refused_naming_the_holder_pid(db_path):
    p = py(HOLDER, db_path)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(WriterLocked) as ei:
            WriterLock(db_path).acquire()
        assert ei.value.pid == p.pid and ei.value.exit_code == 3 and ei.value.op == "lock"
        assert str(p.pid) in str(ei.value) and ei.value.hint
        with EventLog(db_path) as lg:                                # readers (and appenders) still work
            lg.append([ac()], NOW)
            assert lg.head()[0] == 1
    finally:
        p.kill()
        p.wait()
        p.stdout.close(), p.stderr.close()


def test_stale_lock_of_a_sigkilled_process_is_taken_over(db_path):
    p = py(HOLDER, db_path)
    assert p.stdout.readline().strip() == "held"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stdout.close(), p.stderr.close()
    assert holder_pid(db_path) is None                               # the kernel dropped it
    with WriterLock(db_path) as lk:
        assert lk.held and holder_pid(db_path) == os.getpid()
    assert holder_pid(db_path) is None                               # released
    assert not os.path.exists(db_path + ".lock")                     # no sidecar, ever


def test_lock_in_process_release_and_reacquire(tmp_path):
    path = str(tmp_path / "events.db")
    EventLog(path).close()
    a = WriterLock(path).acquire()
    with pytest.raises(WriterLocked) as ei:
        WriterLock(path).acquire()
    assert ei.value.pid == os.getpid()
    a.release()
    a.release()                                                      # idempotent
    with WriterLock(path):
        pass


def test_lock_on_an_unusable_folder(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StoreError):
        WriterLock(str(tmp_path / "afile" / "events.db")).acquire()


def test_append_failed_is_typed(log):
    log.append([ac()], NOW)
    log.db.execute("PRAGMA query_only=ON")                           # every write now fails in SQLite
    with pytest.raises(AppendFailed):
        log.append([ac("a2")], NOW)
    log.db.execute("PRAGMA query_only=OFF")
    assert log.append([ac("a2")], NOW) == [2] and log.verify().ok
