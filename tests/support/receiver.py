"""A local HTTP receiver for pushes (apprise ``json://``): records each POST body per path."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ITEM = re.compile(r"^[A-Z][A-Z_]+ (\S+) · ", re.M)


def named(message: str) -> list[str]:
    """The agents (condition names) a pushed message lists, one per item line ``CLASS name · ...``.
    A substring test such as ``"a1" in message`` also matches the log head's hash, the notice id
    or the link's token, all hex or random text."""
    return ITEM.findall(message)


class Sink:
    """``Sink()`` listens on 127.0.0.1 (a free port); ``url()`` is the apprise URL to configure;
    ``bodies`` the decoded JSON bodies received, in order. ``close()`` when done."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    sink.bodies.append(json.loads(raw or b"{}"))
                except ValueError:
                    sink.bodies.append({"raw": raw.decode("utf-8", "replace")})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self) -> str:
        return f"json://127.0.0.1:{self.server.server_address[1]}/push"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
