"""The phone page's endpoint attacked as a hostile client would: real servers on 127.0.0.1, real
sockets, a real `fleetwatch run` process and a real log (tests/support/webpage.py's Site)."""
from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import threading
import time

import pytest

pytest.importorskip("werkzeug")

from events.log import EventLog  # noqa: E402
from watcher.web import server  # noqa: E402
from tests.support.exe import FLEETWATCH
from tests.support.webpage import Site


def _post_twice(site, action: str) -> list:
    before = {r.seq for r in site.events()}
    for _ in range(2):
        assert site.req(f"/n/{site.notice}/{action}", {"t": site.token})[0] == 303
    return [r for r in site.events() if r.seq not in before]


def test_acknowledge_posted_twice_records_one_ack(site):
    new = _post_twice(site, "ack")
    assert [r.type for r in new] == ["notice.acked"]


def test_snooze_posted_twice_records_one_snooze(site):
    new = _post_twice(site, "snooze")
    assert [r.type for r in new] == ["notice.acked"] and new[0].event.until


def test_silence_posted_twice_records_one_silence_per_agent(site):
    new = _post_twice(site, "silence")
    assert sorted(r.event.subject_match for r in new) == ["agent:a1", "agent:a2"]


def test_a_new_kind_of_tap_is_still_recorded(site):
    """Acknowledge, then Snooze, then Acknowledge again: each changes the ack, each is recorded."""
    before = len(site.events())
    for action in ("ack", "snooze", "ack"):
        assert site.req(f"/n/{site.notice}/{action}", {"t": site.token})[0] == 303
    acks = [r.event for r in site.events()[before:]]
    assert [bool(e.until) for e in acks] == [False, True, False]


def _threads() -> int:
    return threading.active_count()


def test_idle_connections_are_bounded_and_a_client_still_gets_an_answer(site):
    base = _threads()
    socks = []
    try:
        for _ in range(120):
            s = socket.create_connection(("127.0.0.1", site.srv.port), timeout=5)
            s.sendall(b"GET /")                # a request line that never ends
            socks.append(s)
        time.sleep(1.0)
        assert _threads() - base <= server.MAX_CONNECTIONS + 2
        c = socket.create_connection(("127.0.0.1", site.srv.port), timeout=5)
        c.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert c.recv(100).startswith(b"HTTP/1.0 503")   # answered at once, not queued for ever
        c.close()
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    assert site.req("/healthz")[0] == 200


def test_a_client_dripping_its_headers_is_cut_off_at_the_deadline(site, monkeypatch):
    """One byte every 0.25 s never trips a read timeout; the deadline still ends the connection."""
    monkeypatch.setattr(server, "DEADLINE", 1.5, raising=False)
    s = socket.create_connection(("127.0.0.1", site.srv.port), timeout=5)
    s.settimeout(0.25)
    t0 = time.monotonic()
    ended = None
    for ch in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40:
        try:
            s.sendall(bytes([ch]))
            if s.recv(100) is not None:      # b"" (closed) or an answer: the server ended it
                ended = time.monotonic() - t0
        except socket.timeout:
            pass
        except OSError:
            ended = time.monotonic() - t0
        if ended is not None or time.monotonic() - t0 > 6:
            break
    s.close()
    assert ended is not None and ended < 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _goal(folder, state: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "goal.json").write_text(json.dumps({"agent": "a1", "task": "t", "state": state,
                                                  "phase": "haciendo", "dod_contract": "tests pass"}))


def test_idle_connections_do_not_starve_the_watcher_of_file_descriptors(tmp_path):
    """Found by hand: 400 idle connections to [web] listen left `fleetwatch run` (soft limit 256
    open files) with EMFILE on its goal folder: source.failed, and a1's RECLAMA only after they
    went away."""
    port = _free_port()
    _goal(tmp_path / "agents" / "a1", "busy")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "300ms"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/agents/*/goal.json"\n'
                   f'[web]\nlisten = "127.0.0.1:{port}"\nkey_file = "{tmp_path}/state/web.key"\n')

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "NO_COLOR": "1"}
    env.pop("FLEETWATCH_DB", None)
    env.pop("FLEETWATCH_CONFIG", None)
    proc = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg)], env=env,
                            preexec_fn=low_limit, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    socks = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        for _ in range(300):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                break
            s.sendall(b"GET /")
            socks.append(s)
        time.sleep(1.0)
        _goal(tmp_path / "agents" / "a1", "waiting")
        seen = []
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            time.sleep(0.5)
            log = EventLog(str(tmp_path / "e.db"), create=False, readonly=True)
            try:
                seen = [(r.type, getattr(r.event, "to", None)) for r in log.read(0)]
            finally:
                log.close()
            if ("agent.classified", "RECLAMA") in seen:
                break
        assert ("agent.classified", "RECLAMA") in seen, seen
        assert "source.failed" not in [t for t, _ in seen]
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_large_fleet_gives_a_small_page(tmp_path):
    """Found by hand: 10,000 RECLAMA agents in one notice made a 1.27 MB notice page and a 1.83 MB
    fleet page, 0.5 s of the watcher's CPU each (20 at once: 7.6 s), for a phone."""
    items, rows = 100, 50           # watcher.web.items, MAX_ROWS
    s = Site(tmp_path, agents=[f"a{i:04d}" for i in range(400)])
    try:
        code, notice_html, _ = s.req(f"/n/{s.notice}?t={s.token}")
        assert code == 200 and "fleetwatch · 400 item(s)" in notice_html
        assert notice_html.count("<li class=item>") == items and f"and {400 - items} more" in notice_html
        code, fleet_html, _ = s.req(f"/n/{s.notice}/fleet?t={s.token}")
        assert code == 200 and "need you · 400" in fleet_html and f"and {400 - rows} more" in fleet_html
        assert len(fleet_html) < 30_000 and len(notice_html) < 40_000
        before = len(s.events())
        assert s.req(f"/n/{s.notice}/ack", {"t": s.token})[0] == 303
        assert len(s.events()[before].event.conditions) == 400          # the button acts on all of them
    finally:
        s.close()


def test_deleting_the_key_revokes_links_while_the_server_runs(site):
    """Found by hand: with `fleetwatch run` serving, `rm web.key` (the documented way to revoke
    every link) left the old link working (200, and its buttons acting) until a restart."""
    from watcher.runtime.links import key_path

    page = f"/n/{site.notice}?t={site.token}"
    assert site.req(page)[0] == 200
    os.unlink(key_path(site.cfg))
    before = len(site.events())
    assert site.req(page)[0] == 403
    assert site.req(f"/n/{site.notice}/ack", {"t": site.token})[0] == 403
    assert len(site.events()) == before
    from watcher.runtime.links import load_key, sign

    fresh = sign(load_key(key_path(site.cfg), create=False), site.notice, site.clock.t, 3600)
    assert site.req(f"/n/{site.notice}?t={fresh}")[0] == 200        # links signed with the new key work


def test_a_key_made_readable_by_others_refuses_every_link(site):
    from watcher.runtime.links import key_path

    os.chmod(key_path(site.cfg), 0o644)
    assert site.req(f"/n/{site.notice}?t={site.token}")[0] == 403
    os.chmod(key_path(site.cfg), 0o600)
    assert site.req(f"/n/{site.notice}?t={site.token}")[0] == 200


def test_behind_a_proxy_at_a_path_the_buttons_links_and_redirects_keep_the_prefix(tmp_path):
    """Found reading the page behind `public_url = "https://fleet.example.net/fw"` (a TLS proxy
    mounting the endpoint at /fw, as the docs advise): the push's link carried /fw, but the
    page's forms, its fleet link and the 303 after a tap pointed at /n/..., outside the proxy."""
    import re
    from urllib.parse import urljoin, urlsplit

    from watcher.config import parse

    def behind_proxy(tmp, extra: str = ""):
        return parse(f'[store]\npath = "{tmp}/e.db"\n[notify]\nurls = ["json://127.0.0.1:9/x"]\n[web]\n'
                     f'listen = "127.0.0.1:0"\npublic_url = "https://fleet.example.net/fw/"\n'
                     f'key_file = "{tmp}/state/web.key"\n', check_paths=False)

    s = Site(tmp_path, cfg=behind_proxy(tmp_path))
    try:
        pushed = f"https://fleet.example.net/fw/n/{s.notice}?t={s.token}"
        code, html, _ = s.req(f"/n/{s.notice}?t={s.token}")   # what the proxy forwards, /fw stripped
        assert code == 200
        targets = re.findall(r"action='([^']+)'", html) + re.findall(r"href='([^']+)'", html)
        assert len(targets) == 2 * 2 + 3 + 1   # per item (2): ack, snooze; all: ack, snooze, silence; the fleet
        for t in targets:
            assert urlsplit(urljoin(pushed, t.replace("&amp;", "&"))).path.startswith("/fw/n/"), t
        code, fleet, _ = s.req(f"/n/{s.notice}/fleet?t={s.token}")
        back = re.findall(r"href='([^']+)'", fleet)[0].replace("&amp;", "&")
        assert urljoin(pushed, back) == pushed
        code, _, headers = s.req(f"/n/{s.notice}/ack", {"t": s.token})
        assert code == 303
        assert urlsplit(urljoin(pushed, headers["Location"])).path == f"/fw/n/{s.notice}"
    finally:
        s.close()
