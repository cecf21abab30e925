"""The README's quickstart, copied line by line on a fresh machine (a new HOME, no tmux server):
its shell block (`fleetwatch launch`, issue 44) makes the goal.json atomically and starts the tmux
server before its window (issue 45: `tmux -L fleet new-window` failed with no server; `echo >` was
not atomic). `claude`
is a stand-in on PATH (the real client is not what this checks); tmux, the CLI and the log are real."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest


from tests.support.fwcli import ENV, ROOT, fw
from tests.support.exe import FLEETWATCH

FW_BIN = FLEETWATCH

QUICK = Path(ROOT) / "docs" / "readme" / "02-quickstart.md"


def blocks(lang: str) -> list[str]:
    return [re.sub(r"^   ", "", b, flags=re.M) for b in re.findall(rf"```{lang}\n(.*?)```", QUICK.read_text(), re.S)]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_the_quickstart_shell_block_runs_as_written(tmp_path):
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "claude").write_text("#!/bin/sh\nexec sleep 300\n")
    (home / "bin" / "claude").chmod(0o755)
    (tmp_path / "tmux").mkdir()
    env = {**ENV, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".state"),
           "TMUX_TMPDIR": str(tmp_path / "tmux"), "PATH": f"{home / 'bin'}:{os.environ['PATH']}"}
    env.pop("TMUX", None)
    [toml] = blocks("toml")
    [sh] = [b for b in blocks("sh") if "fleetwatch launch" in b]
    cfgdir = home / ".config" / "fleetwatch"
    cfgdir.mkdir(parents=True)
    (cfgdir / "config.toml").write_text(re.sub(r"(?m)^urls = .*$", "", toml))   # no push to the internet
    try:
        env["PATH"] = f"{os.path.dirname(FW_BIN)}:{env['PATH']}"   # the installed fleetwatch, as a user has it
        r = subprocess.run(["bash", "-euc", sh], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        for agent in ("a8",):  # the next agent the same way: the server and the session exist now
            r = subprocess.run(["bash", "-euc", sh.replace("a7", agent)], env=env, capture_output=True, text=True,
                               timeout=60, cwd=tmp_path)
            assert r.returncode == 0, r.stderr
        goal = home / ".fleet" / "agents" / "a7" / "goal.json"
        assert json.loads(goal.read_text())["cwd"] == str(tmp_path)
        assert not list(goal.parent.glob("*.tmp"))
        wins = subprocess.run(["tmux", "-L", "fleet", "list-windows", "-t", "fleet", "-F", "#W #{pane_current_command}"],
                              env=env, capture_output=True, text=True).stdout.split("\n")
        assert "a7 sleep" in wins or "a7 claude" in wins, wins
        fwenv = {k: env[k] for k in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "TMUX_TMPDIR")}
        d = fw("doctor", env=fwenv)
        assert "✓ source fleet (goals): 2 agents" in d.stdout and "✓ source tmux (tmux):" in d.stdout, d.stdout
        assert fw("run", "--once", env=fwenv).returncode == 0
        st = json.loads(fw("status", "--json", env=fwenv).stdout)
        [a7] = [a for a in st["agents"] if a["agent"] == "a7"]
        assert a7["class"] == "TRABAJANDO" and a7["task"] == "fix login redirect", json.dumps(a7)
        assert a7["target"] in ("=fleet:0", "=fleet:0.0"), json.dumps(a7)   # the window launch opened
        r = fw("launch", "a7", "--task", "again", "--contract", "x", env=fwenv)
        assert r.returncode == 2, r.stderr                  # a7 is live: not launched twice
    finally:
        subprocess.run(["tmux", "-L", "fleet", "kill-server"], env=env, capture_output=True)
