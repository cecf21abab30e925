"""Serving the web app in a thread of `fleetwatch run` (werkzeug's threaded WSGI server).

``start(cfg, db)`` binds ``[web] listen`` (loopback by default; put a reverse proxy with TLS in
front to reach it from a phone) and serves until ``close()``. There is no access log: request
lines carry the token. A port already in use is a typed error naming ``web.listen``.

The endpoint shares the watcher's process, so no client may hold its resources: at most
``MAX_CONNECTIONS`` connections are served at once (one more gets a short 503 and is closed at
once), every read or write waits at most ``IO_TIMEOUT`` s, and a connection still open
``DEADLINE`` s after it was accepted is shut down whatever it is doing (a client sending its
headers one byte a second). Without these, idle connections each held a thread and a file
descriptor for ever, and enough of them left the watcher unable to open a goal file.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

from events.errors import FleetwatchError
from watcher.config import Config
from watcher.web.app import WebApp

log = logging.getLogger("fleetwatch.web")
MAX_CONNECTIONS = 32
IO_TIMEOUT = 10.0
DEADLINE = 30.0
_BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 5\r\n"
         b"Connection: close\r\nContent-Length: 5\r\n\r\nbusy\n")


class WebError(FleetwatchError):
    """The endpoint cannot listen where ``[web] listen`` says."""

    exit_code = 2


class _Quiet(WSGIRequestHandler):
    timeout = IO_TIMEOUT  # socketserver: settimeout() on the connection before any read

    def version_string(self) -> str:  # the Server header names no library or Python version
        return "fleetwatch"

    def log_request(self, *a: Any, **kw: Any) -> None:  # the request line holds the token
        pass

    def log(self, type: str, message: str, *args: Any) -> None:  # noqa: A002
        if type == "error":
            log.warning("web: %s", "request error")


class _BindFailed(Exception):
    """Binding or listening failed (``strerror``: the OSError's). Not an OSError: werkzeug
    answers one raised there with a message on stderr and ``sys.exit(1)``, which would end the
    whole watcher; this one reaches ``WebServer`` and becomes a ``WebError``."""

    def __init__(self, e: OSError) -> None:
        super().__init__(e.strerror)
        self.strerror = e.strerror


class _Server(ThreadedWSGIServer):
    """Bounded: ``MAX_CONNECTIONS`` at once, each shut down ``DEADLINE`` s after its accept."""

    def server_bind(self) -> None:
        try:
            super().server_bind()
        except OSError as e:
            raise _BindFailed(e) from e

    def server_activate(self) -> None:
        try:
            super().server_activate()
        except OSError as e:
            raise _BindFailed(e) from e

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._open: dict[socket.socket, float] = {}
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(0.5)
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        with self._open_lock:
            self._open[request] = time.monotonic() + DEADLINE
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: Any) -> None:
        with self._open_lock:
            had = self._open.pop(request, None) is not None
        self.shutdown_request(request)
        if had:
            self._slots.release()

    def service_actions(self) -> None:  # serve_forever calls this every poll interval
        now = time.monotonic()
        with self._open_lock:
            for sock, deadline in self._open.items():
                if deadline <= now:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)  # the handler's read or write fails now
                    except OSError:
                        pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("web: %s", "request error")


class WebServer:
    def __init__(self, app: WebApp, host: str, port: int):
        self.app = app
        try:
            self.srv = _Server(host, port, app, handler=_Quiet)
        except (OSError, _BindFailed) as e:
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
