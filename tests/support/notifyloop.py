"""The notify loop in miniature, for end-to-end tests: a local webhook that records what it is
sent (``Receiver``), a config naming it, a tick ``Driver`` like the watcher loop's (append → fold →
step), and the phone loop's ``Loop`` on a virtual wall and monotonic clock with the ``LINK`` of a
push. The receiver fixture ``rx`` is in tests/conftest.py."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from events.log import EventLog
from events.types import AgentClassified
from projections.fleet import fold as fleet
from projections.notify import fold as notify
from watcher.config import parse
from watcher.runtime.notifier import Notifier
from watcher.runtime.state import Projections

T0 = 1_800_000_000.0


class Receiver:
    """A local webhook: records every POST body; answers ``codes`` in order, then 200."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.raw: list[str] = []
        self.codes: list[int] = []
        self.answered: list[int] = []
        self.by_path: dict[str, list[dict]] = {}   # delivered posts per path
        self.gets: dict[str, int] = {}             # GETs per path (heartbeats)
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n).decode()
                code = outer.codes.pop(0) if outer.codes else 200
                outer.raw.append(self.path + " " + body)
                outer.answered.append(code)
                if code == 200:
                    outer.posts.append(json.loads(body))
                    outer.by_path.setdefault(self.path.split("?")[0], []).append(outer.posts[-1])
                self.send_response(code)
                self.end_headers()

            def do_GET(self):  # noqa: N802
                outer.gets[self.path] = outer.gets.get(self.path, 0) + 1
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def url(self, extra: str = "", path: str = "/hook") -> str:
        return f"json://{extra}127.0.0.1:{self.port}{path}"

    def got(self, path: str = "/hook") -> list[dict]:
        return list(self.by_path.get(path, []))

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def config(tmp_path, url: str, extra: str = "", group_wait: str = "10s") -> object:
    return parse(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{url}"]\ngroup_wait = "{group_wait}"\n'
                 f'retry = ["1s", "1s"]\ntimeout = "5s"\n{extra}', check_paths=False)


class Driver:
    """The loop's contract in miniature: fold what is in the log, call step, append its events."""

    def __init__(self, cfg, path, **kw) -> None:
        self.log = EventLog(str(path), durability="normal")
        self.proj = Projections({"fleet": fleet, "notify": notify})
        self.proj.catch_up(self.log)
        self.n = Notifier(cfg, **kw)

    def append(self, evs, now: float) -> None:
        if evs:
            self.log.append(evs, now)
        self.proj.catch_up(self.log)

    def tick(self, now: float, settle: bool = True) -> None:
        self.proj.catch_up(self.log)
        self.append(self.n.step(self.proj.states, now), now)
        if settle:  # virtual clock: let the worker finish, then record its outcome
            assert self.n.drain(15)
            self.append(self.n.step(self.proj.states, now), now)

    def types(self) -> list[str]:
        return [r.type for r in self.log.read(0)]

    def close(self) -> None:
        self.n.close(5)
        self.log.close()


def reclama(agent: str) -> AgentClassified:
    return AgentClassified(agent=agent, from_="TRABAJANDO", to="RECLAMA", state="waiting", phase="preguntando",
                           reason="waiting for the human")


# the page link of a push: its notice, its token and (optional) the signed conditions it is about
LINK = re.compile(r"(https?://[^\s]+/n/(n[0-9a-f]{15})\?t=([0-9a-z]+\.[A-Za-z0-9_-]{32})"
                  r"(?:&c=[0-9a-z.]+-[A-Za-z0-9_-]{16})?)")


class Mono:
    """A monotonic clock the test sets (``.t``)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def cfg_for(tmp_path, rx, extra: str = "", web: bool = True):
    w = (f'[web]\nlisten = "127.0.0.1:0"\npublic_url = "http://127.0.0.1:1"\n'
         f'key_file = "{tmp_path}/web.key"\n') if web else ""
    return parse(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{rx.url()}"]\ngroup_wait = "10s"\n'
                 f'retry = ["1s"]\ntimeout = "5s"\n{extra}\n{w}', check_paths=False)


class Loop(Driver):
    """The notify loop in miniature (Driver) on a virtual wall and monotonic clock."""

    def __init__(self, cfg, db: str) -> None:
        self.mono = Mono()
        super().__init__(cfg, db, mono=self.mono)

    def tick(self, now: float) -> None:
        self.mono.t = 1000.0 + (now - T0)
        super().tick(now)
