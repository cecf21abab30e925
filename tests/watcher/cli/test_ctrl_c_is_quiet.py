"""Ctrl-C (SIGINT) in `export` or `verify` of a big log ends them quietly with exit 130, as the
typer commands (`backup`, `rebuild`) already did. Real subprocesses, a real log.

No Python traceback ending in KeyboardInterrupt, although the fast path (watcher/cli/fast.py)
has no typer around it to catch it. `tail -f` keeps its own answer (exit 0).
"""
from __future__ import annotations

import signal
import subprocess
import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import ENV, FW


def _as_from_a_terminal() -> None:
    """SIGINT at its default in the child, as a shell in a terminal starts a command: a test run
    started as a background job of a non-interactive shell (`make test &`) ignores SIGINT, every
    child inherits that, and the export then runs to its end with exit 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_a_fast_path_command_exits_130_without_a_traceback(tmp_path):
    db = str(tmp_path / "events.db")
    with EventLog(db) as log:
        for _ in range(40):
            log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="x" * 200, source="cli")
                        for i in range(1000)], time.time())
    p = subprocess.Popen([*FW, "export", "--db", db], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                         preexec_fn=_as_from_a_terminal)
    assert p.stdout is not None
    p.stdout.read(4096)  # it is writing: well inside the command (verify takes the same path: entry.main)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and b"Traceback" not in err and b"KeyboardInterrupt" not in err, err[-400:]
