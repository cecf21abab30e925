"""A config that cannot be read is one clear line with a hint, not "[Errno None] ...".

Found by a hostile CLI pass: `fleetwatch run --config f.toml` with f.toml a FIFO (or a symlink to
/dev/zero) printed "cannot read config: [Errno None] a FIFO, not a regular file: 'f.toml'" and
no hint (the OSError's repr, not its text).
"""
from __future__ import annotations

import os
import subprocess

import pytest
from tests.support.exe import FLEETWATCH



@pytest.mark.parametrize("kind", ["fifo", "device", "not-utf8"])
def test_unreadable_config_is_one_clear_line_with_a_hint(tmp_path, kind):
    cfg = tmp_path / "c.toml"
    if kind == "fifo":
        os.mkfifo(cfg)
    elif kind == "device":
        os.symlink("/dev/zero", cfg)
    else:
        cfg.write_bytes(b"\xff\xfe[watch]\n")
    for cmd in (["run", "--once"], ["status"]):
        p = subprocess.run([FLEETWATCH, *cmd, "--config", str(cfg), "--db", str(tmp_path / "e.db")],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, p.stderr
        first, hint = p.stderr.splitlines()[:2]
        assert first.startswith("fleetwatch: cannot read config: ") and "Errno" not in first, first
        assert hint.strip().startswith("hint: ") and "Traceback" not in p.stderr
    if kind != "not-utf8":
        assert "not a regular file" in first
