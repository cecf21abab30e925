"""``fleetwatch hook`` and ``fleetwatch hook install`` rewrite a JSON file they do not own in full
(goal.json, settings.json). Python's json made ``1e400`` a float ``inf`` and wrote it back as
``Infinity``, which is not JSON: the watcher then refused the whole goal.json (the agent turned
MAL_LANZADO "not JSON"), and Claude Code would refuse the settings file. It also rounded
``0.10000000000000000555`` to ``0.1`` and refused an integer of 5000 digits as "not valid JSON".
Every number is now written back as the text it was read from."""
from __future__ import annotations

import json
import os
import subprocess
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH
NUMBERS = ('"extra": 1e400, "p": 0.10000000000000000555, "n": [-0, 1E5, 2.50, -1e-400], '
           '"big": ' + "9" * 5000)


def fw(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "FLEETWATCH_AGENT": ""}
    return subprocess.run([FW, *args], input=stdin, capture_output=True, text=True, timeout=60, env=env)


def test_the_hook_writes_back_every_number_of_goal_json_as_it_was_not_infinity(tmp_path):
    folder = tmp_path / "agents" / "a1"
    folder.mkdir(parents=True)
    goal = folder / "goal.json"
    goal.write_text('{"agent": "a1", "state": "idle", "dod_contract": "x", ' + NUMBERS + '}')
    r = fw("hook", "--goals-dir", str(tmp_path / "agents"), "--agent", "a1",
           stdin='{"hook_event_name": "UserPromptSubmit"}')
    assert (r.returncode, r.stderr) == (0, "")
    text = goal.read_text()
    assert "Infinity" not in text
    for num in ("1e400", "0.10000000000000000555", "-0", "1E5", "2.50", "-1e-400", "9" * 5000):
        assert num in text
    doc = json.loads(text, parse_int=str, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # strict JSON
    assert doc["state"] == "busy" and doc["hook_event"] == "UserPromptSubmit"
    assert list(doc)[:6] == ["agent", "state", "dod_contract", "extra", "p", "n"]


def test_hook_install_keeps_every_number_of_settings_json_valid_json(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text('{"cleanupPeriodDays": 30, ' + NUMBERS + '}')
    r = fw("hook", "install", "--settings", str(settings), "--events", "core")
    assert r.returncode == 0, r.stderr
    assert "Infinity" not in r.stdout  # the diff shows the file as it is
    text = settings.read_text()
    assert "Infinity" not in text and "1e400" in text and "0.10000000000000000555" in text
    doc = json.loads(text, parse_int=str, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert doc["cleanupPeriodDays"] == "30" and "Stop" in doc["hooks"]
    again = fw("hook", "install", "--settings", str(settings), "--events", "core")
    assert again.returncode == 0 and "nothing to change" in again.stdout and settings.read_text() == text


def test_a_permission_request_whose_tool_input_holds_a_5000_digit_integer_still_waits(tmp_path):
    """The payload is valid JSON: json.loads refused it (int() over 4300 digits), so the hook said
    'stdin is not a JSON hook payload' and the agent never showed RECLAMA."""
    agents = tmp_path / "agents"
    call = '"tool_name": "mcp__calc__add", "tool_input": {"n": ' + "9" * 5000 + '}'
    r = fw("hook", "--goals-dir", str(agents), "--agent", "a1",
           stdin='{"hook_event_name": "PermissionRequest", ' + call + '}')
    assert (r.returncode, r.stderr) == (0, "")
    doc = json.loads((agents / "a1" / "goal.json").read_text())
    assert doc["state"] == "waiting" and len(doc["pending"]) == 1
    fw("hook", "--goals-dir", str(agents), "--agent", "a1", stdin='{"hook_event_name": "PostToolUse", ' + call + '}')
    doc = json.loads((agents / "a1" / "goal.json").read_text())
    assert doc["state"] == "busy" and "pending" not in doc   # the same call answered it
