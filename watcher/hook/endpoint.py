"""The watcher's hook endpoint: Claude Code's ``"type": "http"`` hooks POST their payload here.

An http hook costs Claude Code one loopback request instead of a process per event. ``fleetwatch
run`` serves ``[hook] listen`` (loopback) in its own threads; the tick never waits for it. Each
request is answered ``200`` with an empty body (Claude Code: success, no output) as soon as it is
queued; the update itself is the one ``fleetwatch hook`` makes (``adapter.run_hook``: the pure
``mapping.decide``/``apply`` and ``goalfile.update_goal``'s atomic read-modify-write), run by a
worker with the environment the request's headers carry (``X-Fleetwatch-Agent``: ``$FLEETWATCH_AGENT``;
``X-Fleetwatch-Tmux``/``-Pane``: ``$TMUX``/``$TMUX_PANE``, interpolated by Claude Code through
``allowedEnvVars``; ``X-Fleetwatch-Goals-Dir``: the goals dir, else ``[hook] goals_dir``) and the
time it was received.

Invariants:
- Order: deliveries are queued in the order they were received, in one lane per session (the
  header's agent, else the payload's ``session_id``); a lane is worked by one worker at a time,
  in order, so a later event of an agent is never applied before an earlier one, and none is
  lost while the queue has room. The time given to the mapping never goes back (the greatest
  received so far), so a clock step back cannot make ``last_activity`` older.
- Only the watcher's own user is served: the peer's uid is read from ``/proc/net/tcp[6]`` (a
  loopback connection names its owner there); another user's request gets ``403``. Only ``POST``,
  a JSON body of at most ``MAX_BODY`` bytes with a ``Content-Length``; anything else is refused.
- Bounded: ``MAX_CONNECTIONS`` connections at once (one more is closed at once), ``IO_TIMEOUT`` s
  per read or write and ``REQUEST_DEADLINE`` s for the whole of one request (its line, headers and
  body: a peer trickling a byte a second cannot keep a connection slot past it), ``MAX_QUEUED`` deliveries waiting (past it one is dropped and counted: the
  log says how many, never what).
- Logs say states and counts only, never a payload, a prompt or a path from one.
"""
from __future__ import annotations

import collections
import io
import logging
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("fleetwatch.hook")
MAX_BODY = 4 * 1024 * 1024     # as the command hook's stdin cap
MAX_CONNECTIONS = 64
MAX_QUEUED = 10_000
IO_TIMEOUT = 5.0
REQUEST_DEADLINE = 10.0        # seconds for one request, line to body, however the bytes trickle in
WORKERS = 2
PATH = "/hook"
HEADERS = {"x-fleetwatch-agent": "FLEETWATCH_AGENT", "x-fleetwatch-tmux": "TMUX",
           "x-fleetwatch-pane": "TMUX_PANE", "x-fleetwatch-goals-dir": "FLEETWATCH_GOALS_DIR"}


class HookEndpointError(Exception):
    """The endpoint cannot listen where ``[hook] listen`` says."""


SD_LISTEN_FDS_START = 3


def inherited_socket(environ=os.environ) -> socket.socket | None:
    """The listening TCP socket systemd passed (socket activation: ``LISTEN_PID`` is this process,
    ``LISTEN_FDS`` >= 1; the one named ``hook`` in ``LISTEN_FDNAMES``, else the first stream
    socket), None otherwise. The variables are removed, so that no child takes them for its own."""
    if environ.get("LISTEN_PID") != str(os.getpid()):
        return None
    try:
        n = int(environ.get("LISTEN_FDS") or "0")
    except ValueError:
        return None
    names = (environ.get("LISTEN_FDNAMES") or "").split(":")
    for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        environ.pop(key, None)
    fds = list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + max(0, min(n, 64))))
    fds.sort(key=lambda fd: names[fd - SD_LISTEN_FDS_START] != "hook" if fd - SD_LISTEN_FDS_START < len(names) else True)
    for fd in fds:
        try:
            s = socket.socket(fileno=fd)
        except OSError:
            continue
        if s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6):
            os.set_inheritable(fd, False)
            return s
        s.detach()
    return None


def _addr_hex(host: str, port: int, v6: bool) -> str:
    """An address as ``/proc/net/tcp[6]`` prints it (little-endian words, port in hex)."""
    if not v6:
        return f"{int.from_bytes(socket.inet_aton(host), 'little'):08X}:{port:04X}"
    raw = socket.inet_pton(socket.AF_INET6, host)
    words = "".join(f"{int.from_bytes(raw[i:i + 4], 'little'):08X}" for i in range(0, 16, 4))
    return f"{words}:{port:04X}"


def peer_uid(local: tuple, peer: tuple) -> int | None:
    """The uid owning the client end of a loopback TCP connection (None: not found)."""
    v6 = ":" in peer[0]
    want_local, want_rem = _addr_hex(peer[0], peer[1], v6), _addr_hex(local[0], local[1], v6)
    try:
        with open("/proc/net/tcp6" if v6 else "/proc/net/tcp", "rb") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 7 and parts[1].decode() == want_local and parts[2].decode() == want_rem:
                    return int(parts[7])
    except (OSError, ValueError):
        return None
    return None


class _DeadlineReader(io.RawIOBase):
    """The connection's reads, each given at most what is left of the handler's deadline: the
    socket timeout alone (``IO_TIMEOUT`` per read) restarts with every byte received."""

    def __init__(self, sock: socket.socket, handler: "_Handler"):
        self.sock, self.handler = sock, handler

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        left = self.handler.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request deadline passed")
        self.sock.settimeout(min(IO_TIMEOUT, left))
        return self.sock.recv_into(b)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: Claude Code reuses one connection
    timeout = IO_TIMEOUT
    server: "_Server"
    peer_ok = False      # this connection's peer was checked (one handler per connection)
    deadline = 0.0       # monotonic time by which the request being read must be in

    def setup(self) -> None:
        super().setup()
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self))

    def handle_one_request(self) -> None:
        self.deadline = time.monotonic() + REQUEST_DEADLINE
        super().handle_one_request()

    def log_message(self, *a: Any) -> None:  # no access log: states only
        pass

    def version_string(self) -> str:
        return "fleetwatch"

    def _reply(self, status: int, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        self._reply(405, close=True)

    do_PUT = do_DELETE = do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        t = time.time()
        ep = self.server.endpoint
        if self.path.split("?", 1)[0] != PATH:
            return self._reply(404, close=True)
        if ep.uid is not None and not self.peer_ok:   # once per connection (keep-alive serves many)
            if peer_uid(self.server.server_address[:2], self.client_address[:2]) != ep.uid:
                ep.count("refused")
                return self._reply(403, close=True)
            self.peer_ok = True
        try:
            n = int(self.headers.get("Content-Length") or "")
        except ValueError:
            return self._reply(411, close=True)
        if n < 0 or n > MAX_BODY:
            return self._reply(413, close=True)
        body = self.rfile.read(n)
        if len(body) != n:
            return self._reply(400, close=True)
        self.connection.settimeout(IO_TIMEOUT)   # the reply's write: its own timeout, not what was left
        env = {v: self.headers.get(k, "") for k, v in HEADERS.items()}
        ep.submit(body, {k: v for k, v in env.items() if v}, t)
        self._reply(200)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple, endpoint: "HookEndpoint", sock: socket.socket | None = None):
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.endpoint = endpoint
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(addr, _Handler, bind_and_activate=sock is None)
        if sock is not None:   # already bound and listening (systemd socket activation)
            self.socket.close()
            self.socket = sock
            self.server_address = sock.getsockname()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            self.endpoint.count("busy")
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.endpoint.count("errors")


class HookEndpoint:
    """``HookEndpoint(listen, goals_dir)``: serving from construction until ``close()``."""

    def __init__(self, listen: str, goals_dir: str | None = None, *, uid: int | None = -1,
                 sock: socket.socket | None = None):
        host, _, port = listen.rpartition(":")
        self.inherited = sock is not None
        self.goals_dir = goals_dir or os.environ.get("FLEETWATCH_GOALS_DIR") or None
        self.uid = os.getuid() if uid == -1 else uid   # None: no peer check (tests of the check itself)
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.lanes: dict[str, collections.deque] = {}
        self.ready: collections.deque[str] = collections.deque()  # lanes with work and no worker
        self.queued = 0
        self.last_t = 0.0
        self.counts: collections.Counter = collections.Counter()
        self.closing = False
        try:
            self.srv = _Server((host.strip("[]"), int(port)), self, sock)
        except (OSError, ValueError) as e:
            raise HookEndpointError(f"cannot listen on {listen}: {getattr(e, 'strerror', None) or e}") from e
        self.port = self.srv.server_address[1]
        self.threads = [threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.2},
                                         name="fleetwatch-hook-http", daemon=True)]
        self.threads += [threading.Thread(target=self._work, name=f"fleetwatch-hook-{i}", daemon=True)
                         for i in range(WORKERS)]
        for th in self.threads:
            th.start()
        log.info("hook endpoint: listening on %s:%d", host, self.port)

    @property
    def url(self) -> str:
        host = self.srv.server_address[0]
        if not isinstance(host, str):   # an AF_INET/AF_INET6 address is text; typeshed allows bytes
            host = host.decode()
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}{PATH}"

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    @staticmethod
    def lane_of(body: bytes, env: dict) -> str:
        """The lane a delivery queues in: its agent (header), else its session id, else one lane."""
        if env.get("FLEETWATCH_AGENT"):
            return "agent:" + env["FLEETWATCH_AGENT"]
        i = body.find(b'"session_id"')
        if i >= 0:
            j = body.find(b'"', body.find(b":", i) + 1)
            k = body.find(b'"', j + 1)
            if 0 <= j < k <= j + 201:
                return "session:" + body[j + 1:k].decode("utf-8", "replace")
        return "-"

    def submit(self, body: bytes, env: dict, t: float) -> bool:
        """Queue one delivery (received at ``t``); False when the queue is full (dropped, counted)."""
        lane = self.lane_of(body, env)
        with self.cond:
            if self.queued >= MAX_QUEUED or self.closing:
                self.counts["dropped"] += 1
                return False
            self.last_t = t = max(t, self.last_t)   # never back in time
            q = self.lanes.get(lane)
            if q is None:
                q = self.lanes[lane] = collections.deque()
                self.ready.append(lane)
            q.append((body, env, t))
            self.queued += 1
            self.counts["received"] += 1
            self.cond.notify()
        return True

    def _work(self) -> None:
        from watcher.hook.adapter import run_hook

        while True:
            with self.cond:
                while not self.ready and not self.closing:
                    self.cond.wait()
                if not self.ready:
                    return
                lane = self.ready.popleft()   # this worker owns the lane until it is empty
                q = self.lanes[lane]
            while True:
                with self.cond:
                    if not q:
                        del self.lanes[lane]
                        self.cond.notify_all()
                        break
                    body, env, t = q.popleft()
                # the session's goals dir (its header) first, else the endpoint's, else the hook's default
                argv = ["--goals-dir", self.goals_dir] if self.goals_dir and "FLEETWATCH_GOALS_DIR" not in env else []
                said: list[str] = []   # the command hook's stderr line: counted here, never logged
                try:
                    run_hook(argv, stdin=body, env={**env, "FLEETWATCH_HOOK_VIA": "http"}, now=t, say=said.append)
                except Exception:  # run_hook reports its own errors; anything else must not kill the worker
                    said.append("internal error")
                with self.cond:
                    self.queued -= 1
                    self.counts["errors" if said else "applied"] += 1
                    self.cond.notify_all()

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every queued delivery is applied (tests, shutdown)."""
        end = time.monotonic() + timeout
        with self.cond:
            while self.queued and time.monotonic() < end:
                self.cond.wait(0.05)
            return self.queued == 0

    def close(self, timeout: float = 5.0, *, keep_socket: bool = False) -> None:
        """Stop listening, apply what is queued (up to ``timeout``), stop the workers.
        ``keep_socket``: the listening socket stays open (an inherited one, served again)."""
        self.srv.shutdown()
        if not keep_socket:
            self.srv.server_close()
        self.drain(timeout)
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        for th in self.threads:
            th.join(1.0)
        if self.counts:
            log.info("hook endpoint: closed (%s)", ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))
