"""A push receiver that trickles its answer (a byte every quarter second: within every read timeout) made
apprise give up on the call but not on its thread, and the interpreter joined that thread at exit:
`fleetwatch run` recorded watcher.stopped on SIGTERM and then lived on for as long as the receiver
held the connection (53 s by hand; `systemctl stop` would wait for it), `notify-test` with
`timeout = "2s"` took 61 s. Real processes, a real socket receiver, a real log."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from tests.support.exe import FLEETWATCH

HOLD_S = 120  # the receiver keeps each connection this long, a byte every TICK_S
TICK_S = 0.25  # well within the 1 s read timeout


class Trickler:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            threading.Thread(target=self._trickle, args=(c,), daemon=True).start()

    def _trickle(self, c: socket.socket) -> None:
        try:
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\n")
            for _ in range(int(HOLD_S / TICK_S)):
                if self.done.wait(TICK_S):
                    break
                c.sendall(b"X")
        except OSError:
            pass
        finally:
            c.close()

    def close(self) -> None:
        self.done.set()
        self.sock.close()


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}


def _config(tmp_path: Path, port: int) -> Path:
    goals = tmp_path / "goals"
    (goals / "a1").mkdir(parents=True)
    (goals / "a1" / "goal.json").write_text(json.dumps({"task": "t", "state": "waiting", "dod_contract": "c"}))
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/events.db"\n[watch]\ninterval = "500ms"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n'
                   f'[notify]\nurls = ["json://127.0.0.1:{port}/hook"]\ngroup_wait = "1s"\ntimeout = "1s"\n')
    return cfg


def _types(cfg: Path) -> list[str]:
    r = subprocess.run([FLEETWATCH, "tail", "--json", "-n", "1000", "--config", str(cfg)], capture_output=True,
                       text=True, env=_env(), timeout=60)
    return [json.loads(ln)["type"] for ln in r.stdout.splitlines() if ln.strip()]


def test_sigterm_exits_though_a_push_receiver_still_trickles(tmp_path):
    rx = Trickler()
    cfg = _config(tmp_path, rx.port)
    p = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 60
        while "notice.failed" not in _types(cfg):   # the first attempt timed out, its thread reads on
            assert p.poll() is None and time.monotonic() < deadline, "no notice.failed"
            time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=HOLD_S // 2)            # before the fix: only when the receiver let go
    finally:
        if p.poll() is None:
            p.kill()
        err = p.communicate()[1]
        rx.close()
    assert rc == 0, err
    assert "watcher.stopped" in _types(cfg)
    assert "exiting without waiting for it" in err


def test_notify_test_returns_though_the_receiver_still_trickles(tmp_path):
    rx = Trickler()
    cfg = _config(tmp_path, rx.port)
    try:
        r = subprocess.run([FLEETWATCH, "notify-test", "--config", str(cfg)], capture_output=True, text=True,
                           env=_env(), timeout=HOLD_S // 2)
    finally:
        rx.close()
    assert r.returncode == 1 and "not delivered: timeout" in r.stderr
