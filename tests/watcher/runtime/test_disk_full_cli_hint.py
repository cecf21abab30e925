"""A command whose append fails on a full disk does not claim "the batch is kept and retried".

Found by a hostile CLI pass: with the log on a full file system, `fleetwatch verdict ...` exited 1
with the hint "disk full or I/O error? the batch is kept and retried": true of the watcher (it
keeps its transitions and says so itself), false of a command, whose verdict is simply not
recorded. The watcher itself kept its batch and committed it once space was freed (checked here).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest
from tests.support.exe import FLEETWATCH
from tests.support.hostile import rows
from tests.support.waiting import wait_for



def _mount_small_tmpfs(path: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    # room for the log and the watcher's 256 KiB <log>.spill reserve (watcher/runtime/spill.py): the
    # test's filler, not the watcher's own files, is what fills it
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", path],
                          capture_output=True).returncode == 0


def test_verdict_on_a_full_disk_says_run_it_again_and_the_watcher_catches_up(tmp_path):
    full = tempfile.mkdtemp(prefix="fw-full-")
    if not _mount_small_tmpfs(full):
        os.rmdir(full)
        pytest.skip("needs root to mount a small tmpfs")
    w = None
    try:
        for i in range(20):
            os.makedirs(tmp_path / "fleet" / f"a{i}")
            (tmp_path / "fleet" / f"a{i}" / "goal.json").write_text(json.dumps({"state": "busy", "dod_contract": "x"}))
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(f'[watch]\ninterval = "200ms"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                       f'glob = "{tmp_path}/fleet/*/goal.json"\n')
        db = os.path.join(full, "e.db")
        p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        log = tmp_path / "watcher.err"   # a file, not a pipe: a pipe nobody reads would block the watcher
        with open(log, "wb") as err:
            w = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg), "--db", db],
                                 stdout=subprocess.DEVNULL, stderr=err)
        # the watcher holds the log (its own watcher.started is in) before the disk is filled
        wait_for(lambda: w.poll() is not None or len(rows(db, ("watcher.started",))) >= 2, timeout=120)
        assert w.poll() is None, log.read_text()
        filler = os.path.join(full, "filler")
        with open(filler, "wb", buffering=0) as f:   # every free page of the file system, one page a write
            try:
                while f.write(b"\0" * 4096):
                    pass
            except OSError:
                pass
        for i in range(20):
            (tmp_path / "fleet" / f"a{i}" / "goal.json").write_text(json.dumps(
                {"state": "waiting", "dod_contract": "x", "task": "t" * 300}))
        v = subprocess.run([FLEETWATCH, "verdict", "a1", "met", "--verifier", "me", "--evidence", "ok", "--db", db],
                           capture_output=True, text=True, timeout=60)
        assert v.returncode != 0 and "Traceback" not in v.stderr, v.stderr
        assert "kept and retried" not in v.stderr and "run the command again" in v.stderr, v.stderr
        os.unlink(filler)

        def caught_up() -> bool:
            out = subprocess.run([FLEETWATCH, "status", "--json", "--db", db], capture_output=True, text=True,
                                 timeout=60).stdout
            agents = {a["agent"]: a for a in json.loads(out)["agents"]} if out else {}
            return bool(agents) and all(agents[f"a{i}"]["class"] == "RECLAMA" for i in range(20))

        try:
            wait_for(lambda: w.poll() is not None or caught_up(), timeout=120, step=0.2)
        except AssertionError:
            raise AssertionError(f"the watcher did not commit its kept batch: {log.read_text()[-2000:]}") from None
        assert w.poll() is None and caught_up(), log.read_text()[-2000:]
    finally:
        if w is not None:
            w.terminate()
            w.communicate(timeout=30)
        subprocess.run(["umount", full], capture_output=True)
        os.rmdir(full)
