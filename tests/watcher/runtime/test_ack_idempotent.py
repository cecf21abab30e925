"""Regression: `fleetwatch ack` of what is already acked appended a second, identical
``notice.acked``. Acking again the same way (until it clears, or to the same end) now says
"already acknowledged" and records nothing (exit 0); a different ``--for`` is a real change and is
recorded. Real processes on a real log."""
from __future__ import annotations

import json
import os
import subprocess
import time

from events.log import EventLog
from events.types import AgentClassified
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


def fw(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60, env=env)


def acks(db) -> list:
    log = EventLog(str(db))
    try:
        return [r.event for r in log.read(0, types=["notice.acked"])]
    finally:
        log.close()


def test_acking_twice_records_one_ack_and_a_new_for_is_recorded(tmp_path):
    db = tmp_path / "e.db"
    log = EventLog(str(db))
    log.append([AgentClassified(agent="a1", from_="TRABAJANDO", to="RECLAMA", state="waiting",
                                phase="preguntando", reason="waiting for the human")], time.time())
    log.close()
    first = fw("ack", "a1", "--db", str(db))
    assert first.returncode == 0 and first.stdout.startswith("acknowledged agent:a1 RECLAMA"), first
    again = fw("ack", "a1", "--db", str(db))
    assert again.returncode == 0, again
    assert "already acknowledged agent:a1 RECLAMA (until it clears)" in again.stdout, again.stdout
    assert len(acks(db)) == 1
    j = json.loads(fw("ack", "a1", "--json", "--db", str(db)).stdout)
    assert j["conditions"] == [] and j["already"] == ["agent:a1|RECLAMA#1"]
    assert len(acks(db)) == 1
    snooze = fw("ack", "a1", "--for", "30m", "--db", str(db))     # a different ack: recorded
    assert snooze.returncode == 0 and snooze.stdout.startswith("acknowledged agent:a1 RECLAMA until "), snooze
    evs = acks(db)
    assert len(evs) == 2 and evs[1].until
    back = fw("ack", "a1", "--db", str(db))                        # and back to until it clears
    assert back.returncode == 0 and back.stdout.startswith("acknowledged"), back
    assert len(acks(db)) == 3


def test_the_same_snooze_twice_a_few_seconds_apart_records_one_as_the_phone_page_does(tmp_path):
    """`ack --for 30m` run twice seconds apart recorded two acks (their ends differ by those
    seconds), while the phone page's Snooze answered the same double tap with nothing: one rule
    now (watcher/runtime/acks.unchanged, AGAIN_S). A longer or a shorter snooze is a change."""
    db = tmp_path / "e.db"
    log = EventLog(str(db))
    log.append([AgentClassified(agent="a1", from_="TRABAJANDO", to="RECLAMA", state="waiting",
                                phase="preguntando", reason="waiting for the human")], time.time())
    log.close()
    assert fw("ack", "a1", "--for", "30m", "--db", str(db)).returncode == 0
    time.sleep(1.2)   # the second end is a second later: the same request again
    again = fw("ack", "a1", "--for", "30m", "--db", str(db))
    assert again.returncode == 0 and "already acknowledged agent:a1 RECLAMA until " in again.stdout, again.stdout
    assert len(acks(db)) == 1
    assert fw("ack", "a1", "--for", "2h", "--db", str(db)).returncode == 0      # longer: recorded
    assert fw("ack", "a1", "--for", "10m", "--db", str(db)).returncode == 0     # shorter: recorded
    assert [bool(e.until) for e in acks(db)] == [True, True, True]
