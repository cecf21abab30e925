"""`doctor` and `install-service` read the installed unit without blocking and within a bound: a
FIFO or a symlink to /dev/zero at ~/.config/systemd/user/fleetwatch.service is one ✗ line (doctor)
or one refusal (install-service), never a hang. Real subprocesses, real files.

(A plain read would wait for a FIFO's writer for ever, and read /dev/zero until memory ran
out.)
"""
from __future__ import annotations

import os

import pytest

from tests.support.fwcli import fw


@pytest.mark.parametrize("make", [os.mkfifo, lambda p: os.symlink("/dev/zero", p)], ids=["fifo", "dev-zero"])
def test_a_unit_file_that_is_not_regular_is_reported_not_read(tmp_path, make):
    units = tmp_path / "xdg" / "systemd" / "user"
    units.mkdir(parents=True)
    make(str(units / "fleetwatch.service"))
    cfg = tmp_path / "config.toml"
    cfg.write_text("")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    d = fw("doctor", "--config", str(cfg), "--db", str(tmp_path / "events.db"), env=env, timeout=30)
    assert d.returncode == 1 and "✗ service:" in d.stdout and "not a regular file" in d.stdout, d.stdout
    i = fw("install-service", "--dry-run", env=env, timeout=30)
    assert i.returncode == 1 and "cannot read the installed unit" in i.stderr and "Traceback" not in i.stderr, i.stderr
    assert os.path.lexists(units / "fleetwatch.service") and sorted(os.listdir(units)) == ["fleetwatch.service"]
