"""``fleetwatch hook install`` on a settings.json it cannot rewrite faithfully: a key twice in one
object was silently dropped (the first "hooks", another tool's Stop hook in it, was gone from the
file, and the diff, made from the parsed file, showed only additions under the note 'content
otherwise unchanged'); a file nested 100,000 deep ended in a RecursionError traceback. Both are
refused with one line and a hint, exit 1, the file untouched."""
from __future__ import annotations

import subprocess

import pytest
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH
TWICE = ('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "other-tool"}]}]},\n'
         ' "hooks": {"PreToolUse": []}}\n')


@pytest.mark.parametrize("text, said", [
    (TWICE, 'settings.json has the key "hooks" twice in one object (Claude Code reads only the last)'),
    ('{"env": {"k\\u001b[2J": "1", "k\\u001b[2J": "2"}}', 'the key "k\\x1b[2J" twice'),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "settings.json is nested too deeply"),
])
def test_hook_install_refuses_a_settings_file_it_would_not_rewrite_faithfully(tmp_path, text, said):
    settings = tmp_path / "settings.json"
    settings.write_text(text)
    r = subprocess.run([FW, "hook", "install", "--settings", str(settings), "--events", "core"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "\x1b" not in r.stderr and r.stdout == ""
    assert settings.read_text() == text


def test_hook_install_shows_the_diff_of_a_settings_file_with_controls_inert(tmp_path):
    """The diff printed the file's own text raw: a status line command holding a bidi override
    (U+202E) or a C1 CSI (U+009B) reordered or restyled the terminal. They are shown as escapes;
    the file keeps them exactly."""
    settings = tmp_path / "settings.json"
    text = '{"statusLine": {"type": "command", "command": "echo \u202e\u009b31m"}}\n'
    settings.write_text(text)
    r = subprocess.run([FW, "hook", "install", "--settings", str(settings), "--events", "core"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert '"command": "echo \\u202e\\x9b31m"' in r.stdout
    assert all(line.isprintable() for line in r.stdout.splitlines()), r.stdout
    assert '"command": "echo \u202e\u009b31m"' in settings.read_text()
