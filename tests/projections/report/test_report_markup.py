"""`fleetwatch report`'s terminal text with agent ids and source names that look like rich markup:
a real log, a real `fleetwatch report` process (piped, as a script reads it, and on a pseudo-TTY)."""
from __future__ import annotations

import os
import pty
import subprocess
import time

from events.log import EventLog
from events.types import AgentClassified, SourceFailed
from tests.support.exe import FLEETWATCH

IDS = ["mk[/]", "[bold red]boss[/]", "[link=http://evil]click[/link]"]


def _log(tmp_path) -> str:
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    now = time.time()
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", reason="r") for a in IDS]
               + [SourceFailed(source="src[/]", error="gone")], now - 600)
    log.append([AgentClassified(agent=a, to="TRABAJANDO", state="busy", reason="r") for a in IDS], now - 60)
    log.close()
    return db


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    return {**env, "COLUMNS": "200", "NO_COLOR": "1"}


def test_an_agent_id_that_looks_like_rich_markup_is_printed_as_written_not_a_traceback(tmp_path):
    db = _log(tmp_path)
    r = subprocess.run([FLEETWATCH, "report", "--db", db], capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    for a in IDS:
        assert a in r.stdout, (a, r.stdout)
    assert "src[/] 1" in r.stdout


def test_the_report_on_a_terminal_prints_markup_like_ids_as_written(tmp_path):
    db = _log(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: fleetwatch report on the pty
        os.execve(FLEETWATCH, [FLEETWATCH, "report", "--db", db], _env())
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "mk[/]" in text and "[bold red]boss[/]" in text and "Traceback" not in text
