"""A command whose output cannot be written (`fleetwatch export > FILE` on a full disk; /dev/full
stands in for one) says so in one line, exit 1, never a Python traceback. Real subprocesses.

Whichever print meets the full disk (verify, export, tail, doctor, schema, silences ...), the
user sees that line, not OSError: [Errno 28] as a traceback.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import ENV, FW

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")


def test_every_output_that_meets_a_full_disk_is_one_message(tmp_path):
    db = str(tmp_path / "events.db")
    with EventLog(db) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e" * 100, source="cli")
                    for i in range(3000)], time.time())
    for cmd in (("verify",), ("export",), ("tail", "-n", "50"), ("silences",), ("rebuild", "--check"),
                ("schema", "goal"), ("doctor", "--config", str(tmp_path / "none.toml"))):
        with open("/dev/full", "w") as full:
            r = subprocess.run([*FW, *cmd, "--db", db] if cmd[0] != "schema" else [*FW, *cmd], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=60, env=ENV)
        assert r.returncode == 1, (cmd, r.stderr)
        assert "Traceback" not in r.stderr and "writing failed: No space left on device;" in r.stderr, (cmd, r.stderr)
