"""``fleetwatch hook``'s one stderr line names paths built from ``--goals-dir`` /
``$FLEETWATCH_GOALS_DIR`` and agent ids (folder names, ``$FLEETWATCH_AGENT``), which the hook
never escaped: a goals dir holding ESC ] 0 ; … BEL set the terminal's title and ESC [ 2 J cleared
it, a newline forged a second line, a C1 CSI or a bidi override went through. Every character
that is not printable is now shown as an escape."""
from __future__ import annotations

import os
import subprocess
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH
NASTY = "e\x1b]0;PWNED\x07\x1b[2J\nfleetwatch hook: forged\u009b31m\u202e"


def test_a_goals_dir_with_escapes_does_not_reach_the_terminal_through_the_hooks_stderr(tmp_path):
    goals = os.fsencode(str(tmp_path)) + b"/" + NASTY.encode() + b"\xff"  # and a byte that is not UTF-8
    for agent, shown in (("a1", "a1"), ("b\u009b1m\u202ex", "b\\x9b1m\\u202ex")):  # C1 CSI, bidi: valid ids
        folder = goals + b"/" + agent.encode()
        os.makedirs(folder)
        os.symlink(b"/etc/passwd", folder + b"/goal.json")  # refused: the line names the path
        r = subprocess.run([FW.encode(), b"hook", b"--goals-dir", goals, b"--agent", agent.encode()],
                           input=b'{"hook_event_name": "Stop"}', capture_output=True, timeout=60)
        assert r.returncode == 0
        err = r.stderr.decode("ascii")    # nothing but ASCII: every other character escaped
        assert err.count("\n") == 1 and err[:-1].isprintable(), err
        assert err.endswith(f"\\x1b]0;PWNED\\x07\\x1b[2J\\x0afleetwatch hook: forged\\x9b31m\\u202e\\udcff/"
                            f"{shown}/goal.json is a symlink: left untouched\n"), err
