"""A refused second `fleetwatch run` (exit 3: another watcher holds the log) makes the service
unit fail, and its OnFailure= unit runs `notify-stopped`: that pushed "nothing is watching the
fleet" while the first watcher watched on (issue 45). Real CLI processes, a real local receiver."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.fwcli import ENV, FW, fw
from tests.support.receiver import Sink
from tests.support.waiting import wait_for


@pytest.mark.slow
def test_a_refused_second_run_pushes_nothing_and_a_real_stop_still_does(tmp_path):
    goals = tmp_path / "goals"
    goals.mkdir()
    sink = Sink()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\ndurability = "normal"\n'
                   f'[notify]\nurls = ["{sink.url()}"]\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n')
    first = subprocess.Popen([*FW, "run", "--config", str(cfg)], env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        wait_for(lambda: json.loads(fw("status", "--json", "--config", str(cfg)).stdout or "{}")
                 .get("watcher", {}).get("running"), timeout=60)
        second = fw("run", "--config", str(cfg))
        assert second.returncode == 3, second.stderr
        env = {"MONITOR_SERVICE_RESULT": "exit-code", "MONITOR_EXIT_CODE": "exited", "MONITOR_EXIT_STATUS": "3"}
        r = fw("notify-stopped", "--config", str(cfg), env=env)
        assert r.returncode == 0, r.stderr
        assert "not pushed" in r.stdout and f"pid {first.pid}" in r.stdout and "the fleet is watched" in r.stdout
        assert sink.bodies == []
    finally:
        first.terminate()
        first.wait(30)
    try:  # nobody holds the log now: a failed unit is news, pushed
        r = fw("notify-stopped", "--config", str(cfg), env={"MONITOR_SERVICE_RESULT": "exit-code"})
        assert r.returncode == 0, r.stderr
        bodies = wait_for(lambda: sink.bodies, timeout=30)
        assert bodies[0]["title"] == "fleetwatch stopped: exit-code"
        assert "nothing is watching the fleet" in bodies[0]["message"]
    finally:
        sink.close()
    assert not os.path.exists(tmp_path / "e.db.lock")
