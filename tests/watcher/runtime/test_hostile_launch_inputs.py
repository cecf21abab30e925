"""Hostile inputs to ``fleetwatch launch``/``claim`` (the real CLI, a temp config, XDG state and
goals folder) and to the hook HTTP endpoint (real HTTP on loopback).

- ``--contract @FILE`` and ``--plan FILE`` naming a FIFO, a 100 MB file, a symlink loop or
  /dev/zero: refused at once (exit 2, one clear line, no traceback), nothing written.
- Agent ids with a newline (trailing too: ``re.match``'s ``$`` let ``"a1\\n"`` through and created
  ``agents/a1\\n/``), an ESC sequence, ``../x``, ``/abs``, empty, 10,000 characters: refused by the
  one check (``watcher.cli.launch.agent_problem``) for ``launch AGENT``, ``claim --agent`` and
  ``$FLEETWATCH_AGENT``, exit 2, escaped message, nothing written, no tmux window.
- The endpoint: a body over ``MAX_BODY``, a Content-Length that lies, peers trickling a byte at a
  time (they lose their slot at ``REQUEST_DEADLINE``; other deliveries go through meanwhile), an
  agent header carrying ESC or a folded newline (nothing written anywhere).
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import time
from pathlib import Path

import pytest

from tests.support.loopworld import World
from watcher.hook import endpoint as endpoint_mod
from watcher.hook.endpoint import HookEndpoint

CONTRACT = json.dumps([{"id": "t", "kind": "cmd", "cmd": ["true"]}])


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    yield w
    w.close()


def _hostile_files(tmp: Path) -> dict[str, str]:
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    big = tmp / "big.json"
    with open(big, "wb") as f:
        f.truncate(100 * 1024 * 1024)     # sparse: 100 MB by size
    loop = tmp / "loop"
    os.symlink(loop, loop)
    return {"fifo": str(fifo), "big": str(big), "loop": str(loop), "zero": "/dev/zero"}


def _nothing_written(w: World) -> None:
    assert list(w.goals.iterdir()) == []
    assert not w.db.exists() or "agent.launched" not in w.fw("events", "--json").stdout
    assert w.windows() == []


def _one_clean_refusal(r, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert r.stderr.startswith("fleetwatch: ") and all(w in r.stderr for w in words), r.stderr
    assert not any(ord(c) < 32 and c != "\n" for c in r.stderr), repr(r.stderr)


@pytest.mark.parametrize("kind", ["fifo", "big", "loop", "zero"])
def test_contract_and_plan_files_that_are_not_small_regular_files_are_refused_at_once(world, kind):
    path = _hostile_files(world.tmp)[kind]
    word = {"fifo": "not a regular file", "big": "larger than", "loop": "symlink", "zero": "not a regular file"}[kind]
    t0 = time.monotonic()
    r = world.fw("launch", "a1", "--task", "x", "--contract", "@" + path, "--", "true", timeout=20)
    _one_clean_refusal(r, "the contract file", word)
    r = world.fw("launch", "--plan", path, timeout=20)
    _one_clean_refusal(r, "the plan", word)
    assert time.monotonic() - t0 < 15      # never hangs on a FIFO, never reads 100 MB or /dev/zero
    _nothing_written(world)


BAD_IDS = ["a1\n", "a\nb", "a\x1b[31mred", "\x1b]0;title\x07", "../x", "/abs", "x" * 10_000, "a\x7f"]


@pytest.mark.parametrize("agent", BAD_IDS, ids=lambda a: repr(a[:12]))
def test_bad_agent_ids_are_refused_by_launch_and_claim_with_an_escaped_message(world, agent):
    r = world.fw("launch", agent, "--task", "x", "--contract", CONTRACT, "--", "true")
    _one_clean_refusal(r, "agent id")
    r = world.fw("claim", "done", "--agent", agent)
    _one_clean_refusal(r, "agent id")
    r = world.fw("claim", "done", env={"FLEETWATCH_AGENT": agent})
    _one_clean_refusal(r, "agent id")
    assert len(r.stderr) < 400            # a 10,000-character id is cut in the message
    _nothing_written(world)


def test_an_empty_agent_id_is_refused(world):
    _one_clean_refusal(world.fw("launch", "", "--task", "x", "--contract", CONTRACT, "--", "true"), "empty")
    _one_clean_refusal(world.fw("claim", "done", "--agent", ""), "no agent")
    _nothing_written(world)


def test_a_claim_with_a_trailing_newline_does_not_touch_the_agent_it_looks_like(world):
    g = world.goals / "a1"
    g.mkdir()
    (g / "goal.json").write_text(json.dumps({"agent": "a1", "phase": "haciendo"}))
    r = world.fw("claim", "done", "--agent", "a1\n")
    _one_clean_refusal(r, "agent id")
    assert json.loads((g / "goal.json").read_text())["phase"] == "haciendo"
    r = world.fw("claim", "done", "--agent", "a1")
    assert r.returncode == 0, r.stderr
    assert json.loads((g / "goal.json").read_text())["phase"] == "hecho"


@pytest.mark.parametrize("field", ["plan", "task"])
def test_a_plan_or_task_id_with_a_trailing_newline_is_refused(world, field):
    plan = {"plan": "p1", "max_parallel": 1,
            "tasks": [{"id": "t1", "task": "x", "dod_contract": "tests pass", "deps": [], "argv": ["true"]}]}
    if field == "plan":
        plan["plan"] = "p1\n"
    else:
        plan["tasks"][0]["id"] = "t1\n"
    f = world.tmp / "plan.json"
    f.write_text(json.dumps(plan))
    r = world.fw("launch", "--plan", str(f), "--dry-run")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and not any(ord(c) < 32 and c != "\n" for c in r.stderr), repr(r.stderr)
    _nothing_written(world)


# --- the hook HTTP endpoint -------------------------------------------------------------------

@pytest.fixture
def ep(tmp_path, monkeypatch):
    monkeypatch.setattr(endpoint_mod, "REQUEST_DEADLINE", 2.0)
    monkeypatch.setattr(endpoint_mod, "MAX_CONNECTIONS", 4)
    e = HookEndpoint("127.0.0.1:0", str(tmp_path / "goals"))
    yield e
    e.close()


def _post(ep, agent="a1", timeout=10.0) -> int:
    c = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=timeout)
    body = json.dumps({"hook_event_name": "Stop", "session_id": "s1", "cwd": "/w"}).encode()
    c.request("POST", "/hook", body=body, headers={"Content-Type": "application/json", "X-Fleetwatch-Agent": agent})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def _raw(ep, data: bytes, timeout=10.0) -> bytes:
    s = socket.create_connection(("127.0.0.1", ep.port), timeout=timeout)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    finally:
        s.close()


def test_a_body_far_over_the_cap_is_refused_without_being_queued(ep):
    s = socket.create_connection(("127.0.0.1", ep.port), timeout=10)
    n = 50 * 1024 * 1024
    s.sendall(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
    try:
        s.sendall(b"{" * (1024 * 1024))   # the server refuses before reading; sending may break
    except OSError:
        pass
    assert s.recv(4096).startswith(b"HTTP/1.1 413")
    s.close()
    assert ep.counts["received"] == 0


def test_a_content_length_that_lies_is_refused_and_nothing_is_queued(ep):
    short = _raw(ep, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\": 1}")
    assert short.startswith(b"HTTP/1.1 400")
    for cl in (b"-1", b"abc", b"1e3", b""):
        got = _raw(ep, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: " + cl + b"\r\n\r\n{}")
        assert got.split(b" ")[1] in (b"411", b"413"), got
    assert ep.counts["received"] == 0


def test_peers_that_trickle_bytes_lose_their_slot_and_never_stall_other_deliveries(ep, tmp_path):
    slow = []
    for _ in range(endpoint_mod.MAX_CONNECTIONS):     # every slot taken by a one-byte-at-a-time peer
        s = socket.create_connection(("127.0.0.1", ep.port), timeout=10)
        s.sendall(b"P")
        slow.append(s)
    t0 = time.monotonic()
    closed = set()
    msg = b"OST /hook HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"y" * 100
    i = 0
    while len(closed) < len(slow) and time.monotonic() - t0 < 60:
        for k, s in enumerate(slow):
            if k in closed:
                continue
            try:
                s.sendall(msg[i % len(msg):i % len(msg) + 1])
            except OSError:
                closed.add(k)
        i += 1
        time.sleep(0.25)
    assert len(closed) == len(slow), closed   # cut at REQUEST_DEADLINE (2 s here), not kept while they trickle
    for s in slow:
        s.close()
    assert _post(ep) == 200
    assert ep.drain() and (tmp_path / "goals" / "a1" / "goal.json").exists()


def test_a_delivery_goes_through_while_one_peer_trickles(ep, tmp_path, monkeypatch):
    """The trickling peer may hold its request for 120 s here; the delivery is answered within its
    own 60 s socket timeout, so it never waited for that peer."""
    monkeypatch.setattr(endpoint_mod, "REQUEST_DEADLINE", 120.0)
    monkeypatch.setattr(endpoint_mod, "IO_TIMEOUT", 120.0)
    monkeypatch.setattr(endpoint_mod._Handler, "timeout", 120.0)
    s = socket.create_connection(("127.0.0.1", ep.port), timeout=10)
    s.sendall(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
    assert _post(ep, "a2", timeout=60) == 200
    s.close()
    assert ep.drain() and (tmp_path / "goals" / "a2" / "goal.json").exists()


@pytest.mark.parametrize("header", [b"a\x1b[31mred", b"a\r\n b", b"../x", b"/abs", b"x" * 10_000])
def test_an_agent_header_with_an_escape_or_a_newline_writes_nothing(ep, tmp_path, header):
    body = json.dumps({"hook_event_name": "Stop", "session_id": "s9", "cwd": "/nonexistent"}).encode()
    got = _raw(ep, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nX-Fleetwatch-Agent: %s\r\n"
               b"Connection: close\r\n\r\n%s" % (len(body), header, body))
    assert got.split(b" ")[1] in (b"200", b"400", b"431"), got[:80]
    assert ep.drain()
    goals = tmp_path / "goals"
    assert not goals.exists() or list(goals.iterdir()) == []
    assert not (tmp_path / "x").exists() and not Path("/abs").exists()
