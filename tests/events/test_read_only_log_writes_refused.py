"""The commands that write to a log they may not write (a read-only copy, folder or file system)
refuse in one message, exit 2, not a traceback. Real logs, a real read-only file system (root) or
modes (not root).

`rebuild` and `verify --restore-guards` say so (nothing rebuilt, nothing written), never an
apsw.ReadOnlyError traceback; `rebuild --check` and `verify` (which write nothing) work.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


@pytest.fixture
def read_only_log(tmp_path):
    """A log in a folder this user cannot write: a read-only tmpfs as root, modes otherwise."""
    src = str(tmp_path / "src.db")
    with EventLog(src) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                    for i in range(5)], time.time())
        log.checkpoint("TRUNCATE")
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:
        shutil.copy(src, ro / "events.db")
        os.chmod(ro / "events.db", 0o444)
        os.chmod(ro, 0o555)
        yield str(ro / "events.db")
        os.chmod(ro, 0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("root without mount(8): no read-only file system to test on")
    try:
        shutil.copy(src, ro / "events.db")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True, capture_output=True)
        yield str(ro / "events.db")
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_rebuild_of_a_read_only_log_is_refused_without_a_traceback(read_only_log):
    r = fw("rebuild", "--db", read_only_log)
    assert r.returncode == 2 and "read-only" in r.stderr and "nothing rebuilt" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "rebuild --check" in r.stderr
    c = fw("rebuild", "--check", "--db", read_only_log)
    assert c.returncode == 0 and "5 event(s)" in c.stdout, c.stderr


def test_verify_restore_guards_on_a_read_only_log_is_refused_without_a_traceback(read_only_log):
    r = fw("verify", "--restore-guards", "--db", read_only_log)
    assert r.returncode == 2 and "guards cannot be restored" in r.stderr and "nothing written" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert fw("verify", "--db", read_only_log).returncode == 0


def test_doctor_does_not_call_a_read_only_log_writable(read_only_log, tmp_path):
    """doctor on a read-only log says it is not writable here (✗, exit 1), so `run` is not
    trusted to append to it."""
    cfg = tmp_path / "config.toml"
    cfg.write_text("")
    r = fw("doctor", "--config", str(cfg), "--db", read_only_log)
    assert r.returncode == 1 and "✗ log:" in r.stdout and "is not writable here" in r.stdout, r.stdout
    assert "writable, verify intact" not in r.stdout
