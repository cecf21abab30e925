"""The log cannot be bypassed, lose silently, or lie (issue 14): real files, real subprocesses.

One test per way it was broken: a second writer through a symlink, a hard link or after deleting
a sidecar; the log deleted or replaced under a running watcher; a damaged row; a read-only copy;
an edited snapshot; INSERT OR REPLACE and a dropped trigger; a cut tail; `cp` of a live log; a
mistyped --db folder.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time

import apsw
import pytest

import events.schema as evschema
from events import query
from events.errors import GuardsMissing, LogReplaced, StoreError, WriterLocked
from events.lock import holder_pid
from events.log import EventLog
from events.types import AgentClassified, NoticeSent, RuleViolated
from tests.support.tamper import raw
from tests.support.exe import ROOT

NOW = 1_764_443_000.0
FW = [sys.executable, "-c", "import sys; from watcher.entry import main; sys.argv[0] = 'fleetwatch'; main()"]
ENV = dict(os.environ, PYTHONPATH=ROOT)


def fw(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    env = dict(ENV, **kw.pop("env", {}))
    return subprocess.run([*FW, *args], capture_output=True, text=True, timeout=timeout, env=env, **kw)


def ac(agent: str, to: str = "RECLAMA") -> AgentClassified:
    return AgentClassified(agent=agent, to=to, state="waiting", phase="haciendo", reason="r", source="fleet")


def seed(path: str, n: int = 12) -> EventLog:
    lg = EventLog(path, durability="normal")
    kinds = [lambda i: ac(f"a{i % 4}"), lambda i: RuleViolated(run="T1", rule="no-redo", detail=f"s{i}"),
             lambda i: NoticeSent(notice=f"n{i}", covers=[i], attempt=1)]
    lg.append([kinds[i % 3](i) for i in range(n)], NOW)
    return lg


HOLDER = """
import sys, time
from events.log import EventLog
lg = EventLog(sys.argv[1], lock=True)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(db_path):
    EventLog(db_path).close()
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), db_path], env=ENV, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().strip() == "held", p.stderr.read()
    yield p
    p.kill()
    p.wait()
    p.stdout.close(), p.stderr.close()


# ---- 1. one writer per file, whatever the path ------------------------------------------------
def test_second_writer_through_symlink_refused(holder, db_path, tmp_path):
    alias = tmp_path / "alias.db"
    alias.symlink_to(db_path)
    with pytest.raises(WriterLocked) as ei:
        EventLog(str(alias), lock=True)
    assert ei.value.pid == holder.pid and ei.value.exit_code == 3
    r = fw("run", "--once", "--db", str(alias), "--config", _config(tmp_path))
    assert r.returncode == 3 and f"pid {holder.pid}" in r.stderr


def test_second_writer_through_relative_path_refused(holder, db_path, tmp_path):
    r = subprocess.run([sys.executable, "-c", "import sys; from events.log import EventLog; "
                        "EventLog('./events.db', lock=True)"], cwd=tmp_path, env=ENV, capture_output=True, text=True)
    assert r.returncode != 0 and "WriterLocked" in r.stderr


def test_hard_linked_log_refused(db_path, tmp_path):
    seed(db_path).close()
    os.link(db_path, tmp_path / "hard.db")
    for p in (db_path, str(tmp_path / "hard.db")):
        with pytest.raises(StoreError, match="2 hard links"):
            EventLog(p, lock=True)
    cfg = _config(tmp_path)
    before = sorted(os.listdir(tmp_path))
    r = fw("run", "--once", "--db", str(tmp_path / "hard.db"), "--config", cfg)
    assert r.returncode == 2 and "hard links" in r.stderr
    assert sorted(os.listdir(tmp_path)) == before                    # nothing written beside it


def test_no_sidecar_to_delete(holder, db_path, tmp_path):
    assert not any(n.endswith(".lock") for n in os.listdir(tmp_path))  # the lock is the file's own
    assert holder_pid(db_path) == holder.pid
    with pytest.raises(WriterLocked):
        EventLog(db_path, lock=True)


# ---- 2. the watcher notices its log vanishing or being replaced ----------------------------
def _config(tmp_path, db: str | None = None) -> str:
    fleet = tmp_path / "fleet"
    for a, st in (("a1", "waiting"), ("a2", "busy")):
        (fleet / a).mkdir(parents=True, exist_ok=True)
        (fleet / a / "goal.json").write_text(json.dumps({"agent": a, "state": st, "phase": "haciendo",
                                                         "dod_contract": "tests pass"}))
    cfg = tmp_path / "c.toml"
    cfg.write_text((f'[store]\npath = "{db}"\n' if db else "") + '[watch]\ninterval = "50ms"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    return str(cfg)


def _classes(path: str) -> dict[str, str]:
    with EventLog(path, create=False, readonly=True) as lg:
        return {r.event.agent: r.event.to for r in lg.read(0, types=["agent.classified"])}


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_watcher_stops_when_its_log_vanishes(tmp_path, how):
    db = str(tmp_path / "events.db")
    cfg = _config(tmp_path, db)
    p = subprocess.Popen([*FW, "run", "--config", cfg], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not os.path.exists(db) or len(_classes(db)) < 2):
        time.sleep(0.05)
    if how == "deleted":
        os.unlink(db)
    else:
        seed(str(tmp_path / "other.db")).close()
        os.replace(tmp_path / "other.db", db)
    rc = p.wait(20)
    err = p.stderr.read()
    p.stdout.close(), p.stderr.close()
    assert rc == 1, err                                              # non-zero: systemd restarts it
    assert ("deleted" if how == "deleted" else "replaced") in err and "Traceback" not in err
    left = os.listdir(tmp_path)
    assert not any(n in left for n in ("events.db-wal", "events.db-shm"))  # set aside, never replayed
    assert fw("run", "--once", "--config", cfg).returncode == 0      # the restart records every class again
    got = _classes(db)                                               # (into the file now at the path)
    assert got["a1"] == "RECLAMA" and got["a2"] == "TRABAJANDO"
    assert fw("verify", "--config", cfg).returncode == 0


def test_append_refused_after_the_file_was_moved(db_path, tmp_path):
    lg = EventLog(db_path, lock=True)
    lg.append([ac("a1")], NOW)
    os.rename(db_path, tmp_path / "moved.db")
    with pytest.raises(LogReplaced):
        lg.append([ac("a2")], NOW)
    lg.close()
    with EventLog(str(tmp_path / "moved.db"), readonly=True, create=False) as m:
        assert m.head()[0] == 1                                      # nothing written after the move


# ---- 3. readers survive damage; read-only copies ---------------------------------------------
def test_damaged_rows_reported_by_seq_and_readers_go_on(db_path):
    seed(db_path).close()
    raw(db_path, "UPDATE events SET data = '{\"x\": 1}' WHERE seq = 4")   # text-typed data
    raw(db_path, "UPDATE events SET data = x'00ff' WHERE seq = 7")        # undecodable
    t = fw("tail", "-n", "20", "--db", db_path)
    assert t.returncode == 0 and "Traceback" not in t.stderr
    assert "seq 4: damaged row" in t.stderr and "seq 7: damaged row" in t.stderr
    assert len(t.stdout.splitlines()) == 12 and "DAMAGED" in t.stdout
    e = fw("export", "--db", db_path)
    lines = [json.loads(x) for x in e.stdout.splitlines()]
    assert e.returncode == 0 and [x["seq"] for x in lines] == list(range(1, 13))
    assert lines[3]["damaged"] and lines[3]["raw"]["data_text"] == '{"x": 1}'
    assert lines[6]["raw"]["data_hex"] == "00ff" and "data" in lines[7]
    for cmd in (["status"], ["rebuild", "--check"]):
        r = fw(*cmd, "--db", db_path)
        assert "Traceback" not in r.stderr and "seq 4: damaged row" in r.stderr, (cmd, r.stderr)
    assert fw("status", "--db", db_path).returncode == 0
    v = fw("verify", "--db", db_path)
    assert v.returncode == 1 and "seq 4" in v.stderr


def test_read_only_copy_can_be_verified_and_exported(db_path, tmp_path):
    seed(db_path).close()
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(db_path, ro / "events.db")
    os.chmod(ro / "events.db", 0o444)
    os.chmod(ro, 0o555)
    root = os.geteuid() == 0
    if root:  # root writes through modes: make the copy and its folder immutable instead
        if subprocess.run(["chattr", "+i", str(ro / "events.db"), str(ro)], capture_output=True).returncode:
            os.chmod(ro, 0o755)
            pytest.skip("root without chattr +i: cannot make a read-only copy")
    try:
        for cmd in (["verify"], ["export"], ["tail"], ["status", "--json"], ["rebuild", "--check"],
                    ["backup", str(tmp_path / "bk.db")]):
            r = fw(*cmd, "--db", str(ro / "events.db"))
            assert r.returncode == 0, (cmd, r.stderr)
        assert sorted(os.listdir(ro)) == ["events.db"]               # nothing written beside it
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(ro / "events.db"), str(ro)])
        os.chmod(ro, 0o755)


# ---- 4. snapshots are evidence too ------------------------------------------------------------
def test_edited_snapshot_is_not_trusted(tmp_path):
    db = str(tmp_path / "events.db")
    cfg = _config(tmp_path, db)
    assert fw("run", "--once", "--config", cfg).returncode == 0      # stops with a snapshot
    c = apsw.Connection(db)
    (data,) = c.execute("SELECT data FROM snapshots WHERE name = 'fleet'").fetchall()[0]
    c.execute("UPDATE snapshots SET data = ? WHERE name = 'fleet'", (data.replace(b"RECLAMA", b"TRABAJANDO"),))
    c.close()
    st = json.loads(fw("status", "--json", "--config", cfg).stdout)
    assert {a["agent"]: a["class"] for a in st["agents"]}["a1"] == "RECLAMA"   # replayed, not trusted
    v = fw("verify", "--config", cfg)
    assert v.returncode == 1 and "snapshots" in v.stderr and "fleet" in v.stderr
    assert fw("rebuild", "--check", "--config", cfg).returncode == 1
    assert fw("rebuild", "--config", cfg).returncode == 0            # rewrites bound snapshots
    assert fw("verify", "--config", cfg).returncode == 0


def test_snapshot_of_another_history_is_not_trusted(db_path):
    lg = seed(db_path)
    lg.put_snapshots(5, {"fleet": b"{}"})
    assert lg.snapshots() == {"fleet": (5, b"{}")}
    raw(db_path, "UPDATE events SET hash = zeroblob(32) WHERE seq = 5")
    assert lg.snapshots() == {} and "another chain hash" in lg.snapshot_problems["fleet"]
    lg.close()


# ---- 5. append-only, really --------------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "INSERT OR REPLACE INTO events SELECT * FROM events WHERE seq = 3",
    "REPLACE INTO events SELECT 13, id || 'x', time, type, subject, version, data, hash FROM events WHERE seq = 3",
    "INSERT INTO events SELECT * FROM events WHERE seq = 3 ON CONFLICT DO NOTHING",
    "INSERT INTO events SELECT * FROM events WHERE seq = 3 ON CONFLICT(seq) DO UPDATE SET data = x'00'",
    "INSERT INTO events SELECT 20, id || 'y', time, type, 'new', 1, data, hash FROM events WHERE seq = 3",
])
def test_insert_or_replace_and_upsert_refused(db_path, sql):
    lg = seed(db_path)
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        lg.db.execute(sql)
    assert lg.verify().ok and lg.head()[0] == 12
    lg.close()


def test_dropped_trigger_found_by_verify_doctor_and_run(tmp_path):
    db = str(tmp_path / "events.db")
    cfg = _config(tmp_path, db)
    assert fw("run", "--once", "--config", cfg).returncode == 0
    c = apsw.Connection(db)
    c.execute("DROP TRIGGER events_no_delete")
    c.close()
    v = fw("verify", "--config", cfg)
    assert v.returncode == 1 and "events_no_delete" in v.stderr and "table events" in v.stderr
    d = fw("doctor", "--config", cfg)
    assert "events_no_delete" in d.stdout + d.stderr
    r = fw("run", "--once", "--config", cfg)
    assert r.returncode == 2 and "verify --restore-guards" in r.stderr
    with pytest.raises(GuardsMissing):
        EventLog(db, lock=True)
    assert fw("verify", "--restore-guards", "--config", cfg).returncode == 0
    assert fw("run", "--once", "--config", cfg).returncode == 0


def test_edited_trigger_is_found(db_path):
    seed(db_path).close()
    c = apsw.Connection(db_path)
    c.execute("DROP TRIGGER events_no_update; CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
              "WHEN 0 BEGIN SELECT RAISE(ABORT, 'x'); END")
    c.close()
    with EventLog(db_path) as lg:
        assert lg.guard_problems() == ["trigger events_no_update differs from the one fleetwatch created"]


# ---- 6. truncation caught without remembering a hash ----------------------------------------
def test_cut_tail_caught_by_plain_verify(db_path):
    seed(db_path).close()
    assert fw("verify", "--db", db_path).returncode == 0
    raw(db_path, "DELETE FROM events WHERE seq > 9")
    v = fw("verify", "--db", db_path)
    assert v.returncode == 1 and "truncated tail" in v.stderr and "events.db.head says 12" in v.stderr


def test_head_label_for_push_bodies(db_path):
    lg = seed(db_path)
    seq, h = lg.head()
    assert lg.head_label() == f"{seq}:{h.hex()[:8]}"
    lg.close()


# ---- 7. backup --------------------------------------------------------------------------------
def test_backup_while_the_wal_holds_the_events(db_path, tmp_path):
    lg = seed(db_path)                                               # everything still in the WAL
    shutil.copy(db_path, tmp_path / "cp.db")
    with EventLog(str(tmp_path / "cp.db"), readonly=True, create=False) as cp_copy:
        assert cp_copy.head()[0] < 12                                # what `cp` gets
    r = fw("backup", str(tmp_path / "bk.db"), "--db", db_path)
    assert r.returncode == 0 and "12 events" in r.stdout, r.stderr
    with EventLog(str(tmp_path / "bk.db"), readonly=True, create=False) as bk:
        assert bk.head() == lg.head() and bk.verify().ok and bk.verify().anchor.startswith("12:")
    assert os.stat(tmp_path / "bk.db").st_mode & 0o777 == 0o600
    assert fw("backup", str(tmp_path / "bk.db"), "--db", db_path).returncode == 2      # never overwritten
    assert fw("backup", str(tmp_path / "no" / "bk.db"), "--db", db_path).returncode == 2
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".partial")]
    lg.close()


# ---- 8. no silent new logs --------------------------------------------------------------------
def test_explicit_db_in_a_missing_folder_refused(tmp_path):
    cfg = _config(tmp_path)
    r = fw("run", "--once", "--config", cfg, "--db", str(tmp_path / "typo" / "events.db"))
    assert r.returncode == 2 and "does not exist" in r.stderr and not (tmp_path / "typo").exists()
    r = fw("run", "--once", "--config", cfg, "--db", str(tmp_path / "typo" / "events.db"), "--create")
    assert r.returncode == 0 and (tmp_path / "typo" / "events.db").exists()
    r = fw("run", "--once", "--config", cfg, env={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert r.returncode == 0 and (tmp_path / "xdg" / "fleetwatch" / "events.db").exists()


def test_refused_foreign_database_gets_nothing_beside_it(tmp_path):
    c = apsw.Connection(str(tmp_path / "foreign.db"))
    c.execute("CREATE TABLE t(x)")
    c.close()
    cfg = _config(tmp_path)
    before = sorted(os.listdir(tmp_path))
    r = fw("run", "--once", "--config", cfg, "--db", str(tmp_path / "foreign.db"))
    assert r.returncode == 2
    assert sorted(os.listdir(tmp_path)) == before


# ---- schema v3 migration --------------------------------------------------------------------
def _v2_log(path: str) -> None:
    """A log as schema v2 wrote it: two events, one (unbound) snapshot."""
    from events.chain import GENESIS, row_hash
    from events.types import encode_data

    c = apsw.Connection(path)
    c.execute(evschema.MIGRATIONS[0])
    c.execute(evschema.MIGRATIONS[1])
    c.execute(f"PRAGMA application_id={evschema.APPLICATION_ID}; PRAGMA user_version=2; PRAGMA journal_mode=WAL")
    prev = GENESIS
    for seq, agent in ((1, "a1"), (2, "a2")):
        ev = ac(agent)
        args = (seq, f"{'0' * 16}{seq:016x}", "2025-11-29T19:03:20.000Z", "agent.classified", ev.subject, 1,
                encode_data(ev))
        prev = row_hash(prev, *args)
        c.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", (*args, prev))
    c.execute("INSERT INTO snapshots VALUES ('fleet', 2, x'7b7d')")
    c.close()


def test_v2_log_migrates_to_v3_in_one_transaction(db_path, monkeypatch):
    _v2_log(db_path)
    with EventLog(db_path, readonly=True, create=False) as old:      # read-only: no migration, readable
        assert old.schema_version == 2 and old.head()[0] == 2 and old.verify().ok and old.snapshots() == {}
        assert [r.seq for r in old.last(1, types=["agent.classified"])] == [2]
    monkeypatch.setitem(evschema.MIGRATIONS, 2, evschema.MIGRATIONS[2] + "SELECT * FROM nope;")
    with pytest.raises(evschema.SchemaError):
        EventLog(db_path)
    monkeypatch.undo()
    c = apsw.Connection(db_path)
    assert c.execute("PRAGMA user_version").fetchall()[0][0] == 2   # untouched
    assert "events_no_replace" not in {n for (n,) in c.execute("SELECT name FROM sqlite_master")}
    c.close()
    with EventLog(db_path) as lg:
        assert lg.schema_version == evschema.SCHEMA_VERSION and lg.guard_problems() == []
        assert lg.snapshots() == {} and lg.verify().ok               # v2 snapshots (unbound) dropped: replayed
        lg.put_snapshots(2, {"fleet": b"{}"})
        assert lg.verify().ok and lg.snapshots() == {"fleet": (2, b"{}")}


# ---- issue 19.4: tail --type / --subject through indexes ------------------------------------
def test_last_seqs_equal_a_full_scan(db_path):
    rng = random.Random(7)
    lg = EventLog(db_path, durability="normal")
    subjects = [f"a{i}" for i in range(90)]
    for _ in range(30):
        lg.append([ac(rng.choice(subjects)) if rng.random() < 0.8 else
                   RuleViolated(run=f"T{rng.randint(1, 3)}", rule="no-redo", detail="d") for _ in range(200)], NOW)
    rows = list(lg.db.execute("SELECT seq, type, subject FROM events ORDER BY seq"))
    for types, subject, exact in [(["rule.violated"], None, False), (["nope"], None, False),
                                  (None, "agent:a1", False), (None, "agent:a1", True), (None, "run:", False),
                                  (["agent.classified", "rule.violated"], "run:T2", False), (None, "agent:", False),
                                  (["nope"], "agent:", False)]:
        for n in (1, 5, 20, 5000):
            want = [s for s, t, su in rows if (not types or t in types) and
                    (subject is None or (su == subject if exact else su.startswith(subject)))][-n:]
            assert query.last_seqs(lg.db, n, types, subject, exact) == want, (types, subject, exact, n)
    c = apsw.Connection(db_path)
    c.execute("DELETE FROM event_types WHERE type = 'rule.violated'")  # a tampered list is named
    c.close()
    v = lg.verify()
    assert not v.ok and v.table == "event_types" and "rule.violated" in v.problem
    evschema.restore_guards(lg.db)
    assert lg.verify().ok
    lg.close()


def test_tail_type_absent_prints_nothing_fast_path(db_path):
    seed(db_path, 300).close()
    r = fw("tail", "--type", "rule.violated", "-n", "3", "--json", "--db", db_path)
    assert [json.loads(x)["seq"] for x in r.stdout.splitlines()] == [293, 296, 299]


def test_vanished_log_is_said_in_one_push(tmp_path):
    """The fallback notice: the log cannot record it any more, so it goes straight out."""
    import http.server
    import threading

    got: list[bytes] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            got.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        db = str(tmp_path / "events.db")
        cfg = _config(tmp_path, db)
        with open(cfg, "a") as f:
            f.write(f'[notify]\nurls = ["json://127.0.0.1:{srv.server_port}/hook"]\ngroup_wait = "1h"\n')
        p = subprocess.Popen([*FW, "run", "--config", cfg], env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not os.path.exists(db) or len(_classes(db)) < 2):
            time.sleep(0.05)
        os.unlink(db)
        assert p.wait(30) == 1
        p.stderr.close()
        assert any(b"event log is gone" in g for g in got), got
    finally:
        srv.shutdown()
