"""The refusal of a log path whose folder does not exist told every command to "pass --create",
an option only `run` has: `fleetwatch silence ... --db TYPO/e.db` answered with a flag it then
rejects. Found in a helper's note after [store] path was made to refuse a missing folder too.
The hint now names what works anywhere (make the folder, quoted for the shell) and `run
--create`. A real process; nothing is created."""
from __future__ import annotations

import shlex
import subprocess
from tests.support.exe import FLEETWATCH



def test_a_missing_folder_is_refused_with_a_hint_the_command_can_follow(tmp_path):
    folder = tmp_path / "ty po"
    r = subprocess.run([FLEETWATCH, "silence", "a1", "--for", "1h", "--force", "--db", str(folder / "e.db")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "does not exist (a typo?); nothing was created" in r.stderr
    assert f"mkdir -p {shlex.quote(str(folder))}" in r.stderr
    assert "pass --create" not in r.stderr
    assert not folder.exists()
    help_ = subprocess.run([FLEETWATCH, "silence", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--create" not in help_  # the reason the old hint was wrong
