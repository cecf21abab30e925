"""Command-line arguments whose bytes are not UTF-8 (Python hands them over as lone surrogates):
an agent id, verifier, subject or type typed or pasted so, and a log or backup path holding such a
byte. Real `fleetwatch` processes given the raw bytes, a real log."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from events.log import EventLog
from events.types import AgentClassified
from tests.support.exe import FLEETWATCH

FLEETWATCH = os.fsencode(FLEETWATCH)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}


def _log(tmp_path) -> str:
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent="a1", to="DICE_TERMINADO", state="idle", phase="hecho", reason="r")],
               time.time())
    log.close()
    return db


def _fw(*args: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([FLEETWATCH, *args], capture_output=True, timeout=60, env=_env())


@pytest.mark.parametrize("args", [
    [b"verdict", b"x\x9by", b"met", b"--verifier", b"v", b"--evidence", b"e", b"--force"],
    [b"verdict", b"a1", b"met", b"--verifier", b"v\xff", b"--evidence", b"e"],
    [b"verdict", b"a1", b"met", b"--verifier", b"v", b"--evidence", b"e\xfe"],
    [b"silence", b"x\xffy", b"--for", b"1h", b"--force"],
    [b"tail", b"--subject", b"\xff"],
    [b"tail", b"--type=\xff"],
], ids=["verdict-agent", "verifier", "evidence", "silence", "tail-subject", "tail-type"])
def test_an_argument_that_is_not_utf8_is_refused_with_a_message_not_a_traceback(tmp_path, args):
    db = _log(tmp_path)
    before = os.path.getsize(db), EventLog(db, readonly=True).head()
    r = _fw(*args, b"--db", os.fsencode(db))
    assert r.returncode == 2, r.stderr
    assert b"Traceback" not in r.stderr and b"not valid UTF-8" in r.stderr, r.stderr
    assert (os.path.getsize(db), EventLog(db, readonly=True).head()) == before   # nothing written


@pytest.mark.parametrize("cmd", [[b"tail"], [b"status"], [b"summary"], [b"report"], [b"run", b"--once"]])
def test_a_log_path_that_is_not_utf8_is_refused_with_a_message_not_a_traceback(tmp_path, cmd):
    db = os.fsencode(str(tmp_path)) + b"/e\xff.db"
    if cmd[0] != b"run":
        os.rename(_log(tmp_path), db)
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    r = _fw(*cmd, b"--db", db, b"--config", os.fsencode(str(cfg)))
    assert r.returncode == 2, r.stderr
    assert b"Traceback" not in r.stderr and b"not valid UTF-8" in r.stderr, r.stderr
    assert os.path.exists(db) == (cmd[0] != b"run")   # run made no file there


def test_a_backup_path_that_is_not_utf8_is_refused_and_leaves_nothing(tmp_path):
    db = _log(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    r = _fw(b"backup", os.fsencode(str(out)) + b"/b\xff.db", b"--db", os.fsencode(db))
    assert r.returncode == 2, r.stderr
    assert b"Traceback" not in r.stderr and b"not valid UTF-8" in r.stderr, r.stderr
    assert os.listdir(out) == []


def test_a_file_name_argument_that_is_not_utf8_still_reaches_the_command(tmp_path):
    """--config is a file name: its bytes are the command's to judge (here: a missing config)."""
    r = _fw(b"status", b"--config", os.fsencode(str(tmp_path)) + b"/c\xff.toml")
    assert r.returncode == 2 and b"config file not found" in r.stderr, r.stderr


def test_safe_shows_a_lone_surrogate_as_an_escape_stdout_can_print():
    from projections.text import safe

    assert safe("x\udcffy") == "x\\udcffy"
    safe("x\udcffy").encode("utf-8")
