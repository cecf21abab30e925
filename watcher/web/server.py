"""Serving the web app in a thread of `fleetwatch run` (werkzeug's threaded WSGI server).

``start(cfg, db)`` binds ``[web] listen`` (loopback by default; put a reverse proxy with TLS in
front to reach it from a phone) and serves until ``close()``. There is no access log: request
lines carry the token. A port already in use is a typed error naming ``web.listen``.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from werkzeug.serving import WSGIRequestHandler, make_server

from events.errors import FleetwatchError
from watcher.config import Config
from watcher.web.app import WebApp

log = logging.getLogger("fleetwatch.web")


class WebError(FleetwatchError):
    """The endpoint cannot listen where ``[web] listen`` says."""

    exit_code = 2


class _Quiet(WSGIRequestHandler):
    def log_request(self, *a: Any, **kw: Any) -> None:  # the request line holds the token
        pass

    def log(self, type: str, message: str, *args: Any) -> None:  # noqa: A002
        if type == "error":
            log.warning("web: %s", "request error")


class WebServer:
    def __init__(self, app: WebApp, host: str, port: int):
        self.app = app
        try:
            self.srv = make_server(host, port, app, threaded=True, request_handler=_Quiet)
        except OSError as e:
            raise WebError(f"cannot listen on {host}:{port}: {e.strerror}", op="web",
                           hint="change [web] listen, or stop what uses the port") from e
        self.port = self.srv.server_port
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="fleetwatch-web", daemon=True)
        self.thread.start()
        log.info("web: listening on %s:%d", host, self.port)

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()
        self.thread.join(5)
        self.app.close()


def start(cfg: Config, db: str, **kw: Any) -> WebServer | None:
    """The running endpoint, or None without ``[web]``."""
    if cfg.web is None:
        return None
    host, _, port = cfg.web.listen.rpartition(":")
    return WebServer(WebApp(cfg, db, **kw), host.strip("[]"), int(port))
