"""`doctor`'s hints say what to do (issue 45): a missing agents folder is "create it: mkdir -p",
not "fix key"; no tmux server is said, not "readable, 0 windows"; a configured surface whose
extra is missing is a ✗; [forward]/[hub] NATS reachability and stream (a real nats-server)."""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys

import pytest

from tests.support import natsserver
from tests.support.fwcli import ENV, FW, fw

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def _config(tmp_path, body: str):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n' + body)
    return cfg


def test_a_missing_agents_folder_is_a_mkdir_hint(tmp_path):
    cfg = _config(tmp_path, f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/agents/*/goal.json"\n')
    r = fw("doctor", "--config", str(cfg))
    assert r.returncode == 1
    assert f"hint: create it: mkdir -p {tmp_path}/agents" in r.stdout
    assert "fix key" not in r.stdout
    (tmp_path / "agents").mkdir()
    r = fw("doctor", "--config", str(cfg))
    assert "mkdir" not in r.stdout and "source fleet (goals): readable, 0 agents found" in r.stdout


@needs_tmux
def test_no_tmux_server_is_said_and_a_started_one_counts_windows(tmp_path):
    env = {"TMUX_TMPDIR": str(tmp_path / "tmuxdir")}
    (tmp_path / "tmuxdir").mkdir()
    cfg = _config(tmp_path, '[[sources]]\nname = "tmux"\nkind = "tmux"\nsocket = "fleet"\n')
    r = fw("doctor", "--config", str(cfg), env=env)
    assert "source tmux (tmux): no tmux server runs on socket fleet" in r.stdout
    assert "tmux -L fleet new-session -d" in r.stdout and "0 windows" not in r.stdout
    tenv = {**ENV, **env}
    subprocess.run(["tmux", "-L", "fleet", "new-session", "-d", "-s", "fleet", "sleep 120"], env=tenv, check=True)
    try:
        r = fw("doctor", "--config", str(cfg), env=env)
        assert "✓ source tmux (tmux): 1 windows" in r.stdout, r.stdout
    finally:
        subprocess.run(["tmux", "-L", "fleet", "kill-server"], env=tenv, capture_output=True)


def test_web_configured_without_its_extra_is_a_failure(tmp_path):
    """The extra is hidden the way Python hides a module (``sys.modules[name] = None``)."""
    cfg = _config(tmp_path, '[web]\nlisten = "127.0.0.1:0"\n')
    code = ("import sys; sys.modules['werkzeug'] = None; sys.modules['textual'] = None\n"
            "from watcher.entry import main; sys.argv = ['fleetwatch', 'doctor', '--config', sys.argv[1]]; main()")
    r = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 1, r.stdout
    assert "✗ [web] is configured but the 'web' extra is missing (werkzeug)" in r.stdout
    assert "pip install 'fleetwatch[web]'" in r.stdout
    assert "! board: Textual is not installed" in r.stdout
    r = fw("doctor", "--config", str(cfg))              # with the extras: no such line
    assert "extra is missing" not in r.stdout and "Textual is not installed" not in r.stdout


@pytest.mark.skipif(natsserver.binary() is None, reason=natsserver.MISSING)
@pytest.mark.slow
def test_a_server_that_accepts_and_never_speaks_nats_is_not_said_to_refuse(tmp_path):
    """A port that takes the connection and then says nothing (another service, a hung server):
    the answer names that case too, not "refused"."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        port = silent.getsockname()[1]
        cfg = _config(tmp_path, f'[forward]\nnats = "nats://127.0.0.1:{port}"\nhost = "vm1"\n')
        r = fw("doctor", "--config", str(cfg))
        assert r.returncode == 1
        assert "✗ forward: cannot reach NATS at" in r.stdout and "not speaking NATS" in r.stdout, r.stdout
    finally:
        silent.close()


def test_forward_and_hub_nats_reachability_and_stream(tmp_path):
    port = natsserver.free_port()
    cfg = _config(tmp_path, f'[forward]\nnats = "nats://127.0.0.1:{port}"\nhost = "vm1"\n'
                            f'[hub]\nnats = "nats://127.0.0.1:{port}"\n')
    r = fw("doctor", "--config", str(cfg))
    assert r.returncode == 1
    assert f"✗ forward: cannot reach NATS at nats://127.0.0.1:{port}" in r.stdout
    assert f"✗ hub: cannot reach NATS at nats://127.0.0.1:{port}" in r.stdout
    assert r.stdout.count("(no server answered: refused, unreachable or not speaking NATS)") == 2, r.stdout   # refused: said at once, no 5 s wait
    assert "nats-server -js" in r.stdout
    srv = natsserver.NatsServer(tmp_path / "nats", port=port).start()
    try:
        r = fw("doctor", "--config", str(cfg))
        assert "! forward: NATS" in r.stdout and "stream FLEETWATCH does not exist yet" in r.stdout, r.stdout
        run = subprocess.run([*FW, "run", "--once", "--config", str(cfg)], env=ENV, capture_output=True,
                             text=True, timeout=120)             # [forward] creates the stream
        assert run.returncode == 0, run.stderr
        r = fw("doctor", "--config", str(cfg))
        assert "✓ forward: NATS" in r.stdout and "stream FLEETWATCH:" in r.stdout, r.stdout
        assert re.search(r"this host forwarded up to seq (\d+) of \1\b", r.stdout), r.stdout   # all of it
        assert "✓ hub: NATS" in r.stdout
    finally:
        srv.stop()
