"""The phone page served over a real log: a config with a push URL and a web section
(``make_cfg``), a log where RECLAMA agents were pushed in one notice (``pushed``) and the page
server over it (``Site``; its fixture ``site`` is in tests/conftest.py)."""
from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

from events.log import EventLog
from events.types import AgentClassified, NoticeSent
from projections.notify.plan import plan
from watcher.config import parse
from watcher.runtime.links import key_path, load_key, sign
from watcher.runtime.notifier import policy_from_config
from watcher.runtime.state import Projections
from watcher.web.app import WebApp
from watcher.web.server import WebServer

T0 = 1_800_000_000.0
SECRET = "tok3nSECRETtopic"


class Clock:
    """A wall clock the test sets (``.t``)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_cfg(tmp_path, extra: str = ""):
    return parse(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["ntfy://127.0.0.1:9/{SECRET}"]\n'
                 f'[web]\nlisten = "127.0.0.1:0"\npublic_url = "https://fleet.example.net"\n'
                 f'key_file = "{tmp_path}/state/web.key"\n{extra}', check_paths=False)


def pushed(tmp_path, cfg, agents=("a1", "a2")):
    """A log where RECLAMA agents were pushed in one notice: (log path, notice id)."""
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", reason="needs you") for a in agents], T0)
    proj = Projections.load(log)
    m = plan(proj["notify"], T0 + 10, policy_from_config(cfg)).send[0]
    log.append([NoticeSent(notice=m.notice, covers=m.covers, title=m.title, severity=m.severity, keys=m.keys)],
               T0 + 11)
    log.close()
    return db, m.notice


class Site:
    """The phone page (a real WebServer on 127.0.0.1) over a log where ``agents`` were pushed in one
    notice; ``token`` opens that notice's page, ``req`` asks the server, ``events`` reads the log."""

    def __init__(self, tmp_path, extra: str = "", agents=("a1", "a2"), cfg=None) -> None:
        self.cfg = make_cfg(tmp_path, extra) if cfg is None else cfg
        self.db, self.notice = pushed(tmp_path, self.cfg, agents)
        self.clock = Clock(T0 + 20)
        self.srv = WebServer(WebApp(self.cfg, self.db, clock=self.clock), "127.0.0.1", 0)
        self.base = f"http://127.0.0.1:{self.srv.port}"
        self.key = load_key(key_path(self.cfg))
        self.token = sign(self.key, self.notice, T0 + 20, 86400)

    def req(self, path: str, data: dict | None = None, method: str | None = None):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        r = urllib.request.Request(self.base + path, data=body, method=method)
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(r, timeout=10) as resp:
                return resp.status, resp.read().decode(), dict(resp.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def events(self, types=None):
        log = EventLog(self.db, create=False)
        try:
            return [r for r in log.read(0, types=types)]
        finally:
            log.close()

    def close(self) -> None:
        self.srv.close()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None
