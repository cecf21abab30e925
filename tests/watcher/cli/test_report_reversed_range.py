"""`fleetwatch report` given a range that holds nothing (--since after --until) and agent ids
holding C1 controls and bidi characters in --json. Real log, real `fleetwatch report` processes."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from events.log import EventLog
from events.types import AgentClassified
from tests.support.exe import FLEETWATCH

EVIL = "a\x9b2J\u202eevil"


def _log(tmp_path) -> str:
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    now = time.time()
    log.append([AgentClassified(agent=EVIL, to="RECLAMA", state="waiting", reason="r")], now - 600)
    log.append([AgentClassified(agent=EVIL, to="TRABAJANDO", state="busy", reason="r")], now - 60)
    log.close()
    return db


def _report(db: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    return subprocess.run([FLEETWATCH, "report", "--db", db, *args], capture_output=True, timeout=60, env=env)


@pytest.mark.parametrize("since,until", [("2030-01-01", "2020-01-01"), ("10", "5"), ("1d", "2d")])
def test_a_since_after_until_is_refused_not_an_empty_report(tmp_path, since, until):
    r = _report(_log(tmp_path), "--since", since, "--until", until)
    assert r.returncode == 2 and r.stdout == b""
    assert b"is after --until" in r.stderr and b"Traceback" not in r.stderr


def test_a_since_in_the_future_is_refused_not_a_report_ending_before_it_starts(tmp_path):
    r = _report(_log(tmp_path), "--since", "2999-01-01")
    assert r.returncode == 2 and r.stdout == b""
    assert b"is in the future" in r.stderr and b"Traceback" not in r.stderr


def test_report_json_writes_c1_and_bidi_characters_as_escapes_and_keeps_the_ids(tmp_path):
    r = _report(_log(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    assert b"\xc2\x9b" not in r.stdout and b"\xe2\x80\xae" not in r.stdout
    assert EVIL in json.loads(r.stdout)["agents"]
