"""A writing command on a log this user may not write says so, not "the batch is kept and retried".

Found by a hostile CLI pass: `fleetwatch verdict a1 met ...` on a read-only log (a copy owned by
another user, mode 0444 in a 0555 folder) exited 1 with "append failed, nothing written:
ReadOnlyError ..." and the hint "disk full or I/O error? the batch is kept and retried": a CLI
verdict is never kept nor retried, and the cause is the file's mode. The hint now names it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.fwcli import AS_NOBODY, as_nobody_env
from tests.support.exe import FLEETWATCH



@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root writes any file")
def test_verdict_on_a_read_only_log_names_the_mode_not_a_retry():
    base = Path(tempfile.mkdtemp(prefix="fw-readonly-"))
    try:
        os.makedirs(base / "fleet" / "a1")
        (base / "fleet" / "a1" / "goal.json").write_text(json.dumps({"state": "idle", "phase": "hecho",
                                                                    "dod_contract": "x"}))
        cfg = base / "cfg.toml"
        cfg.write_text(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{base}/fleet/*/goal.json"\n')
        logs = base / "logs"
        os.makedirs(logs)
        db = str(logs / "e.db")
        p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        for f in os.listdir(logs):
            os.chmod(logs / f, 0o444)
        os.chmod(logs, 0o555)
        for d in (base, base / "fleet", base / "fleet" / "a1"):
            os.chmod(d, 0o755)
        v = subprocess.run([*AS_NOBODY, FLEETWATCH, "verdict", "a1", "met", "--verifier", "me", "--evidence", "ok",
                            "--db", db], capture_output=True, text=True, timeout=60, env=as_nobody_env(base))
        assert v.returncode != 0 and "Traceback" not in v.stderr, v.stderr
        assert "not writable by this user" in v.stderr and "kept and retried" not in v.stderr, v.stderr
        r = subprocess.run([*AS_NOBODY, FLEETWATCH, "verify", "--db", db], capture_output=True, text=True,
                           timeout=60, env=as_nobody_env(base))
        assert r.returncode == 0, r.stdout + r.stderr          # nothing was written
    finally:
        for d, _, _ in os.walk(base):
            os.chmod(d, 0o755)
        shutil.rmtree(base)
