"""`fleetwatch tail`, `verify`, `export` (watcher/cli/log.py): CliRunner and real subprocesses."""
from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time

import apsw
import pytest

from events.log import EventLog
from events.schema import restore_guards
from events.types import AgentClassified, NoticeSent, RuleViolated, WatcherStarted
from tests.support.exe import FLEETWATCH
from tests.support.exe import ROOT

NOW = 1_764_443_000.0
FW = ["-c", "import sys; from watcher.entry import main; sys.argv[0] = 'fleetwatch'; main()"]


def seed(path: str, n: int = 30) -> EventLog:
    """A log of ``n`` events cycling agent.classified / rule.violated / notice.sent."""
    lg = EventLog(path, durability="normal")
    kinds = [lambda i: AgentClassified(agent=f"a{(i // 3) % 3}", to="RECLAMA", reason="waiting for input", source="fleet"),
             lambda i: RuleViolated(run="T1", rule="no-redo", detail=f"step {i}"),
             lambda i: NoticeSent(notice=f"n{i}", covers=[i], attempt=1)]
    lg.append([kinds[i % 3](i) for i in range(n)], NOW)
    return lg


def jl(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fw(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *FW, *args], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


# ---- tail ----------------------------------------------------------------------------------
def test_tail_json_is_exactly_the_contract_line(cli, db_path):
    lg = seed(db_path)
    r = cli("tail", "--json", "--db", db_path)
    assert r.exit_code == 0, r.output
    got = jl(r.stdout)
    assert [e["seq"] for e in got] == list(range(11, 31))            # the last 20 by default
    assert got == [rec.to_json() for rec in lg.read(10)]
    assert list(got[0]) == ["seq", "id", "time", "type", "subject", "version", "data"]
    assert got[-1]["data"] == {"notice": "n29", "covers": [29], "attempt": 1, "title": "", "severity": "", "keys": []}


@pytest.mark.parametrize("args,seqs", [
    (["-n", "3"], [28, 29, 30]),                                      # last N
    (["-n", "0"], []),                                                # nothing
    (["--since", "25"], [26, 27, 28, 29, 30]),                        # everything after SEQ
    (["--since", "25", "-n", "2"], [26, 27]),                         # first N after SEQ
    (["--type", "rule.violated", "-n", "2"], [26, 29]),               # one type
    (["--type", "rule.violated", "--type", "notice.sent", "-n", "3"], [27, 29, 30]),  # repeatable
    (["-t", "rule.violated,notice.sent", "-n", "3"], [27, 29, 30]),   # comma list
    (["--type", "notice.*", "-n", "2"], [27, 30]),                    # glob over known tags
    (["--type", "nothing.*"], []),                                    # a glob matching nothing
    (["--subject", "agent:a1", "--since", "0"], [4, 13, 22]),         # subject prefix
    (["--subject", "agent:", "-n", "2"], [25, 28]),
])
def test_tail_selection(cli, db_path, args, seqs):
    seed(db_path)
    r = cli("tail", "--json", "--db", db_path, *args)
    assert r.exit_code == 0, r.output
    assert [e["seq"] for e in jl(r.stdout)] == seqs


def test_tail_human_lines_are_plain_when_piped(cli, db_path):
    seed(db_path)
    r = cli("tail", "-n", "2", "--db", db_path)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and "\x1b[" not in r.stdout
    assert lines[0].split()[:4] == ["29", "2025-11-29T19:03:20.000Z", "run:T1", "v10"]
    assert "rule.violated" in lines[0] and 'detail="step 28"' in lines[0]
    assert "notice:n29" in lines[1] and "notice=" not in lines[1]         # the id once, in the subject
    assert "items=1" in lines[1] and "title" not in lines[1]
    v = cli("tail", "-n", "1", "-v", "--db", db_path).stdout             # -v: every field
    assert "covers=29" in v and "attempt=1" in v


def test_tail_colours_on_a_tty(db_path):
    seed(db_path)
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, *FW, "tail", "-n", "2", "--db", db_path], stdout=slave, stderr=slave,
                         env=dict(os.environ, PYTHONPATH=ROOT, TERM="xterm-256color", COLUMNS="200"))
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 10)
        if not r:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(10)
    os.close(master)
    assert p.returncode == 0 and b"\x1b[" in out and b"rule.violated" in out


def test_db_from_env_and_config(cli, db_path, tmp_path, monkeypatch):
    seed(db_path, 3)
    monkeypatch.setenv("FLEETWATCH_DB", db_path)
    assert [e["seq"] for e in jl(cli("tail", "--json").stdout)] == [1, 2, 3]
    monkeypatch.delenv("FLEETWATCH_DB")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{db_path}"\n')
    assert [e["seq"] for e in jl(cli("export", "--config", str(cfg)).stdout)] == [1, 2, 3]


def test_reading_a_missing_log_says_so_and_creates_nothing(cli, tmp_path):
    path = str(tmp_path / "none" / "events.db")
    for cmd in (["tail"], ["tail", "--json"], ["export"]):
        r = cli(*cmd, "--db", path)
        assert r.exit_code == 0 and r.stdout == "" and "no event log" in r.stderr
    r = cli("verify", "--db", path)
    assert r.exit_code == 2 and "no event log" in r.stderr
    assert not os.path.exists(os.path.dirname(path))


# ---- tail -f (real processes) -----------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_tail_follow_streams_and_exits_0_on_signal(db_path, sig):
    lg = seed(db_path, 5)
    p = fw("tail", "-f", "--json", "-n", "1", "--type", "watcher.started", "--db", db_path)
    try:
        lg.append([WatcherStarted(version="1", pid=1)], NOW)
        first = json.loads(p.stdout.readline())
        lg.append([AgentClassified(agent="zz", to="X"), WatcherStarted(version="1", pid=2)], NOW)
        second = json.loads(p.stdout.readline())
        # (its latency is a benchmark row, not a timed assertion here)
        assert (first["seq"], second["seq"]) == (6, 8) and second["data"]["pid"] == 2
        p.send_signal(sig)
        assert p.wait(10) == 0
        assert "Traceback" not in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close(), p.stderr.close()


def test_tail_follow_waits_for_the_log_to_appear(tmp_path):
    path = str(tmp_path / "later.db")
    p = fw("tail", "-f", "--json", "--db", path)
    try:
        time.sleep(0.5)
        assert p.poll() is None and not os.path.exists(path)          # waiting, not creating
        EventLog(path).append([WatcherStarted(version="1", pid=1)], NOW)
        assert json.loads(p.stdout.readline())["seq"] == 1
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close(), p.stderr.close()


def test_tail_into_a_closed_pipe_is_quiet(db_path):
    seed(db_path, 3000)
    sh = subprocess.run(f"'{sys.executable}' {FW[0]} \"{FW[1]}\" tail --json -n 3000 --db '{db_path}' | head -1",
                        shell=True, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=60)
    assert sh.returncode == 0 and len(sh.stdout.splitlines()) == 1
    assert "Traceback" not in sh.stderr and "Broken" not in sh.stderr, sh.stderr


# ---- verify ---------------------------------------------------------------------------------
def _copy_with(lg: EventLog, dst: str, sql: str, *args) -> str:
    lg.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(lg.path, dst)
    c = apsw.Connection(dst)
    c.execute("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP TRIGGER events_no_replace")
    c.execute(sql, args)
    restore_guards(c)  # a careful tamperer puts the guards back: only the chain and the anchor can tell
    c.close()
    return dst


def test_verify_ok_prints_the_head(cli, db_path):
    lg = seed(db_path, 12)
    seq, h = lg.head()
    r = cli("verify", "--db", db_path)
    assert r.exit_code == 0 and f"head 12:{h.hex()}" in r.stdout and "12 events" in r.stdout
    j = json.loads(cli("verify", "--json", "--db", db_path).stdout)
    assert j == {"ok": True, "head_seq": 12, "head_hash": h.hex(), "count": 12, "bad_seq": None, "problem": "",
                 "table": "", "anchor": f"12:{h.hex()}", "snapshots": 0}
    assert cli("verify", "--expect-head", f"12:{h.hex().upper()}", "--db", db_path).exit_code == 0


def test_verify_names_the_altered_seq_in_a_tampered_copy(cli, db_path, tmp_path):
    lg = seed(db_path, 12)
    data = list(lg.read(6, limit=1))[0].data
    i = data.index(b"RECLAMA")
    bad = _copy_with(lg, str(tmp_path / "bad.db"), "UPDATE events SET data=? WHERE seq=7",
                     data[:i] + b"m" + data[i + 1:])                  # one byte of seq 7
    r = cli("verify", "--db", bad)
    assert r.exit_code == 1
    assert "seq 7" in r.stderr and "hash mismatch" in r.stderr and "BROKEN at seq 7" in r.stdout
    j = json.loads(cli("verify", "--json", "--db", bad).stdout)
    assert (j["ok"], j["bad_seq"], j["head_seq"]) == (False, 7, 6)
    assert cli("verify", "--db", db_path).exit_code == 0              # the original is intact


def test_verify_expect_head_catches_truncation(cli, db_path, tmp_path):
    lg = seed(db_path, 12)
    head = f"12:{lg.head()[1].hex()}"
    cut = _copy_with(lg, str(tmp_path / "cut.db"), "DELETE FROM events WHERE seq > 9")
    assert cli("verify", "--db", cut).exit_code == 0                  # a shorter chain is still a chain
    r = cli("verify", "--expect-head", head, "--db", cut)
    assert r.exit_code == 1 and "seq 10" in r.stderr and "truncated" in r.stderr


@pytest.mark.parametrize("bad", ["12", "x:ab", "12:zz", "-1:" + "0" * 64, "3:" + "0" * 7, "3:" + "0" * 65])
def test_verify_rejects_a_malformed_expect_head(cli, db_path, bad):
    seed(db_path, 3)
    r = cli("verify", "--expect-head", bad, "--db", db_path)
    assert r.exit_code == 2 and "--expect-head" in r.output


# ---- export ---------------------------------------------------------------------------------
def test_export_all_and_since(cli, db_path):
    lg = seed(db_path, 2500)
    r = cli("export", "--db", db_path)
    assert r.exit_code == 0
    got = jl(r.stdout)
    assert len(got) == 2500 and got == [rec.to_json() for rec in lg.read()]
    assert [e["seq"] for e in jl(cli("export", "--since", "2497", "--db", db_path).stdout)] == [2498, 2499, 2500]


# ---- bad --db: one message, exit 2, file untouched ---------------------------------------------
def _dir(tmp):
    os.mkdir(tmp / "adir")
    return tmp / "adir"


def _text(tmp):
    p = tmp / "notes.txt"
    p.write_text("not a database\n" * 100)
    return p


def _foreign(tmp):
    p = tmp / "other.sqlite"
    c = apsw.Connection(str(p))
    c.execute("CREATE TABLE t(x); INSERT INTO t VALUES ('keep me')")
    c.close()
    return p


def _newer(tmp):
    p = tmp / "newer.db"
    with EventLog(str(p)) as lg:
        lg.append([WatcherStarted(version="9", pid=1)], NOW)
    c = apsw.Connection(str(p))
    c.execute("PRAGMA journal_mode=DELETE").fetchall()
    c.execute("PRAGMA user_version=99")
    c.close()
    return p


def _under_file(tmp):
    (tmp / "plain").write_text("x")
    return tmp / "plain" / "events.db"


def _unreadable(tmp):
    # was _unwritable (0400), stale since readers open a read-only log read-only (it skipped as root,
    # so nobody saw; .ci/unprivileged.sh runs it as a user now): a file they cannot read at all
    if os.geteuid() == 0:
        pytest.skip("root reads a 0000 file; the parent-is-a-file case covers unusable paths")
    d = tmp / "ro"
    d.mkdir()
    p = d / "events.db"
    EventLog(str(p)).close()
    os.chmod(p, 0o000)
    return p


@pytest.mark.parametrize("make,words", [
    (_dir, "directory"), (_text, "not an SQLite"), (_foreign, "another application"),
    (_newer, "newer"), (_under_file, "not a directory"), (_unreadable, "cannot read the event log"),
])
@pytest.mark.parametrize("cmd", [["tail"], ["tail", "-f"], ["verify"], ["export"]])
def test_bad_db_is_one_message_exit_2_untouched(cli, tmp_path, make, words, cmd):
    path = str(make(tmp_path))
    before = sha(path) if os.path.isfile(path) and os.access(path, os.R_OK) else None
    listing = sorted(os.listdir(tmp_path))
    r = cli(*cmd, "--db", path)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("fleetwatch: ") and words in r.stderr and "Traceback" not in r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("fleetwatch:")]) == 1
    assert r.stdout == ""
    if before is not None:
        assert sha(path) == before
    assert sorted(os.listdir(tmp_path)) == listing


def test_tail_with_a_count_beyond_sqlites_limit_prints_everything(tmp_path):
    """`tail -n 99999999999999999999` was an OverflowError traceback (SQLite's LIMIT is 64-bit)."""
    import subprocess

    from events.log import EventLog
    from events.types import WatcherStarted

    db = str(tmp_path / "e.db")
    log = EventLog(db, durability="normal")
    log.append([WatcherStarted(version="t", pid=1)], 1_800_000_000.0)
    log.close()
    fw = FLEETWATCH
    for extra in ([], ["--json"]):
        r = subprocess.run([fw, "tail", "-n", "99999999999999999999", *extra, "--db", db],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "watcher.started" in r.stdout and "Traceback" not in r.stderr, r.stderr
