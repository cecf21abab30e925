"""The watcher's hook endpoint (watcher/hook/endpoint.py) over real HTTP on loopback, real goal.json
files: deliveries of one agent are applied in the order received, none lost, concurrent ones too;
the time never goes back; only this user's processes are served; bad requests are refused."""
from __future__ import annotations

import http.client
import json
import os
import threading

import pytest

from watcher.hook.endpoint import HookEndpoint
from watcher.hook.mapping import iso_utc
from tests.support.exe import FLEETWATCH


@pytest.fixture
def ep(tmp_path):
    e = HookEndpoint("127.0.0.1:0", str(tmp_path))
    yield e
    e.close()


def post(ep, payload, agent="a1", headers=None, path="/hook", body=None):
    c = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
    data = body if body is not None else json.dumps(payload).encode()
    h = {"Content-Type": "application/json", **({"X-Fleetwatch-Agent": agent} if agent else {}), **(headers or {})}
    c.request("POST", path, body=data, headers=h)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def ev(name, **kw):
    return {"hook_event_name": name, "session_id": "s1", "cwd": "/w", **kw}


def doc(tmp_path, agent="a1"):
    return json.loads((tmp_path / agent / "goal.json").read_text())


def test_one_agents_deliveries_apply_in_order(ep, tmp_path):
    for i in range(20):
        assert post(ep, ev("PreToolUse", tool_name="Read", tool_use_id=f"t{i}")) == 200
        assert post(ep, ev("PostToolUse", tool_name="Read", tool_use_id=f"t{i}")) == 200
    assert post(ep, ev("Stop")) == 200
    assert ep.drain()
    d = doc(tmp_path)
    assert (d["state"], d["hook_event"], d.get("tools_open")) == ("idle", "Stop", None)
    assert ep.counts["applied"] == 41 and ep.counts["errors"] == 0


def test_concurrent_deliveries_lose_nothing(ep, tmp_path):
    """8 clients at once, each opening and closing its own tool calls of one agent: every call that
    was opened is closed, none left open (a lost or reordered update would leave one)."""
    def client(k):
        for i in range(15):
            post(ep, ev("PreToolUse", tool_name="Bash", tool_use_id=f"c{k}-{i}"))
            post(ep, ev("PostToolUse", tool_name="Bash", tool_use_id=f"c{k}-{i}"))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ep.drain()
    d = doc(tmp_path)
    assert d["state"] == "busy" and "tools_open" not in d
    assert ep.counts["applied"] == 8 * 15 * 2


def test_the_time_given_to_the_mapping_never_goes_back(ep, tmp_path):
    """A clock stepped back between two deliveries: the second is applied at the first's time."""
    ep.submit(json.dumps(ev("UserPromptSubmit")).encode(), {"FLEETWATCH_AGENT": "a1"}, 1_800_000_000.0)
    ep.submit(json.dumps(ev("PreToolUse", tool_name="Read", tool_use_id="t")).encode(),
              {"FLEETWATCH_AGENT": "a1"}, 1_799_990_000.0)
    assert ep.drain()
    d = doc(tmp_path)
    assert d["hook_event"] == "PreToolUse" and d["last_activity"] == iso_utc(1_800_000_000.0)


def test_agents_without_a_header_are_found_as_the_hook_finds_them(ep, tmp_path):
    """No X-Fleetwatch-Agent: the payload's session id names the agent (goal.json records it)."""
    (tmp_path / "a2").mkdir()
    (tmp_path / "a2" / "goal.json").write_text(json.dumps({"agent": "a2", "state": "idle", "session_id": "s9"}))
    assert post(ep, {**ev("UserPromptSubmit"), "session_id": "s9"}, agent=None) == 200
    assert ep.drain()
    assert doc(tmp_path, "a2")["state"] == "busy"


def test_another_users_request_is_refused(tmp_path):
    """The peer's uid comes from /proc/net/tcp: an endpoint that serves uid+1 only refuses us."""
    e = HookEndpoint("127.0.0.1:0", str(tmp_path), uid=os.getuid() + 1)
    try:
        assert post(e, ev("Stop")) == 403
        assert e.drain() and not (tmp_path / "a1").exists() and e.counts["refused"] == 1
    finally:
        e.close()


def test_bad_requests_are_refused(ep, tmp_path):
    c = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
    c.request("GET", "/hook")
    assert c.getresponse().status == 405
    c.close()
    assert post(ep, ev("Stop"), path="/other") == 404
    c = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
    c.putrequest("POST", "/hook")
    c.putheader("Content-Length", str(5 * 1024 * 1024))
    c.endheaders()
    assert c.getresponse().status == 413
    c.close()
    assert post(ep, None, body=b"not json") == 200   # queued; the hook refuses it (counted, nothing written)
    assert ep.drain() and ep.counts["errors"] == 1 and not (tmp_path / "a1").exists()


def test_keep_alive_serves_many_deliveries_on_one_connection(ep, tmp_path):
    c = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
    for name in ("UserPromptSubmit", "Stop"):
        c.request("POST", "/hook", body=json.dumps(ev(name)), headers={"X-Fleetwatch-Agent": "a1"})
        r = c.getresponse()
        assert r.status == 200 and r.read() == b""
    c.close()
    assert ep.drain() and doc(tmp_path)["state"] == "idle"


class _Port:
    """What ``post`` needs of an endpoint: its port."""

    def __init__(self, port: int):
        self.port = port


def _run_setup(tmp_path):
    """(port, goals dir, config, fleetwatch, env) of a `fleetwatch run` serving [hook] on a free port."""

    from tests.support.fleet import free_port

    port = free_port()
    goals = tmp_path / "agents"
    goals.mkdir()
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[hook]\nlisten = "127.0.0.1:{port}"\ngoals_dir = "{goals}"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n')
    exe = FLEETWATCH
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "CLAUDE", "LISTEN_"))}
    return port, goals, cfg, exe, env


def test_fleetwatch_run_serves_the_endpoint_and_serves_it_again_after_a_reload(tmp_path):
    """`fleetwatch run` with [hook]: a POST updates goal.json; after SIGHUP (config read again) the
    endpoint serves on; after SIGTERM nothing listens."""
    import signal
    import subprocess

    from tests.support.waiting import wait_for

    port, goals, cfg, exe, env = _run_setup(tmp_path)
    p = subprocess.Popen([exe, "run", "--config", str(cfg)], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    at = _Port(port)

    def posted(name):
        try:
            return post(at, ev(name)) == 200
        except OSError:
            return False

    try:
        wait_for(lambda: posted("UserPromptSubmit"), timeout=60)
        wait_for(lambda: (goals / "a1" / "goal.json").exists() and doc(goals)["state"] == "busy", timeout=30)
        p.send_signal(signal.SIGHUP)
        wait_for(lambda: posted("Stop") and doc(goals)["state"] == "idle", timeout=60)
    finally:
        p.terminate()
        p.wait(30)
    with pytest.raises(OSError):
        post(at, ev("UserPromptSubmit"))
    assert p.returncode == 0, p.stderr.read().decode()[-2000:]


def test_a_socket_systemd_passes_is_served_and_a_hook_before_the_start_waits_instead_of_failing(tmp_path):
    """Socket activation (`systemd-socket-activate`, as a `fleetwatch.socket` unit does): the port
    listens before `fleetwatch run` does; a hook's POST sent then starts the watcher and is
    answered once it serves (queued by the kernel, never refused), and goal.json is updated."""
    import shutil
    import signal
    import subprocess

    from tests.support.waiting import wait_for

    tool = shutil.which("systemd-socket-activate")
    if tool is None:
        pytest.skip("systemd-socket-activate is not installed")
    port, goals, cfg, exe, env = _run_setup(tmp_path)
    p = subprocess.Popen([tool, "-l", f"127.0.0.1:{port}", "--fdname=hook", exe, "run", "--config", str(cfg)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    at = _Port(port)
    try:
        wait_for(lambda: subprocess.run(["ss", "-ltn", f"sport = :{port}"], capture_output=True,
                                        text=True).stdout.count("LISTEN") >= 1, timeout=30)
        assert post(at, ev("UserPromptSubmit")) == 200     # the watcher starts on it; the POST waits
        wait_for(lambda: (goals / "a1" / "goal.json").exists() and doc(goals)["state"] == "busy", timeout=60)
        p.send_signal(signal.SIGHUP)                       # a reload keeps systemd's socket
        wait_for(lambda: post(at, ev("Stop")) == 200 and doc(goals)["state"] == "idle", timeout=60)
    finally:
        p.terminate()
        p.wait(30)
