"""A scripted fake of Anthropic's Messages API on 127.0.0.1, for driving the real Claude Code client.

``FakeAPI()`` binds 127.0.0.1 on a free port and serves in daemon threads (``start()``/``close()``,
or use it as a context manager). Point Claude Code at it with ``ANTHROPIC_BASE_URL=fake.url``.

The test scripts the model's turns with ``fake.script(turn, ...)``: a FIFO of replies that the
*conversation* requests consume, one each, in order. A conversation request is a ``POST
/v1/messages`` that offers tools (the main loop and subagents do; Claude Code's side requests, such
as a session title or a quota probe, offer none and get a short text reply without consuming a
turn). With the queue empty a conversation request gets ``text("ok")``. Turns:

- ``text("...")``: one text block, ``stop_reason: end_turn``;
- ``tools(call(name, input), ...)``: tool_use blocks (input streamed as ``input_json_delta``
  fragments), ``stop_reason: tool_use``, with an optional leading text;
- ``error(status, kind, times=1)``: an HTTP error with the API's error body, for ``times``
  conversation requests in a row (Claude Code retries 5xx/529: give it enough);
- ``hold(turn)``: stream ``message_start`` and then pings until ``release()`` (or the client hangs up,
  as an Escape does), then the turn: "the model is thinking".

Streams speak SSE as the API does: ``message_start``, ``content_block_start``/``_delta``/``_stop``,
``message_delta``, ``message_stop``. ``/v1/messages/count_tokens`` answers a token count;
``HEAD``/``GET`` probes answer 200 with ``{}``; any other path is logged in ``unexpected`` and gets a
404 with an API error body. ``requests`` logs every request as metadata (method, path, model, tool
names offered, number of messages, stream flag, status returned), never the conversation.
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):08d}fake"


class Turn:
    """One scripted reply: content blocks and a stop reason, or an HTTP error."""

    def __init__(self, blocks: list[dict], stop: str = "end_turn", status: int = 200, kind: str = "",
                 times: int = 1, held: bool = False):
        self.blocks, self.stop, self.status, self.kind = blocks, stop, status, kind
        self.times, self.held = times, held

    def __repr__(self) -> str:
        if self.status != 200:
            return f"error({self.status}, {self.kind!r}, times={self.times})"
        names = [b.get("name") or b["type"] for b in self.blocks]
        return f"Turn({names}, stop={self.stop!r}{', held' if self.held else ''})"


def text(s: str = "ok") -> Turn:
    return Turn([{"type": "text", "text": s}])


def call(name: str, input: dict, id: str | None = None) -> dict:
    return {"type": "tool_use", "id": id or _id("toolu"), "name": name, "input": input}


def tools(*calls: dict, lead: str = "") -> Turn:
    blocks = ([{"type": "text", "text": lead}] if lead else []) + list(calls)
    return Turn(blocks, stop="tool_use")


def bash(command: str, description: str = "run a command") -> Turn:
    return tools(call("Bash", {"command": command, "description": description}))


ERROR_KINDS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def error(status: int, kind: str | None = None, times: int = 1) -> Turn:
    return Turn([], status=status, kind=kind or ERROR_KINDS.get(status, "api_error"), times=times)


def hold(turn: Turn | None = None) -> Turn:
    t = turn or text("done thinking")
    return Turn(t.blocks, stop=t.stop, held=True)


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(s: str, n: int = 3) -> list[str]:
    size = max(1, len(s) // n + 1)
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


class FakeAPI:
    def __init__(self):
        self.turns: list[Turn] = []
        self.sub_turns: list[Turn] = []   # for subagents' requests (see script_sub)
        self.requests: list[dict] = []
        self.unexpected: list[str] = []
        self.served: list[Turn] = []   # the scripted turns handed out, in order
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._release = threading.Event()
        self.holding = threading.Event()   # set while a held turn streams pings
        self.holds = 0                     # held turns begun so far
        self.hung_up = 0                   # held streams the client closed
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # ------------------------------------------------------------ the test's side

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, *turns: Turn) -> None:
        with self._lock:
            self.turns.extend(turns)

    def script_sub(self, *turns: Turn) -> None:
        """Turns for subagents' conversation requests: those that do not offer ``AskUserQuestion``
        (the main loop offers it, a subagent cannot ask the person). Without any, subagents take
        from the main queue."""
        with self._lock:
            self.sub_turns.extend(turns)

    def clear(self) -> None:
        """Drop the turns not yet handed out (a denied or interrupted turn leaves its follow-ups)."""
        with self._lock:
            self.turns.clear()
            self.sub_turns.clear()

    def pending(self) -> int:
        with self._lock:
            return len(self.turns)

    def release(self) -> None:
        """Let the held turn now streaming go on (see ``hold``)."""
        self._release.set()

    def wait_served(self, n: int, timeout: float = 60.0) -> bool:
        """Wait until ``n`` scripted turns in all have been handed out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.served) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def conversation_requests(self) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r.get("conversation")]

    def start(self) -> "FakeAPI":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet: requests are kept in fake.requests
                pass

            def do_HEAD(self):
                fake._note(self, {}, 200)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                fake._note(self, {}, 200)
                self._json(200, {})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages/count_tokens":
                    fake._note(self, body, 200)
                    return self._json(200, {"input_tokens": 100})
                if path != "/v1/messages":
                    fake._note(self, body, 404, unexpected=True)
                    return self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                       "message": f"no such path {path}"}})
                fake._messages(self, body)

            def _json(self, status: int, doc: dict, headers: dict | None = None):
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", _id("req"))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client hanging up mid-request: not news
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fakeapi", daemon=True)
        self.thread.start()
        return self

    def close(self) -> None:
        self._release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def __enter__(self) -> "FakeAPI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ the server's side

    def _note(self, h, body: dict, status: int, unexpected: bool = False, **extra) -> dict:
        tools_offered = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        rec = {"at": time.time(), "method": h.command, "path": h.path, "model": body.get("model"),
               "tools": tools_offered, "messages": len(body.get("messages") or []),
               "stream": bool(body.get("stream")), "status": status, **extra}
        with self._lock:
            self.requests.append(rec)
            if unexpected:
                self.unexpected.append(f"{h.command} {h.path}")
        return rec

    def _next(self, conversation: bool, sub: bool = False) -> Turn:
        if not conversation:
            return text("ok")
        with self._cond:
            queue = self.sub_turns if sub and self.sub_turns else self.turns
            if not queue:
                return text("ok")
            t = queue[0]
            if t.times > 1:
                t.times -= 1
            else:
                queue.pop(0)
            self.served.append(t)
            self._cond.notify_all()
            return t

    def _messages(self, h, body: dict) -> None:
        offered = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        conversation = bool(offered)
        turn = self._next(conversation, sub="AskUserQuestion" not in offered)
        self._note(h, body, turn.status, conversation=conversation, turn=repr(turn))
        if turn.status != 200:
            doc = {"type": "error", "error": {"type": turn.kind, "message": f"fake {turn.kind}"}}
            return h._json(turn.status, doc, {"x-should-retry": "false"} if turn.status < 500 else None)
        model = body.get("model") or "claude-fake"
        msg = {"id": _id("msg"), "type": "message", "role": "assistant", "model": model,
               "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 0}}
        if not body.get("stream"):
            msg.update(content=turn.blocks, stop_reason=turn.stop)
            msg["usage"]["output_tokens"] = 10
            return h._json(200, msg)
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.send_header("request-id", _id("req"))
        h.end_headers()
        h.close_connection = True
        try:
            h.wfile.write(_sse("message_start", {"type": "message_start", "message": {**msg, "content": []}}))
            h.wfile.flush()
            if turn.held and not self._hold(h):
                return
            for i, b in enumerate(turn.blocks):
                if b["type"] == "text":
                    h.wfile.write(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                               "content_block": {"type": "text", "text": ""}}))
                    for part in _chunks(b["text"]):
                        h.wfile.write(_sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                                   "delta": {"type": "text_delta", "text": part}}))
                else:
                    start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                    h.wfile.write(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                               "content_block": start}))
                    for part in _chunks(json.dumps(b["input"])):
                        h.wfile.write(_sse("content_block_delta", {
                            "type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": part}}))
                h.wfile.write(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
            h.wfile.write(_sse("message_delta", {"type": "message_delta",
                                                 "delta": {"stop_reason": turn.stop, "stop_sequence": None},
                                                 "usage": {"output_tokens": 10}}))
            h.wfile.write(_sse("message_stop", {"type": "message_stop"}))
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _hold(self, h) -> bool:
        """Pings until released; False when the client hung up (an Escape aborts the request). A
        ``release()`` before the hold began does not count: each held turn waits for its own."""
        self._release.clear()
        with self._lock:
            self.holds += 1
        self.holding.set()
        try:
            while not self._release.wait(0.25):
                try:
                    h.wfile.write(_sse("ping", {"type": "ping"}))
                    h.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, OSError):
                    with self._lock:
                        self.hung_up += 1
                    return False
            self._release.clear()
            return True
        finally:
            self.holding.clear()
