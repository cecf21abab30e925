"""sd_notify against a real fake NOTIFY_SOCKET (filesystem and abstract namespace), watchdog pacing
on a virtual monotonic clock, the STATUS line, and the real `fleetwatch run` under a fake manager."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from watcher.runtime.sdnotify import SystemdNotifier, status_line
from tests.support.exe import FLEETWATCH
from tests.support.exe import TESTS

FIXTURES = TESTS / "fixtures"
if not FIXTURES.exists():
    FIXTURES = TESTS / "fixtures"


class FakeManager:
    """A bound AF_UNIX datagram socket standing in for systemd's notify socket."""

    def __init__(self, abstract: bool, folder: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"fleetwatch-test-{uuid.uuid4().hex}"
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            folder = folder if len(str(folder)) < 90 else Path(tempfile.mkdtemp(prefix="fwsd"))
            path = str(folder / "notify")
            self.sock.bind(path)
            self.env = path

    def drain(self) -> list[str]:
        """Every datagram queued now (sendto on a local socket queues before it returns)."""
        out = []
        self.sock.setblocking(False)
        while True:
            try:
                out.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return out

    def wait_for(self, pred, timeout: float = 30.0) -> list[str]:
        """Collect datagrams until one satisfies ``pred`` (or fail after ``timeout``)."""
        got: list[str] = []
        end = time.monotonic() + timeout
        self.sock.setblocking(True)
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                msg = self.sock.recv(4096).decode()
            except (TimeoutError, socket.timeout):
                break
            got.append(msg)
            if pred(msg):
                return got
        raise AssertionError(f"no matching notify message; got {got}")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["path", "abstract"])
def manager(request, tmp_path):
    m = FakeManager(request.param == "abstract", tmp_path)
    yield m
    m.close()


def test_messages_reach_the_socket(manager):
    sd = SystemdNotifier.from_env({"NOTIFY_SOCKET": manager.env})
    assert sd.enabled
    assert sd.ready() and sd.status("3 agents:\n 1 RECLAMA") and sd.stopping()
    assert manager.drain() == ["READY=1", "STATUS=3 agents: 1 RECLAMA", "STOPPING=1"]


def test_reloading_carries_monotonic_usec(manager):
    sd = SystemdNotifier.from_env({"NOTIFY_SOCKET": manager.env})
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    sd.reloading()
    sd.ready_after_reload()
    reload_msg, ready = manager.drain()
    lines = dict(ln.split("=", 1) for ln in reload_msg.split("\n"))
    assert lines["RELOADING"] == "1"
    assert int(lines["MONOTONIC_USEC"]) >= before
    assert ready == "READY=1"


def test_watchdog_rate_on_a_virtual_clock(manager):
    sd = SystemdNotifier.from_env({"NOTIFY_SOCKET": manager.env, "WATCHDOG_USEC": "30000000",
                                   "WATCHDOG_PID": str(os.getpid())})
    assert sd.watchdog_interval == 15.0
    sent = [t for t in range(0, 61) if sd.tick_completed(float(t))]   # a tick every second
    assert sent == [0, 15, 30, 45, 60]
    assert manager.drain() == ["WATCHDOG=1"] * 5
    # a tick hangs from t=60 to t=200: no tick completes, so nothing is sent; systemd would kill us
    # at t=90. The first tick that completes afterwards pings at once.
    assert manager.drain() == []
    assert sd.tick_completed(200.0) and not sd.tick_completed(214.9) and sd.tick_completed(215.0)
    assert manager.drain() == ["WATCHDOG=1"] * 2


@pytest.mark.parametrize("env, interval", [
    ({}, None),                                                     # no watchdog configured
    ({"WATCHDOG_USEC": "2000000"}, 1.0),                            # no WATCHDOG_PID: it is for us
    ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}, None),      # meant for another process
    ({"WATCHDOG_USEC": "junk"}, None),                              # unparsable: disabled, no error
    ({"WATCHDOG_USEC": "0"}, None),                                 # zero: disabled
])
def test_watchdog_interval_from_env(env, interval, manager):
    sd = SystemdNotifier.from_env({"NOTIFY_SOCKET": manager.env, **env})
    assert sd.watchdog_interval == interval
    if interval is None:
        assert not sd.tick_completed(0.0) and manager.drain() == []


def test_no_socket_is_a_silent_noop(tmp_path):
    sd = SystemdNotifier.from_env({})
    assert not sd.enabled
    assert not sd.ready() and not sd.status("x") and not sd.tick_completed(1.0) and not sd.reloading()
    # a socket path that does not exist: the send fails quietly
    gone = SystemdNotifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "nobody"), "WATCHDOG_USEC": "1000"})
    assert gone.ready() is False and gone.tick_completed(5.0) is False
    # an unsupported address kind (vsock) is ignored
    assert not SystemdNotifier.from_env({"NOTIFY_SOCKET": "vsock:2:1234"}).enabled


@pytest.mark.parametrize("counts, age, line", [
    # classes in urgency order; zero counts dropped
    ({"TRABAJANDO": 7, "RECLAMA": 2, "ESTANCADO": 0}, 1.23, "9 agents: 2 RECLAMA, 7 TRABAJANDO; last tick 1.2s ago"),
    # CERRADO is not live: apart from the live counts, which add up to the total
    ({"CERRADO": 3, "DICE_TERMINADO": 1}, 45.9, "1 agent: 1 DICE_TERMINADO; 3 CERRADO; last tick 45s ago"),
    # regression (issue 45): "8 agents: 6 RECLAMA, 2 MAL_LANZADO, 3 CERRADO" read as 11
    ({"RECLAMA": 6, "MAL_LANZADO": 2, "CERRADO": 3}, 1.0,
     "8 agents: 6 RECLAMA, 2 MAL_LANZADO; 3 CERRADO; last tick 1.0s ago"),
    ({"CERRADO": 2}, 1.0, "0 agents; 2 CERRADO; last tick 1.0s ago"),
    # empty fleet
    ({}, 0.0, "0 agents; last tick 0.0s ago"),
    # unknown classes go last, alphabetically; minutes for long ages
    ({"ZETA": 1, "MAL_LANZADO": 1}, 600.0, "2 agents: 1 MAL_LANZADO, 1 ZETA; last tick 10m ago"),
    # hours; a negative age (clock step) shows as 0
    ({"TRABAJANDO": 1}, 7300.0, "1 agent: 1 TRABAJANDO; last tick 2h01m ago"),   # the shared age format
    ({"TRABAJANDO": 1}, -3.0, "1 agent: 1 TRABAJANDO; last tick 0.0s ago"),
])
def test_status_line(counts, age, line):
    assert status_line(counts, age) == line


# ---- the real watcher under a fake manager --------------------------------------------------
def _fleetwatch() -> str:
    exe = Path(FLEETWATCH)
    return str(exe) if exe.exists() else shutil.which("fleetwatch") or "fleetwatch"


def _write_config(path: Path, goals: Path, hang_dir: Path, interval: str = "200ms") -> None:
    # a command source that hangs (4 s) while the file HANG exists, marking HUNG when it starts
    script = (f"if [ -e {hang_dir}/HANG ]; then touch {hang_dir}/HUNG; sleep 4; rm -f {hang_dir}/HANG; fi; "
              "echo '[]'")
    path.write_text(f"""
[watch]
interval = "{interval}"
[[sources]]
name = "fleet"
kind = "goals"
glob = "{goals}/*/goal.json"
[[sources]]
name = "slow"
kind = "command"
argv = ["sh", "-c", {json.dumps(script)}]
entity = "agent"
timeout = "10s"
""")


@pytest.mark.slow
def test_run_under_a_fake_manager(tmp_path):
    """READY after the first tick, STATUS lines, WATCHDOG while ticks complete and none while one
    hangs, RELOADING/READY on SIGHUP (good and bad config), STOPPING on SIGTERM."""
    m = FakeManager(False, tmp_path)
    goals = tmp_path / "goals"
    shutil.copytree(FIXTURES / "goals", goals)
    cfg = tmp_path / "config.toml"
    _write_config(cfg, goals, tmp_path)
    env = {**os.environ, "NOTIFY_SOCKET": m.env, "WATCHDOG_USEC": "500000", "HOME": str(tmp_path),
           "XDG_STATE_HOME": str(tmp_path / "state"), "FLEETWATCH_CONFIG": str(cfg)}
    env.pop("JOURNAL_STREAM", None)
    env.pop("FLEETWATCH_DB", None)
    proc = subprocess.Popen([_fleetwatch(), "run", "--db", str(tmp_path / "events.db")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        env["WATCHDOG_PID"] = str(proc.pid)
        got = m.wait_for(lambda s: s == "READY=1")
        assert not any(g.startswith("WATCHDOG") for g in got), "no ping before READY"
        got = m.wait_for(lambda s: s.startswith("STATUS="))
        assert "agents" in got[-1] and "last tick" in got[-1]
        m.wait_for(lambda s: s == "WATCHDOG=1")
        m.wait_for(lambda s: s == "WATCHDOG=1")

        # a source hangs (4 s): its poll runs in its own thread under a deadline, so the ticks
        # (and the pings) go on meanwhile (issue 13: a stuck source never stops the watcher)
        (tmp_path / "HANG").touch()
        end = time.monotonic() + 30
        while not (tmp_path / "HUNG").exists():
            assert time.monotonic() < end and proc.poll() is None
            time.sleep(0.02)
        m.drain()
        time.sleep(1.5)                # the hang lasts 4 s; pings come every 0.25 s
        assert "WATCHDOG=1" in m.drain()

        # SIGHUP with a bad config: RELOADING=1 ... READY=1, old config kept, service alive
        cfg.write_text("[watch]\ninterval = \"soon\"\n")
        proc.send_signal(signal.SIGHUP)
        got = m.wait_for(lambda s: s.startswith("RELOADING=1"))
        assert "MONOTONIC_USEC=" in got[-1]
        m.wait_for(lambda s: s == "READY=1")
        m.wait_for(lambda s: s == "WATCHDOG=1")
        assert proc.poll() is None
        # SIGHUP with a good config
        _write_config(cfg, goals, tmp_path, interval="300ms")
        proc.send_signal(signal.SIGHUP)
        m.wait_for(lambda s: s.startswith("RELOADING=1"))
        m.wait_for(lambda s: s == "READY=1")
        m.wait_for(lambda s: s == "WATCHDOG=1")

        proc.send_signal(signal.SIGTERM)
        m.wait_for(lambda s: s == "STOPPING=1")
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "reload refused" in out and "config reloaded" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        m.close()
