"""A private tmux server for tests (``tmux -L NAME``), and the pane record a hook writes into goal.json."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


class Server:
    """``Server(prefix)`` starts a server with session ``fleet``; ``close()`` kills it."""

    def __init__(self, prefix: str = "fw", session: str = "fleet", first: str = "w0", cmd: str = "sleep 600"):
        self.name = f"{prefix}-{os.getpid()}-{os.urandom(3).hex()}"
        self.run("-f", "/dev/null", "new-session", "-d", "-s", session, "-n", first, "-x", "120", "-y", "40", cmd)

    def run(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True, timeout=20,
                           env={**os.environ, "TMUX": ""})
        if check:
            assert r.returncode == 0, r.stderr
        return r.stdout

    def window(self, name: str, cmd: str = "sleep 600", session: str = "fleet") -> str:
        """A new window in ``session``; its pane id (``%N``)."""
        return self.run("new-window", "-d", "-P", "-F", "#{pane_id}", "-t", f"={session}:", "-n", name, cmd).strip()

    def fmt(self, target: str, fmt: str) -> str:
        return self.run("display-message", "-p", "-t", target, fmt).strip()

    def socket_path(self) -> str:
        return self.fmt(self.run("list-panes", "-a", "-F", "#{pane_id}").split()[0], "#{socket_path}")

    def record(self, pane: str, pid: int | None = None) -> dict:
        """What the hook writes into goal.json for a Claude Code running in ``pane``: ``$TMUX``'s
        socket path and ``$TMUX_PANE`` (and the claude pid when known)."""
        rec = {"socket": self.socket_path(), "pane": pane}
        if pid is not None:
            rec["pid"] = pid
        return rec

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, timeout=20)


def goal(root: Path, agent: str, **fields) -> Path:
    """``root/agent/goal.json`` with a contract, state busy, and ``fields``."""
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    p = d / "goal.json"
    p.write_text(json.dumps({"agent": agent, "state": "busy", "dod_contract": "tests pass", **fields}))
    return p


def tmux(sock: str, *args: str) -> str:
    """``tmux -L sock args...`` outside any tmux session; its output (AssertionError when it fails)."""
    r = subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=10,
                       env={**os.environ, "TMUX": ""})
    assert r.returncode == 0, r.stderr
    return r.stdout
