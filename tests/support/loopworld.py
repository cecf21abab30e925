"""A closed-loop world for tests: a config with a private tmux socket (``tmux -L``), a goals
folder, the real ``fleetwatch`` CLI and watcher as subprocesses, stand-in agents as shell scripts.

``World(tmp_path, dod=..., launch=..., notify_url=...)``; ``fw(*args)`` runs the CLI (exit code,
stdout, stderr); ``start()`` / ``kill9()`` / ``stop()`` the watcher; ``events(type)`` reads the log;
``windows()`` the socket's window names; ``screen(agent)`` the pane's text; ``close()`` stops the
watcher and kills the tmux server."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
FW = str(BIN / "fleetwatch")


def toml_value(v: Any) -> str:
    return json.dumps(v)


class World:
    def __init__(self, tmp: Path, *, dod: dict | None = None, launch: dict | None = None,
                 notify_url: str | None = None, argv: list[str] | None = None) -> None:
        self.tmp = tmp
        self.socket = f"fwl{os.getpid()}x{os.urandom(3).hex()}"
        self.goals, self.work, self.db = tmp / "agents", tmp / "work", tmp / "events.db"
        for d in (self.goals, self.work, tmp / "state"):
            d.mkdir(parents=True, exist_ok=True)
        self.cfg = tmp / "config.toml"
        lines = [f'[store]\npath = "{self.db}"\ndurability = "normal"', '[watch]\ninterval = "200ms"',
                 "[launch]", f'socket = "{self.socket}"', 'session = "fleet"', f'goals_dir = "{self.goals}"']
        lines += [f"argv = {toml_value(argv)}"] if argv else []
        lines += [f"{k} = {toml_value(v)}" for k, v in (launch or {}).items()]
        lines += ["[dod]"] + [f"{k} = {toml_value(v)}" for k, v in (dod or {}).items()]
        if notify_url:
            lines += ["[notify]", f'urls = ["{notify_url}"]', 'group_wait = "200ms"', 'min_severity = "warning"']
        lines += ["[[sources]]", 'name = "fleet"', 'kind = "goals"', f'glob = "{self.goals}/*/goal.json"',
                  "[[sources]]", 'name = "panes"', 'kind = "tmux"', f'socket = "{self.socket}"']
        self.cfg.write_text("\n".join(lines) + "\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "TMUX"))}
        self.env.update(FLEETWATCH_CONFIG=str(self.cfg), XDG_STATE_HOME=str(tmp / "state"),
                        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
        self.proc: subprocess.Popen | None = None

    def script(self, name: str, body: str) -> str:
        p = self.tmp / name
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(0o755)
        return str(p)

    def fw(self, *args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([FW, *args], capture_output=True, text=True, timeout=timeout,
                              env={**self.env, **(env or {})})

    def start(self) -> subprocess.Popen:
        self.proc = subprocess.Popen([FW, "run"], stdout=subprocess.DEVNULL,
                                     stderr=open(self.tmp / "run.log", "ab"), env=self.env)
        return self.proc

    def kill9(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
            self.proc = None

    def events(self, *types: str) -> list[Any]:
        from events.log import EventLog

        if not self.db.exists():
            return []
        log = EventLog(str(self.db), create=False, readonly=True)
        try:
            return list(log.read(types=list(types) or None))
        finally:
            log.close()

    def data(self, *types: str) -> list[dict]:
        out = []
        for r in self.events(*types):
            j = r.to_json()
            out.append((json.loads(j) if isinstance(j, (str, bytes)) else j)["data"])
        return out

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20,
                              env=self.env)

    def windows(self) -> list[str]:
        r = self.tmux("list-windows", "-a", "-F", "#{window_name}")
        return r.stdout.split() if r.returncode == 0 else []

    def screen(self, agent: str) -> str:
        r = self.tmux("capture-pane", "-p", "-J", "-t", f"=fleet:{agent}")
        return r.stdout if r.returncode == 0 else ""

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.tmux("kill-server")
