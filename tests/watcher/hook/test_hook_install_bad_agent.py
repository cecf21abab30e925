"""``fleetwatch hook install --agent ID`` baked any ID into the command, also one the hook itself
refuses (a newline, a '/', '..', an empty one): Claude Code then ran a hook that ignored every
event of the agent ("invalid agent id" on a stderr nobody reads). The install refuses such an
ID (or an empty --goals-dir) as a usage error, before touching settings.json."""
from __future__ import annotations

import subprocess

import pytest
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


@pytest.mark.parametrize("args, shown", [(["--agent", "a\nb"], "'a\\nb' is no agent id"),
                                         (["--agent", "x/y"], "'x/y' is no agent id"),
                                         (["--agent", ".."], "'..' is no agent id"),
                                         (["--agent", ""], "an empty value"),
                                         (["--goals-dir", ""], "an empty value")])
def test_hook_install_refuses_an_agent_id_the_hook_would_refuse(tmp_path, args, shown):
    settings = tmp_path / "settings.json"
    settings.write_text('{"model": "x"}\n')
    r = subprocess.run([FW, "hook", "install", "--settings", str(settings), "--events", "core", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and shown in r.stderr and "\x1b" not in r.stderr, r.stderr
    assert settings.read_text() == '{"model": "x"}\n' and not list(tmp_path.glob("settings.json.*"))


def test_hook_install_bakes_a_relative_goals_dir_in_as_an_absolute_path(tmp_path):
    """--goals-dir fleet/agents was baked in as written: Claude Code runs the hook in each
    session's own cwd, so every project got its own ./fleet/agents and the watcher, watching the
    one the user meant, never saw an agent. A relative dir is made absolute at install time
    (~ and $VARS stay: the hook expands them itself)."""
    import json

    settings = tmp_path / "settings.json"
    for given, baked in (("fleet/agents", f"--goals-dir {tmp_path}/fleet/agents"), ("~/fleet", "--goals-dir '~/fleet'")):
        r = subprocess.run([FW, "hook", "install", "--settings", str(settings), "--events", "core", "--force",
                            "--goals-dir", given], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        cmd = json.loads(settings.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
        assert cmd.endswith(f"fleetwatch hook {baked}"), cmd
