"""Issue 13, "never blind, never fooled": hostile inputs against the sources and the tick, with
real FIFOs, sockets, sparse files and real processes. Each test is named after what broke.

Hang guards (``_returns``) run a call in a thread and fail if it has not returned after 10 s:
they catch a blocking read, they are not speed targets."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.sources import build_sources, merge
from watcher.sources.command import RunError, run_bounded
from watcher.sources.files import GoalsSource
from tests.support.vclock import written_at
from tests.support.exe import ROOT
from tests.support.waiting import wait_for

T0 = 1_800_000_000.0
GOOD = {"state": "busy", "phase": "haciendo", "dod_contract": "tests pass", "last_activity": T0}


def _returns(fn, *args, limit=10.0):
    box: dict = {}

    def run():
        box["v"] = fn(*args)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"{getattr(fn, '__name__', fn)} blocked"
    return box["v"]


def goal(root, agent, folder=None, **kw):
    d = root / (folder or agent)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".goal.json.tmp"
    doc = {"agent": agent, **GOOD, **kw}
    tmp.write_text(json.dumps(doc))
    written_at(tmp, doc["last_activity"])  # on the virtual clock (tests/support/vclock.py)
    os.replace(tmp, d / "goal.json")
    return d / "goal.json"


def source(root, kind="goals", name="fleet", **extra):
    fname = "goal.json" if kind == "goals" else "steps.json"
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra.items())
    cfg = parse(f'[[sources]]\nname = "{name}"\nkind = "{kind}"\nglob = "{root}/*/{fname}"\n{body}')
    return build_sources(cfg)[0]


def by_agent(res):
    return {a.agent: a for a in res.agents}


def classes(elog, agent):
    return [r.event.to for r in elog.read(0, types=["agent.classified"], subject=f"agent:{agent}")]


# ---- 1. no blocking on any input --------------------------------------------------------------
@pytest.mark.parametrize("kind", ["goals", "steps"])
def test_fifo_goal_json_does_not_block(tmp_path, kind):
    goal(tmp_path, "ok")
    name = "goal.json" if kind == "goals" else "steps.json"
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / name)
    src = source(tmp_path, kind)
    for _ in range(2):  # the second poll (the two-read rule) does not read it either
        res = _returns(src.poll, T0)
    if kind == "goals":
        a = by_agent(res)
        assert a["fifo"].error == "a FIFO, not a regular file"
        assert a["ok"].error is None
    else:
        runs = {r.run: r for r in res.runs}
        assert runs["fifo"].error == "a FIFO, not a regular file"


def test_socket_device_and_folder_named_goal_json_are_mal_lanzado(tmp_path):
    (tmp_path / "sock").mkdir()
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock" / "goal.json"))
    (tmp_path / "dev").mkdir()
    os.symlink("/dev/zero", tmp_path / "dev" / "goal.json")     # endless: must never be read
    (tmp_path / "dir" / "goal.json").mkdir(parents=True)
    try:
        a = by_agent(_returns(source(tmp_path).poll, T0))
    finally:
        s.close()
    assert a["sock"].error == "a socket, not a regular file"
    assert a["dev"].error == "a character device, not a regular file"
    assert a["dir"].error == "a folder, not a regular file"


def test_fifo_swapped_in_after_the_stat_is_not_read(tmp_path):
    """The check is made on the open descriptor: a regular file replaced by a FIFO between the
    stat and the open is refused, not read (the open itself does not block: O_NONBLOCK)."""
    p = goal(tmp_path, "a1")
    st = os.stat(p)
    os.unlink(p)
    os.mkfifo(p)
    src = source(tmp_path)
    obs = _returns(src._read, str(p), st)
    assert obs.error == "a FIFO, not a regular file"


def test_sparse_2gib_goal_json_is_refused_without_reading(tmp_path):
    p = goal(tmp_path, "big")
    with open(p, "r+b") as f:
        f.truncate(2 << 30)
    src = source(tmp_path)
    src.poll(T0)                 # (the two-read rule: a failed read counts the second time)
    a = by_agent(src.poll(T0))
    assert a["big"].error.startswith("too large (2147483648 bytes")


def test_missing_goals_root_is_a_failed_source_not_a_cerrado_storm(tmp_path):
    root = tmp_path / "fleet"
    for i in range(5):
        goal(root, f"a{i}", state="waiting")
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    w = Watcher(cfg, elog)
    try:
        w.tick(T0)
        assert all(classes(elog, f"a{i}") == ["RECLAMA"] for i in range(5))
        os.rename(root, tmp_path / "away")
        for k in range(3):
            w.tick(T0 + 2 + k)
        failed = [r.event for r in elog.read(0, types=["source.failed"])]
        assert len(failed) == 1 and failed[0].error_class == "root-missing" and str(root) in failed[0].error
        assert all(classes(elog, f"a{i}") == ["RECLAMA"] for i in range(5))    # no CERRADO
        head = elog.head()[0]
        os.rename(tmp_path / "away", root)
        w.tick(T0 + 10)
        w.tick(T0 + 12)
        after = [r.type for r in elog.read(head)]
        assert after == ["source.recovered"]           # nothing re-classified, nothing to push again
    finally:
        w.close()
        elog.close()


# ---- 2. command sources bounded ---------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_command_flooding_stdout_is_cut_at_max_bytes():
    for argv in (["yes"], ["sh", "-c", "head -c 1000000000 /dev/zero"]):
        r = run_bounded(argv, 20, 1 << 20)
        assert r.out is None and r.error_class is RunError.TOO_LARGE
        assert r.error == f"output too large (more than {1 << 20} bytes)"


def test_command_1gb_output_keeps_rss_bounded(tmp_path):
    """A child process polls a command source printing 1 GB: its peak RSS stays near the cap."""
    code = (
        "import resource, sys\n"
        "from watcher.config import parse\nfrom watcher.sources import build_sources\n"
        "cfg = parse('[[sources]]\\nname = \"big\"\\nkind = \"command\"\\n"
        "argv = [\"sh\", \"-c\", \"head -c 1000000000 /dev/zero\"]\\ntimeout = \"15s\"\\n')\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "r = build_sources(cfg)[0].poll(0)\n"
        "print(r.error_class, base // 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=str(ROOT))
    cls, base_mb, peak_mb = out.stdout.split()
    assert cls == "too-large"
    assert int(peak_mb) - int(base_mb) < 64, out.stdout   # the 16 MiB default cap, not 1 GB


def test_command_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    r = run_bounded(["sh", "-c", f"sleep 120 & echo $! > {pidfile}; sleep 120"], 1.0)
    assert r.error_class is RunError.TIMEOUT and r.error == "timed out after 1s"
    pid = int(pidfile.read_text())
    for _ in range(100):   # SIGKILL is delivered at once; reaping by init may take a moment
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def test_command_leaving_a_child_holding_stdout_does_not_wait_for_the_timeout(tmp_path):
    pidfile = tmp_path / "pid"
    r = run_bounded(["sh", "-c", f"sleep 120 & echo $! > {pidfile}; echo []"], 10.0)
    assert r.error is None and r.out.strip() == b"[]"   # not held until the timeout (that is an error)
    pid = int(pidfile.read_text())
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def test_command_stderr_is_never_stored(tmp_path):
    secret = "https://user:hunter2@example.invalid/topic"
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fv"\nkind = "command"\n'
                f'argv = ["sh", "-c", "echo {secret} >&2; echo {secret}; exit 3"]\n')
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    w = Watcher(cfg, elog)
    try:
        w.tick(T0)
        ev = [r.event for r in elog.read(0, types=["source.failed"])]
        assert len(ev) == 1
        assert (ev[0].error, ev[0].error_class, ev[0].exit_code) == ("exit status 3", "exit-status", 3)
    finally:
        w.close()
        elog.close()
    with open(tmp_path / "e.db", "rb") as f:
        assert b"hunter2" not in f.read()
    for suffix in ("-wal",):
        if os.path.exists(f"{tmp_path}/e.db{suffix}"):
            with open(f"{tmp_path}/e.db{suffix}", "rb") as f:
                assert b"hunter2" not in f.read()


def test_command_killed_by_signal_is_typed():
    r = run_bounded(["sh", "-c", "kill -9 $$"], 5)
    assert (r.error, r.error_class, r.exit_code) == ("killed by signal 9", RunError.SIGNAL, -9)


# ---- 5. identity: duplicate agent ids -----------------------------------------------------------
def test_same_agent_id_in_two_folders_is_reported_not_merged(tmp_path):
    real = goal(tmp_path, "a1", folder="a1", state="waiting")
    copy = goal(tmp_path, "a1", folder="copy-of-a1", state="busy")
    src = source(tmp_path)
    snap = merge([src], [src.poll(T0)])
    a1 = snap.agents["a1"]
    assert a1.error == f"duplicate id 'a1' in {real} and {copy}"


def test_same_agent_id_in_two_goals_sources_is_reported(tmp_path):
    goal(tmp_path / "r1", "a1", state="waiting")
    goal(tmp_path / "r2", "a1", state="busy")
    cfg = parse(f'[[sources]]\nname = "one"\nkind = "goals"\nglob = "{tmp_path}/r1/*/goal.json"\n'
                f'[[sources]]\nname = "two"\nkind = "goals"\nglob = "{tmp_path}/r2/*/goal.json"\n')
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(T0) for s in srcs])
    assert snap.agents["a1"].error.startswith("duplicate id 'a1' in ")
    assert str(tmp_path / "r1") in snap.agents["a1"].error and str(tmp_path / "r2") in snap.agents["a1"].error


def test_one_file_reached_by_two_globs_is_no_duplicate(tmp_path):
    goal(tmp_path / "r", "a1")
    os.symlink(tmp_path / "r", tmp_path / "alias")
    cfg = parse(f'[[sources]]\nname = "one"\nkind = "goals"\nglob = "{tmp_path}/r/*/goal.json"\n'
                f'[[sources]]\nname = "two"\nkind = "goals"\nglob = "{tmp_path}/alias/*/goal.json"\n')
    srcs = build_sources(cfg)
    snap = merge(srcs, [s.poll(T0) for s in srcs])
    assert snap.agents["a1"].error is None


# ---- 1. a stuck source under the loop's deadline -------------------------------------------------
class HungGoals(GoalsSource):
    """A goals source whose poll blocks while ``hang`` is clear: what a hung network file system
    does to a stat or a read (the real source cannot be made to hang on a local disk)."""

    hang = threading.Event()

    def poll(self, now, full=True, changed=None):
        type(self).hang.wait()
        return super().poll(now, full, changed)


def test_stuck_source_is_one_source_failed_and_the_tick_goes_on(tmp_path):
    root_ok, root_hung = tmp_path / "ok", tmp_path / "hung"
    goal(root_ok, "s1")
    goal(root_hung, "h1", state="waiting")
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "hung"\nkind = "goals"\nglob = "{root_hung}/*/goal.json"\ntimeout = "1s"\n'
                f'[[sources]]\nname = "ok"\nkind = "goals"\nglob = "{root_ok}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    w = Watcher(cfg, elog)
    w.sources[0] = HungGoals(cfg.sources[0])
    HungGoals.hang.set()
    try:
        w.tick(T0)
        assert classes(elog, "h1") == ["RECLAMA"] and classes(elog, "s1") == ["TRABAJANDO"]
        w.poll_wait = 0.1
        mono = [1000.0]
        w.polls.clock = lambda: mono[0]              # the deadlines' clock, stepped by hand
        HungGoals.hang.clear()                       # the file system hangs from now on
        goal(root_ok, "s1", state="waiting")
        _returns(w.tick, T0 + 2)                     # not held by the stuck source
        assert classes(elog, "s1") == ["TRABAJANDO", "RECLAMA"]
        mono[0] += 2.5                               # past the deadline: 1 s timeout + 1 s grace
        for k in range(3):
            _returns(w.tick, T0 + 4 + k)
        failed = [r.event for r in elog.read(0, types=["source.failed"])]
        assert [(f.source, f.error_class) for f in failed] == [("hung", "deadline")]
        assert failed[0].error.startswith("timed out after 2s")
        assert classes(elog, "h1") == ["RECLAMA"]     # keeps its last class
        goal(root_ok, "s1", state="busy")
        _returns(w.tick, T0 + 8)
        assert classes(elog, "s1")[-1] == "TRABAJANDO"
        HungGoals.hang.set()                          # it comes back
        w.polls.worker(w.sources[0]).done.wait(5)
        w.tick(T0 + 10)
        assert [r.type for r in elog.read(0, types=["source.recovered"])] == ["source.recovered"]
        assert classes(elog, "h1") == ["RECLAMA"]
    finally:
        HungGoals.hang.set()
        w.close()
        elog.close()


def test_slow_first_poll_is_pending_not_failed(tmp_path):
    """A slow (not stuck) first poll: no result yet, so nothing is concluded and nothing written
    for it; the next tick takes its result."""
    root = tmp_path / "g"
    goal(root, "p1")
    cfg = parse(f'[[sources]]\nname = "slow"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    w = Watcher(cfg, elog)
    w.sources[0] = HungGoals(cfg.sources[0])
    HungGoals.hang.clear()
    w._polled, w.poll_wait = True, 0.05
    try:
        snap = w.observe(T0, True)
        assert snap.failed == {"slow": "pending"} and snap.results == []
        assert w.tick(T0) == 0
        HungGoals.hang.set()
        w.polls.worker(w.sources[0]).done.wait(5)
        w.tick(T0 + 2)
        assert classes(elog, "p1") == ["TRABAJANDO"]
        assert list(elog.read(0, types=["source.failed"])) == []
    finally:
        HungGoals.hang.set()
        w.close()
        elog.close()


def test_watcher_stopping_mid_poll_leaves_no_command_child(tmp_path):
    """close() (SIGTERM, reload) while a command source is running kills its whole group. The
    source's timeout is the longest a source may have; on a host loaded enough that the command's
    start and close() take longer, the timeout ends the poll first (and kills the group too): the
    poll then says "timeout", else "signal"."""
    pidfile = tmp_path / "pid"
    cfg = parse(f'[[sources]]\nname = "slow"\nkind = "command"\n'
                f'argv = ["sh", "-c", "sleep 120 & echo $! > {pidfile}; sleep 120"]\ntimeout = "15s"\n')
    src = build_sources(cfg)[0]
    t = threading.Thread(target=src.poll, args=(T0,), daemon=True)
    started = time.monotonic()
    t.start()
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=60)
    pid = int(pidfile.read_text())
    src.close()
    closed_in_time = time.monotonic() - started < 14
    t.join(60)
    assert not t.is_alive() and src.last.error_class == ("signal" if closed_in_time else "timeout")
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def test_tmux_no_server_hint_survives_without_storing_stderr():
    """The one use of stderr: a fixed phrase (tmux's "no server running") travels, the text not."""
    from watcher.sources.command import run_argv

    out, err = run_argv(["sh", "-c", "echo 'no server running on /tmp/x secret-token' >&2; exit 1"], 5)
    assert err == "exit status 1 (no server running)" and not out


def test_sqlite_database_replaced_by_a_fifo_is_not_opened(tmp_path):
    import apsw

    db = tmp_path / "m.db"
    c = apsw.Connection(str(db))
    c.execute("CREATE TABLE wp(mission, wp, state); INSERT INTO wp VALUES ('m1', 'w1', 'READY')")
    c.close()
    cfg = parse(f'[[sources]]\nname = "m"\nkind = "sqlite"\nentity = "wp"\npath = "{db}"\n'
                f'query = "SELECT mission, wp, state FROM wp"\nkey = ["mission", "wp"]\n')
    src = build_sources(cfg)[0]
    assert src.poll(T0).ok
    os.unlink(db)
    os.mkfifo(db)
    r = _returns(src.poll, T0)
    assert not r.ok and r.error_class == "not-regular" and "a FIFO" in r.error


def test_a_poll_ending_after_its_tick_wakes_the_loop(tmp_path):
    """A slow poll's result is not left waiting for the next interval: on_done (the Waker's
    event in the service) fires when it lands after the tick stopped waiting."""
    root = tmp_path / "g"
    goal(root, "p1")
    cfg = parse(f'[[sources]]\nname = "slow"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    w = Watcher(cfg, elog)
    w.sources[0] = HungGoals(cfg.sources[0])
    woke = threading.Event()
    w.polls.on_done = woke.set
    HungGoals.hang.clear()
    w._polled, w.poll_wait = True, 0.05
    try:
        assert w.tick(T0) == 0 and not woke.is_set()
        HungGoals.hang.set()
        assert woke.wait(10)
        assert w.tick(T0 + 0.1, full=False) == 1     # taken by the woken tick
        assert classes(elog, "p1") == ["TRABAJANDO"]
    finally:
        HungGoals.hang.set()
        w.close()
        elog.close()


def test_idle_poll_threads_end_and_come_back(tmp_path, monkeypatch):
    """A Watcher dropped without close() leaves no thread behind for long; a worker whose thread
    ended starts a new one on the next poll."""
    from watcher.runtime import polls

    monkeypatch.setattr(polls, "IDLE_EXIT", 0.05)
    goal(tmp_path / "g", "i1")
    src = source(tmp_path / "g")
    p = polls.Polls(lambda s, now, full, changed: s.poll(now, full))
    res, pending = p.poll([src], T0, True, None, None)
    assert [a.agent for a in res[0].agents] == ["i1"] and pending == []
    w = p.worker(src)
    for _ in range(200):
        if w.thread is None:
            break
        time.sleep(0.01)
    assert w.thread is None
    res, _ = p.poll([src], T0 + 1, True, None, None)
    assert [a.agent for a in res[0].agents] == ["i1"]
    p.close()
