"""`--json` outputs read on a screen: JSON escapes C0 controls itself but leaves DEL, the C1
controls (U+009B is CSI on terminals that take 8-bit controls), bidi overrides and zero-width
characters raw. Real log, real `fleetwatch` processes; the decoded values must stay exact."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

from events.log import EventLog
from events.types import AgentClassified, SilenceAdded
from tests.support.exe import FLEETWATCH

EVIL = "a\x9b2J\u202eevil\u200b\u2066x\u2069\x7f\ufeff\x85"
RAW = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa0-\xa9]|\xef\xbb\xbf|\xd8\x9c")


def _log(tmp_path) -> str:
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=EVIL, to="RECLAMA", state="waiting", task=EVIL, reason="r", source="fleet",
                                contract_sha256="x"),
                SilenceAdded(silence="s1", subject_match="agent:x", until="2999-01-01T00:00:00.000Z", reason=EVIL)],
               time.time())
    log.close()
    return db


def _out(db: str, *args: str) -> bytes:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    r = subprocess.run([FLEETWATCH, *args, "--db", db], capture_output=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_json_outputs_escape_c1_controls_and_bidi_characters_and_keep_the_values(tmp_path):
    db = _log(tmp_path)
    outs = {c: _out(db, *c.split()) for c in ("tail --json", "export", "status --json", "summary --json",
                                              "silences --json")}
    for cmd, out in outs.items():
        assert not RAW.findall(out), (cmd, RAW.findall(out))
        assert [json.loads(line) for line in out.decode().splitlines()], cmd
    ev = [json.loads(line) for line in outs["export"].decode().splitlines()]
    assert ev[0]["data"]["agent"] == EVIL and ev[0]["data"]["task"] == EVIL and ev[1]["data"]["reason"] == EVIL
    assert outs["tail --json"] == outs["export"]
    [row] = json.loads(outs["status --json"])["agents"]
    assert row["agent"] == EVIL and row["task"] == EVIL
    assert json.loads(outs["summary --json"])["groups"][0]["items"][0].startswith(EVIL + ":")
    assert json.loads(outs["silences --json"].decode().splitlines()[0])["reason"] == EVIL
