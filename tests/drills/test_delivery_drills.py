"""Delivery drills against a real local HTTP receiver (ThreadingHTTPServer on 127.0.0.1, apprise
``json://`` URL) and the real notifier (watcher/runtime/notifier.py):

- mid_crash_after_send: a real `fleetwatch run` is SIGKILLed right after the receiver answered
  200 and before the notice.sent record: after a restart the message repeats at most once
  (counted), and then it is recorded;
- receiver outage: the receiver is down (connection refused) for a simulated 5 minutes while
  conditions arrive (virtual clock driving Watcher.tick): 0 notices lost, none abandoned;
- a retry re-sends only the message: the same notice id and covers, and no recorded work redone
  (no new agent.classified, no second notice.sent).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from events.log import EventLog
from watcher.config import parse
from tests.support.vclock import written_at
from tests.support.exe import FLEETWATCH

notifier_mod = pytest.importorskip("watcher.runtime.notifier", reason="watcher/runtime/notifier.py missing")
EXE = FLEETWATCH
T0 = 1_800_000_000.0


class Receiver:
    """A real HTTP endpoint. ``status`` is the reply code; ``up`` False = connection refused;
    ``on_post(body)`` runs after the reply was flushed (the send succeeded)."""

    def __init__(self):
        self.posts: list[dict] = []
        self.status = 200
        self.on_post = None
        self.port = 0
        self.server = None
        self.start()

    def start(self):
        rcv = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                code = rcv.status
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.wfile.flush()
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = {"raw": body.decode("utf-8", "replace")}
                doc["_status"] = code
                rcv.posts.append(doc)
                if code == 200 and rcv.on_post is not None:
                    rcv.on_post(doc)

            def log_message(self, *a):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def delivered(self) -> list[dict]:
        return [p for p in self.posts if p["_status"] == 200]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    try:
        r.stop()
    except Exception:
        pass


def goal(root: Path, agent: str, **kw):
    g = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": f"tests for {agent}",
         "last_activity": kw.pop("last_activity", time.time())}
    g.update(kw)
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    (d / "goal.json.tmp").write_text(json.dumps(g))
    written_at(d / "goal.json.tmp", g["last_activity"])  # on the virtual clock (tests/support/vclock.py)
    os.replace(d / "goal.json.tmp", d / "goal.json")


def types(elog: EventLog, prefix: str = "") -> list:
    return [r for r in elog.read(0) if r.type.startswith(prefix)]


@pytest.mark.drill
def test_mid_crash_after_send_repeats_at_most_once(tmp_path, receiver, capsys):
    fleet = tmp_path / "fleet"
    goal(fleet, "a1")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n[watch]\ninterval = "200ms"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                   f'[notify]\nurls = ["{receiver.url}"]\ngroup_wait = "300ms"\nretry = ["1s"]\n')
    argv = [EXE, "run", "--config", str(cfg), "--log-level", "warning"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed = threading.Event()

    def kill_now(doc):  # the send succeeded (200 flushed): die before it is recorded
        if not killed.is_set():
            p.send_signal(signal.SIGKILL)
            killed.set()

    receiver.on_post = kill_now
    elog = EventLog(str(tmp_path / "e.db"))
    for _ in range(100):
        if types(elog, "agent.classified"):
            break
        time.sleep(0.05)
    goal(fleet, "a1", state="waiting")                    # RECLAMA: urgent, pushed after group_wait
    assert killed.wait(20), p.stderr.read().decode() if p.poll() is not None else "no push"
    p.wait()
    assert not types(elog, "notice.sent")                 # delivered, never recorded
    receiver.on_post = None
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if types(elog, "notice.sent"):
                break
            time.sleep(0.05)
        time.sleep(1.0)                                   # room for a (wrong) third send
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    got = [d for d in receiver.delivered() if "a1" in d.get("message", "")]
    repeats = len(got) - 1
    sent = types(elog, "notice.sent")
    with capsys.disabled():
        print(f"\nmid_crash_after_send: deliveries={len(got)} repeats={repeats} notice.sent={len(sent)}")
    assert 1 <= len(got) <= 2 and repeats <= 1
    assert len(sent) == 1 and elog.verify().ok


def virtual(tmp_path, receiver, **notify):
    fleet = tmp_path / "fleet"
    extra = "".join(f'{k} = {json.dumps(v)}\n' for k, v in notify.items())
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[classify]\nstall_after = "1000d"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
                f'[notify]\nurls = ["{receiver.url}"]\ntimeout = "2s"\n{extra}', check_paths=False)
    from watcher.runtime.loop import Watcher

    fleet.mkdir(exist_ok=True)
    elog = EventLog(str(tmp_path / "e.db"), durability="normal")
    n = notifier_mod.Notifier(cfg)
    return fleet, elog, Watcher(cfg, elog, notifier=n), n


def run_until(w, n, now: float, end: float, step: float, hook=None) -> float:
    """Tick the virtual clock from ``now`` to ``end``; let the worker finish after each tick."""
    while now < end:
        now += step
        if hook:
            hook(now)
        w.tick(now)
        assert n.drain(15)
    return now


@pytest.mark.drill
def test_receiver_outage_loses_nothing(tmp_path, receiver, capsys):
    fleet, elog, w, n = virtual(tmp_path, receiver, group_wait="10s")
    for a in ("a1", "a2", "a3", "a4"):
        goal(fleet, a, last_activity=T0)
    w.tick(T0)
    receiver.stop()                                       # down: connection refused
    arrivals = {T0 + 5: "a1", T0 + 60: "a2", T0 + 200: "a3", T0 + 290: "a4"}

    def churn(now):
        for t, a in list(arrivals.items()):
            if now >= t:
                goal(fleet, a, state="waiting", last_activity=t)
                del arrivals[t]
        if now >= T0 + 300 and receiver.server.socket.fileno() == -1:
            receiver.start()                              # back after a simulated 5 minutes

    run_until(w, n, T0, T0 + 1500, 5.0, churn)
    failed = types(elog, "notice.failed")
    abandoned = types(elog, "notice.abandoned")
    delivered = " ".join(d.get("message", "") for d in receiver.delivered())
    lost = [a for a in ("a1", "a2", "a3", "a4") if a not in delivered]
    with capsys.disabled():
        print(f"\nreceiver outage 300s (virtual): failed attempts={len(failed)} abandoned={len(abandoned)} "
              f"deliveries={len(receiver.delivered())} lost={len(lost)}")
    assert failed and not abandoned and not lost
    assert elog.verify().ok
    n.close(2)


@pytest.mark.drill
def test_retry_resends_only_the_message(tmp_path, receiver):
    fleet, elog, w, n = virtual(tmp_path, receiver, group_wait="10s", retry=["30s", "2m"])
    goal(fleet, "a1", last_activity=T0)
    w.tick(T0)
    goal(fleet, "a1", state="waiting", last_activity=T0)
    receiver.status = 500                                 # the first attempt fails
    now = run_until(w, n, T0, T0 + 20, 5.0)            # send at +10, harvested at +15
    fails = types(elog, "notice.failed")
    assert len(fails) == 1
    head = elog.head()[0]
    receiver.status = 200
    run_until(w, n, now, now + 120, 5.0)
    after = [r for r in elog.read(head)]
    assert [r.type for r in after] == ["notice.sent"]     # nothing re-derived, nothing redone
    sent, fail = after[0].event, fails[0].event
    assert (sent.notice, sent.covers, sent.attempt) == (fail.notice, fail.covers, 2)
    posts = receiver.posts
    assert [p["_status"] for p in posts] == [500, 200]
    assert posts[0]["title"] == posts[1]["title"]
    assert [r.event.to for r in types(elog, "agent.classified")] == ["TRABAJANDO", "RECLAMA"]
    n.close(2)
