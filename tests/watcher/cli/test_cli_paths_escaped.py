"""Regression (found attacking this session's change): a log path in a folder named with an
escape sequence and a newline reached the terminal raw — "no event log here yet (PATH)" from every
typed error, `status`'s and `tail`'s own notes, `hook install`'s diff header — so a folder called
``ESC]0;…BEL`` retitled the terminal. Every message a command prints now shows it escaped (the
typed errors through ``error_text``, the one place that prints them). Real processes."""
from __future__ import annotations

import subprocess

import pytest
from tests.support.exe import FLEETWATCH

EVIL = "evil\x1b]0;pwn\x07\nline2"


@pytest.mark.parametrize("cmd", [["status"], ["status", "--json"], ["summary"], ["tail"], ["export"], ["verify"],
                                 ["report"], ["rebuild"], ["verdict", "a1", "met", "--verifier", "v", "--evidence", "e"]])
def test_a_log_path_with_escapes_is_printed_escaped(tmp_path, cmd):
    d = tmp_path / EVIL
    d.mkdir()
    p = subprocess.run([FLEETWATCH, *cmd, "--db", str(d / "e.db")], capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert "\x1b" not in out and "\x07" not in out, out
    assert "evil" not in out or "\\x1b" in out, out     # named, escaped


def test_hook_install_diff_header_is_escaped(tmp_path):
    d = tmp_path / EVIL
    d.mkdir()
    p = subprocess.run([FLEETWATCH, "hook", "install", "--settings", str(d / "s.json"), "--events", "core",
                        "--command", "fw"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout + p.stderr and "\\x1b" in p.stdout
