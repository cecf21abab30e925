"""A command whose exit status is its finding keeps it when the reader closes the pipe early
(`fleetwatch verify | head -1`, `fleetwatch doctor | grep -q ✗`). Real subprocesses, real logs.

The BrokenPipeError of the first print after the reader left is not exit 0: `verify` of a
broken log and `doctor` with a broken config do not say "fine" to the script.
"""
from __future__ import annotations

import os
import subprocess
import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import ENV, FW


def closed_pipe_run(*args: str) -> subprocess.CompletedProcess:
    """Run with stdout a pipe whose read end is already closed: every write meets EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([*FW, *args], stdout=w, stderr=subprocess.PIPE, text=True, timeout=60, env=ENV)
    finally:
        os.close(w)


def broken_log(path: str) -> None:
    with EventLog(path) as log:
        log.append([DodVerdict(agent="a1", verdict="met", verifier="me", evidence="e", source="cli")], time.time())
    with open(path + ".head", "r+b") as f:  # a garbled head anchor: verify's finding, exit 1
        f.write(b"garbage")


def test_verify_of_a_broken_log_exits_1_when_the_reader_closed_the_pipe(tmp_path):
    db = str(tmp_path / "events.db")
    broken_log(db)
    for extra in ((), ("--json",), ("--expect-head", "1:" + "1" * 64)):
        r = closed_pipe_run("verify", *extra, "--db", db)
        assert r.returncode == 1 and "verify failed" in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)


def test_doctor_with_a_broken_config_exits_1_when_the_reader_closed_the_pipe(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[store\n")
    r = closed_pipe_run("doctor", "--config", str(cfg), "--db", str(tmp_path / "events.db"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
