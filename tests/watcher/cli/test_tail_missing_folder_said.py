"""`tail` / `export` / `tail -f` with --db in a folder that does not exist (a typo): they said "no
event log yet; it is created by `fleetwatch run`", and `tail -f` waited, but `run` refuses to make
the folder of a path given by hand (5f5bca7, 153ec8f), so nothing would ever appear. They now say
the folder is missing. The default path (its folder made by `run`) keeps the old words. Real
processes; no log is created anywhere."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from tests.support.exe import FLEETWATCH

SAID = "does not exist (a typo?)"


def _env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    return {**env, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def test_a_log_path_in_a_missing_folder_is_said_to_be_one(tmp_path):
    db = str(tmp_path / "typo" / "e.db")
    for cmd in (["tail"], ["export"], ["tail", "--json"]):
        r = subprocess.run([FLEETWATCH, *cmd, "--db", db], capture_output=True, text=True, timeout=60,
                           env=_env(tmp_path))
        assert r.returncode == 0 and r.stdout == "" and SAID in r.stderr, (cmd, r.stderr)
    p = subprocess.Popen([FLEETWATCH, "tail", "-f", "--db", db], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=_env(tmp_path))
    os.set_blocking(p.stderr.fileno(), False)
    deadline = time.monotonic() + 60
    raw = b""
    while SAID not in raw.decode(errors="replace") and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
        try:   # bytes straight from the pipe: a text reader on a non-blocking pipe with nothing yet fails
            raw += os.read(p.stderr.fileno(), 65536)
        except BlockingIOError:
            pass
    err = raw.decode(errors="replace")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    assert SAID in err
    assert not (tmp_path / "typo").exists()


def test_the_default_log_path_keeps_its_words(tmp_path):
    r = subprocess.run([FLEETWATCH, "tail"], capture_output=True, text=True, timeout=60, env=_env(tmp_path))
    assert r.returncode == 0 and "yet (nothing to show)" in r.stderr and SAID not in r.stderr
