"""The watcher end to end: real files, a real log, a virtual clock (Watcher.tick(now)), and
real `fleetwatch run` subprocesses for signals, restarts and kill -9."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from tests.support.exe import FLEETWATCH
from tests.support.goalfleet import T0, classes, goal, make, wait_for

def test_golden_edges_stall_gone_and_restart(tmp_path):
    fleet, cfg = make(tmp_path)
    elog = EventLog(str(tmp_path / "e.db"))
    for a in ("a1", "a2", "a3"):
        goal(fleet, a)
    w = Watcher(cfg, elog)
    w.tick(T0)
    assert all(classes(elog, a) == ["TRABAJANDO"] for a in ("a1", "a2", "a3"))
    # golden: busy -> idle + hecho -> exactly one DICE_TERMINADO
    goal(fleet, "a1", state="idle", phase="hecho")
    w.tick(T0 + 1)
    # edge 1: ten ticks at the same level -> nothing, and no write transaction at all
    head = elog.head()
    for i in range(10):
        w.tick(T0 + 2 + i)
    assert elog.head() == head
    assert classes(elog, "a1") == ["TRABAJANDO", "DICE_TERMINADO"]
    # edge 2: waiting -> one RECLAMA
    goal(fleet, "a2", state="waiting")
    w.tick(T0 + 20)
    w.tick(T0 + 21)
    assert classes(elog, "a2") == ["TRABAJANDO", "RECLAMA"]
    # stall by time alone: the file does not change, the clock does
    goal(fleet, "a3", state="idle", last_activity=T0 + 30)
    w.tick(T0 + 31)
    assert classes(elog, "a3") == ["TRABAJANDO"]
    w.tick(T0 + 30 + 900)
    assert classes(elog, "a3") == ["TRABAJANDO", "ESTANCADO"]
    # corrupt -> MAL_LANZADO after two reads, no crash; repaired -> its class again
    (fleet / "a2" / "goal.json").write_text('{"agent": "a2", "state": ')
    w.tick(T0 + 1000)
    assert classes(elog, "a2")[-1] == "RECLAMA"
    w.tick(T0 + 1001)
    assert classes(elog, "a2")[-1] == "MAL_LANZADO"
    goal(fleet, "a2")
    w.tick(T0 + 1002)
    assert classes(elog, "a2")[-1] == "TRABAJANDO"
    # gone -> CERRADO after one resync of grace
    import shutil

    shutil.rmtree(fleet / "a3")
    w.tick(T0 + 1003)
    assert classes(elog, "a3")[-1] == "ESTANCADO"
    w.tick(T0 + 1004)
    assert classes(elog, "a3")[-1] == "CERRADO"
    # restart: a new watcher on the same log; changes while down -> one event each, none else
    w.stopped(T0 + 1005)
    before = elog.head()[0]
    goal(fleet, "a1", state="waiting")
    goal(fleet, "a5")
    w2 = Watcher(cfg, elog)
    assert w2.proj.seq == before                # from the stored snapshot (+ tail), not a replay
    w2.tick(T0 + 1006)
    new = [(r.event.agent, r.event.to) for r in elog.read(before, types=["agent.classified"])]
    assert sorted(new) == [("a1", "RECLAMA"), ("a5", "TRABAJANDO")]
    assert elog.verify().ok
    # privacy: no session content in the log
    assert not any("private session text" in r.data.decode() for r in elog.read(0))


def test_command_source_failure_keeps_agents(tmp_path):
    script = tmp_path / "fv.py"
    out = tmp_path / "out.json"
    out.write_text(json.dumps([{"name": "c1", "state": "waiting", "phase": "preguntando", "dod_contract": "x"}]))
    script.write_text(f"import sys; sys.stdout.write(open({str(out)!r}).read())")
    cfg = parse(f'[[sources]]\nname = "fv"\nkind = "command"\nargv = ["{sys.executable}", "{script}"]\n')
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(T0)
    out.write_text("garbage")
    for i in range(5):
        w.tick(T0 + 1 + i)
    types = [r.type for r in elog.read(0)]
    assert types == ["agent.classified", "source.failed"]     # c1 keeps RECLAMA, one failure
    out.write_text(json.dumps([{"name": "c1", "state": "waiting", "phase": "preguntando", "dod_contract": "x"}]))
    w.tick(T0 + 10)
    w.tick(T0 + 11)
    assert [r.type for r in elog.read(0)][-1] == "source.recovered"
    assert classes(elog, "c1") == ["RECLAMA"]


def fw(*args, **kw):
    exe = FLEETWATCH
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, **kw)


def test_run_sigterm_second_writer_and_bad_config(tmp_path):
    fleet, _ = make(tmp_path)
    goal(fleet, "a1")
    cfgp = tmp_path / "c.toml"
    cfgp.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "200ms"\n'
                    f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    exe = FLEETWATCH
    p = subprocess.Popen([exe, "run", "--config", str(cfgp)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        elog = EventLog(str(tmp_path / "e.db"), create=True)
        for _ in range(100):
            if classes(elog, "a1"):
                break
            time.sleep(0.1)
        assert classes(elog, "a1") == ["TRABAJANDO"]
        r = fw("run", "--once", "--config", str(cfgp))
        assert r.returncode == 3 and str(p.pid) in r.stderr          # second writer names the holder
        goal(fleet, "a1", state="waiting")
        for _ in range(50):                                           # inotify/interval wake-up
            if classes(elog, "a1")[-1] == "RECLAMA":
                break
            time.sleep(0.1)
        assert classes(elog, "a1") == ["TRABAJANDO", "RECLAMA"]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    assert [r.type for r in elog.read(0)][-1] == "watcher.stopped"
    bad = tmp_path / "bad.toml"
    bad.write_text('[watch]\ninterval = "soon"\n')
    r = fw("run", "--once", "--config", str(bad))
    assert r.returncode == 2 and "watch.interval" in r.stderr


def test_kill9_mid_tick_loses_and_doubles_nothing(tmp_path):
    fleet, _ = make(tmp_path)
    n = 400
    for i in range(n):
        goal(fleet, f"k{i:03d}")
    cfgp = tmp_path / "c.toml"
    cfgp.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "100ms"\n'
                    f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    exe = FLEETWATCH
    for delay in (0.05, 0.15, 0.3, 0.5):
        p = subprocess.Popen([exe, "run", "--config", str(cfgp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.kill()
        p.wait()
    r = fw("run", "--once", "--config", str(cfgp))
    assert r.returncode == 0, r.stderr
    elog = EventLog(str(tmp_path / "e.db"))
    per = {}
    for rec in elog.read(0, types=["agent.classified"]):
        per.setdefault(rec.event.agent, []).append(rec.event.to)
    assert len(per) == n and all(v == ["TRABAJANDO"] for v in per.values())
    assert elog.verify().ok


def test_partial_ticks_from_inotify_and_the_full_resync(tmp_path):
    """Partial ticks (the Waker's paths only) see a change, a deletion and a rename into the
    root; a change inotify never reported waits for the periodic full resync."""
    import shutil

    from watcher.runtime.loop import Waker

    fleet, cfg = make(tmp_path)
    elog = EventLog(str(tmp_path / "e.db"))
    for a in ("a1", "a2"):
        goal(fleet, a)
    w = Watcher(cfg, elog)
    w.tick(T0)
    waker = Waker([str(fleet)], 0.02)
    assert waker.observer is not None
    try:
        goal(fleet, "a1", state="waiting")                                   # tmp + rename
        w.tick(T0 + 1, full=False, changed=wait_for(waker, str(fleet / "a1" / "goal.json")))
        assert classes(elog, "a1") == ["TRABAJANDO", "RECLAMA"]
        shutil.rmtree(fleet / "a2")                                           # deletion
        w.tick(T0 + 2, full=False, changed=wait_for(waker, str(fleet / "a2")))
        w.tick(T0 + 3, full=False, changed=waker.take())
        assert classes(elog, "a2") == ["TRABAJANDO", "CERRADO"]
        staging = tmp_path / "staging" / "a9"                                 # rename into the root
        goal(staging.parent, "a9")
        os.rename(staging, fleet / "a9")
        w.tick(T0 + 4, full=False, changed=wait_for(waker, str(fleet / "a9")))
        assert classes(elog, "a9") == ["TRABAJANDO"]
    finally:
        waker.close()
    # inotify gone (say its queue overflowed): a partial tick sees nothing, the full resync does
    goal(fleet, "a1", state="busy")
    head = elog.head()
    w.tick(T0 + 5, full=False, changed=set())
    assert elog.head() == head
    w.tick(T0 + 6, full=True)
    assert classes(elog, "a1") == ["TRABAJANDO", "RECLAMA", "TRABAJANDO"]
    assert Waker([], 0.1).take() is None                                      # no inotify: look everywhere
    elog.close()


def test_waker_too_many_paths_means_look_everywhere(tmp_path):
    from watcher.runtime.loop import Waker

    waker = Waker([str(tmp_path)], 0.01)
    try:
        waker.note(str(tmp_path / "a" / "goal.json"), None)
        assert waker.take() == {str(tmp_path / "a" / "goal.json")}
        for i in range(Waker.MAX_PATHS + 1):
            waker.note(f"{tmp_path}/a{i}")
        assert waker.take() is None                  # the next tick looks everywhere
        assert waker.take() == set()                 # and then a fresh set
    finally:
        waker.close()
