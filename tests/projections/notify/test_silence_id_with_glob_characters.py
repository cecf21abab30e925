"""`fleetwatch silence ID` for an agent whose id holds glob characters (ids come from goal.json or
folder names): silences match subjects by glob, so `silence 'b[12]'` recorded ``agent:b[12]``,
which muted b1 and not b[12], and `silence 'a*'` muted a1 too (the board escaped them already).
A real log, real `fleetwatch silence` processes, the watcher's own silence matcher."""
from __future__ import annotations

import os
import subprocess
import time

from events.log import EventLog
from events.types import AgentClassified
from projections.notify.policy import matching_silence
from tests.support.exe import FLEETWATCH

AGENTS = ("a*", "a1", "b[12]", "b1", "c?", "cx")


def _muted_by(db: str, subject: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    r = subprocess.run([FLEETWATCH, "silence", subject, "--for", "1h", "--db", db], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    [rec] = list(EventLog(db, create=False, readonly=True).last(1, types=["silence.added"]))
    sil = {"s": {"subject": rec.event.subject_match, "cls": None, "until": time.time() + 3000}}
    return [a for a in AGENTS if matching_silence({"subject": f"agent:{a}", "cls": "RECLAMA"}, sil, time.time())]


def test_silencing_an_agent_whose_id_holds_glob_characters_mutes_that_agent_only(tmp_path):
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", reason="r") for a in AGENTS], time.time())
    log.close()
    assert _muted_by(db, "b[12]") == ["b[12]"]
    assert _muted_by(db, "a*") == ["a*"]
    assert _muted_by(db, "agent:c?") == ["c?"]
    assert _muted_by(db, "agent:b?") == ["b1"]           # not an agent's id: the pattern it says
    assert _muted_by(db, "agent:*") == list(AGENTS)
