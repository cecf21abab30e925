"""Regression: `fleetwatch notify-test` (and `notify-stopped`) printed apprise's bare verdict,
"not delivered: failure: JSON failure", whatever the cause. apprise's own words for that one send
now follow it ("error=500.", "socket: Connection refused"), redacted (no token, no host) and
escaped. Real processes against a real local receiver answering 500, and a closed port."""
from __future__ import annotations

import logging
import os
import socket
import subprocess
from pathlib import Path

from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH
TOKEN = "SECRETTOKEN123"


def fw(cfg: Path, *args: str, env: dict | None = None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    e.update(env or {})
    return subprocess.run([EXE, *args, "--config", str(cfg)], capture_output=True, text=True, timeout=60, env=e)


def config(tmp_path, url: str) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{url}"]\ntimeout = "3s"\n')
    return cfg


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_an_http_500_is_named(tmp_path, rx):
    rx.codes = [500] * 10
    r = fw(config(tmp_path, rx.url(path=f"/hook/{TOKEN}")), "notify-test")
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr.startswith("not delivered: failure: JSON failure\n"), r.stderr
    assert "apprise: Failed to send JSON POST notification: Internal server error., error=500." in r.stderr
    assert TOKEN not in r.stderr and "127.0.0.1" not in r.stderr and "\x1b" not in r.stderr
    assert rx.answered and set(rx.answered) == {500}


def test_a_closed_port_is_named_by_notify_test_and_notify_stopped(tmp_path):
    cfg = config(tmp_path, f"json://127.0.0.1:{closed_port()}/hook/{TOKEN}")
    for args in (["notify-test"], ["notify-stopped"]):
        r = fw(cfg, *args, env={"MONITOR_SERVICE_RESULT": "exit-code"})
        assert r.returncode == 1, r
        assert "apprise: socket: Connection refused" in r.stderr, r.stderr
        assert "A Connection error occurred sending JSON notification" in r.stderr
        assert TOKEN not in r.stderr and "127.0.0.1" not in r.stderr


def test_a_delivery_says_nothing_more(tmp_path, rx):
    r = fw(config(tmp_path, rx.url(path=f"/hook/{TOKEN}")), "notify-test")
    assert r.returncode == 0 and r.stdout == "delivered\n" and "apprise:" not in r.stderr, r
    assert len(rx.posts) == 1


def test_causes_are_redacted_escaped_bounded_and_the_level_comes_back(capsys):
    from watcher.cli.notify import say_causes
    from watcher.runtime.deliver import Causes

    lg = logging.getLogger("apprise")
    lg.setLevel(logging.WARNING)
    with Causes((TOKEN,)) as c:
        assert lg.level == logging.DEBUG
        lg.warning("to %s: \x1b]0;pwned\x07 refused", TOKEN)
        lg.debug("JSON POST URL: json://h/%s", TOKEN)          # not a cause: never kept
        lg.debug("Socket Exception: HTTPConnectionPool(...) ([Errno 111] Connection refused)")
        for i in range(20):
            lg.error("line %d", i)
    assert lg.level == logging.WARNING and c not in lg.handlers
    assert len(c.lines) == Causes.MAX and c.lines[1] == "socket: Connection refused"
    say_causes(c.lines)
    err = capsys.readouterr().err
    assert TOKEN not in err and "\x1b" not in err and "\x07" not in err and "\\x1b" in err
    assert "JSON POST URL" not in err
