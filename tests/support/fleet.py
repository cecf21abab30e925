"""A real fleet on disk for CLI tests: goal.json files, a config, `fleetwatch run` as a process,
the log read back through `tail --json`, and push receivers (a held one, one that speaks ntfy)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.fwcli import ENV, FW, fw


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def goal(root: Path, agent: str, **fields: Any) -> Path:
    """``root/agent/goal.json`` written atomically (a contract by default)."""
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    doc = {"agent": agent, "dod_contract": "tests green", **fields}
    tmp = d / ".goal.json.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, d / "goal.json")
    return d / "goal.json"


def config(tmp: Path, urls: list[str] = (), notify: str = "", extra: str = "", web_port: int | None = None) -> Path:
    """A config reading ``tmp/goals/*/goal.json``, pushing to ``urls``; ``web_port``: [web] on it."""
    web = (f'[web]\nlisten = "127.0.0.1:{web_port}"\npublic_url = "http://127.0.0.1:{web_port}"\n'
           f'key_file = "{tmp}/web.key"\n') if web_port else ""
    cfg = tmp / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp}/e.db"\n[watch]\ninterval = "1s"\n'
                   f'[[sources]]\nname = "goals"\nkind = "goals"\nglob = "{tmp}/goals/*/goal.json"\n'
                   f'[notify]\nurls = {json.dumps(list(urls))}\ngroup_wait = "1s"\nretry = ["1s"]\ntimeout = "20s"\n'
                   f'{notify}\n{extra}\n{web}')
    return cfg


def events(cfg: Path, *types: str) -> list[dict]:
    """The log's events (of ``types``, when given), oldest first, as `tail --json` prints them."""
    r = fw("tail", "--json", "-n", "100000", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    return [e for e in rows if not types or e["type"] in types]


class Watcher:
    """`fleetwatch run --config CFG --create` in its own process group; ``stop()`` ends it."""

    def __init__(self, cfg: Path) -> None:
        self.log = open(cfg.parent / "run.log", "wb")
        self.p = subprocess.Popen([*FW, "run", "--config", str(cfg), "--create"], stdout=self.log,
                                  stderr=subprocess.STDOUT, env=ENV, start_new_session=True)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(10)
        self.log.close()


def run_until(cfg: Path, pred: Any, timeout: float = 60.0) -> Any:
    """Run the watcher on ``cfg`` until ``pred()`` holds (its value), then stop it."""
    from tests.support.waiting import wait_for

    w = Watcher(cfg)
    try:
        return wait_for(pred, timeout=timeout)
    finally:
        w.stop()


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Held(_Server):
    """A json:// receiver that holds every answer until ``release()`` (a slow second destination):
    the push it holds is not delivered, so its ``notice.sent`` is not appended meanwhile."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.bodies: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.bodies.append(json.loads(raw or b"{}"))
                outer.open.wait(60)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a: object) -> None:
                return

        super().__init__(H)

    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/held"

    def release(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.open.set()
        super().close()


class Ntfy(_Server):
    """A receiver speaking ntfy's publish API as apprise's ntfy plugin uses it: a POST of a JSON
    message (topic, title, message) with the ``X-Actions`` header (ntfy's simple action format)."""

    def __init__(self) -> None:
        self.pushes: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                msg = json.loads(raw or b"{}")
                outer.pushes.append({"json": msg, "actions": parse_actions(self.headers.get("X-Actions") or ""),
                                     "priority": self.headers.get("X-Priority")})
                body = json.dumps({"id": "x", "event": "message", "topic": msg.get("topic", "")}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                return

        super().__init__(H)

    def url(self, topic: str = "fleet") -> str:
        return f"ntfy://127.0.0.1:{self.port}/{topic}"


def parse_actions(header: str) -> list[dict[str, str]]:
    """ntfy's simple action format: ``action, label, url[, key=value...]`` joined by ``;``."""
    out = []
    for part in filter(None, (p.strip() for p in header.split(";"))):
        fields = [f.strip() for f in part.split(",")]
        a = {"action": fields[0], "label": fields[1], "url": fields[2]}
        a.update(f.split("=", 1) for f in fields[3:] if "=" in f)
        out.append(a)
    return out
