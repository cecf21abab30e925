"""A goals root replaced under a running `fleetwatch run` (``rm -rf`` and made again, or a new tree
moved into place) is watched by inotify again. The Waker used to watch only the folder it found at
the start: watchdog ends the watch of a deleted root and keeps following a moved one, so every
later change waited for a full tick and the rolling resync (here an hour: never seen)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from events.log import EventLog

from tests.support.livefleet import goal, wait_for
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


def classes(db: str, agent: str) -> list[str]:
    if not os.path.exists(db):
        return []
    lg = EventLog(db, readonly=True)
    try:
        return [r.event.to for r in lg.read(0, types=["agent.classified"]) if r.event.agent == agent]
    finally:
        lg.close()


def test_a_goals_root_replaced_while_running_is_watched_again(tmp_path):
    fleet = str(tmp_path / "fleet")
    db = str(tmp_path / "e.db")
    goal(fleet, "a1")
    goal(fleet, "a2")
    cfg = tmp_path / "c.toml"
    # no full tick and no resync within the test: only inotify can report a change
    cfg.write_text(f'[store]\npath = "{db}"\n[watch]\ninterval = "1h"\nresync = "1h"\n'
                   f'[classify]\nbusy_silence = "30d"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    p = subprocess.Popen([EXE, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: classes(db, "a1") == ["TRABAJANDO"] and classes(db, "a2") == ["TRABAJANDO"],
                 "the first tick", p)
        shutil.rmtree(fleet)                    # deleted and made again: watchdog ended the old watch
        goal(fleet, "a1")
        goal(fleet, "a2")
        time.sleep(1.5)                         # (no timing asserted: the change must come at some point)
        goal(fleet, "a1", state="waiting", phase="preguntando")
        wait_for(lambda: classes(db, "a1") == ["TRABAJANDO", "RECLAMA"], "a1's change after rm -rf", p)

        new = str(tmp_path / "fleet.new")       # a new tree moved into place: the old watch follows the old one
        goal(new, "a1", state="waiting", phase="preguntando")
        goal(new, "a2")
        os.rename(fleet, str(tmp_path / "fleet.old"))
        os.rename(new, fleet)
        time.sleep(1.5)
        goal(fleet, "a2", state="waiting", phase="preguntando")
        wait_for(lambda: classes(db, "a2") == ["TRABAJANDO", "RECLAMA"], "a2's change after the move", p)
        goal(str(tmp_path / "fleet.old"), "a1", state="busy")  # the old tree is no longer the fleet
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()
    assert classes(db, "a1") == ["TRABAJANDO", "RECLAMA"]
    assert "watching " + fleet + " again" in err.decode()
