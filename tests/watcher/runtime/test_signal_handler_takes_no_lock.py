"""A SIGHUP (or SIGTERM) could freeze `fleetwatch run` for good: its handlers called
``threading.Event.set()``, whose lock the main thread itself takes in ``Event.wait``/``clear``;
a signal landing while the main thread held it made the handler wait on its own thread (CI: no
tick, no watchdog ping, no RELOADING=1 for 30 s in test_run_under_a_fake_manager). The actions
now run in a relay thread (watcher/runtime/signals.py); the handler takes nothing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from watcher.runtime.signals import SignalRelay
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def test_an_action_needing_a_lock_the_main_thread_holds_runs_once_it_is_released():
    """The exact shape of the freeze: the main thread holds a lock when the signal comes, and the
    signal's action needs it. In the handler this never returns; in the relay it waits."""
    lock = threading.Lock()
    done = threading.Event()

    def act() -> None:
        with lock:
            done.set()

    with SignalRelay({signal.SIGUSR1: act}):
        with lock:
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(1000):  # bytecodes run: a Python-level handler would have run (and hung) here
                pass
            time.sleep(0.05)
            assert not done.is_set()   # the action waits for the lock in its own thread
        assert done.wait(30)
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL   # restored


def test_signals_in_a_row_each_run_their_action_in_order():
    seen: list[str] = []
    got = threading.Event()

    def note(name: str):
        def act() -> None:
            seen.append(name)
            if len(seen) == 3:
                got.set()
        return act

    with SignalRelay({signal.SIGUSR1: note("usr1"), signal.SIGUSR2: note("usr2")}):
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert got.wait(30)
    assert seen == ["usr1", "usr2", "usr1"]
    assert signal.set_wakeup_fd(-1) == -1   # the wakeup fd is given back


def test_a_storm_of_sighups_never_freezes_the_watcher(tmp_path):
    """Thousands of SIGHUPs while the loop waits and ticks (each a chance to land inside an
    Event's lock): the watcher keeps reloading and a SIGTERM still ends it cleanly."""
    (tmp_path / "fleet" / "a1").mkdir(parents=True)
    (tmp_path / "fleet" / "a1" / "goal.json").write_text('{"state": "busy"}')
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[watch]\ninterval = "50ms"\ndebounce = "10ms"\n[store]\npath = "{tmp_path}/e.db"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n')
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    p = subprocess.Popen([FW, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        end = time.monotonic() + 60
        while not any("watching 1 sources" in x for x in lines):
            assert p.poll() is None and time.monotonic() < end, lines
            time.sleep(0.02)
        for k in range(3000):
            p.send_signal(signal.SIGHUP)
            if k % 50 == 0:
                time.sleep(0.003)
        n = sum("config reloaded" in x for x in lines)
        (tmp_path / "fleet" / "a1" / "goal.json").write_text('{"state": "waiting"}')
        while sum("config reloaded" in x for x in lines) <= n or not any("agent.updated waiting" in x for x in lines):
            assert p.poll() is None and time.monotonic() < end, "".join(lines[-20:])   # alive, and it moves on
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    reader.join(10)
    assert any("watcher.stopped" in x for x in lines)


def test_an_action_that_raises_does_not_end_the_relay():
    """A failing action (a reload meeting a closed resource) killed the relay thread, and every
    later signal - the SIGTERM that should stop the watcher - went unanswered."""
    calls: list[int] = []
    got = threading.Event()

    def act() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first one fails")
        got.set()

    with SignalRelay({signal.SIGUSR1: act}):
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert got.wait(30)
    assert len(calls) == 2


def test_a_sigterm_sent_into_a_full_pipe_still_runs_its_action():
    """CPython drops a signal's byte when the wakeup pipe is full (64 KiB unread): a relay held up
    in one action while signals flood in. The SIGTERM that comes then must still stop the watcher.
    Real signals fill the real pipe while the relay waits inside an action; then SIGTERM (its byte
    dropped); then the action is let go. With the byte-only relay the stop never ran."""
    import fcntl
    import termios

    inside, release, stopped = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        release.wait(30)

    relay = SignalRelay({signal.SIGUSR1: hold, signal.SIGTERM: stopped.set})
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert inside.wait(30)                      # the relay thread is inside hold() now
        size = fcntl.fcntl(relay._r, 1032)          # F_GETPIPE_SZ
        buf = bytearray(4)
        for _ in range(4 * size):                   # flood: one byte a delivered SIGUSR1
            os.kill(os.getpid(), signal.SIGUSR1)
            fcntl.ioctl(relay._r, termios.FIONREAD, buf)
            if int.from_bytes(buf, sys.byteorder) >= size:
                break
        assert int.from_bytes(buf, sys.byteorder) >= size   # the pipe is full: the next byte is dropped
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):                       # the main thread runs bytecode: the Python-level handler runs
            pass
        time.sleep(0.05)
        assert not stopped.is_set()                 # nothing ran it yet: the relay is still held
        release.set()
        assert stopped.wait(30)
    finally:
        release.set()
        relay.close()
