"""Hostile inputs to ``fleetwatch hook`` and ``fleetwatch hook install`` found by a hostile pass:
each one gets one clear line (never a hang, a traceback or a raw exception text). Real files,
real FIFOs and devices, real processes through the console script."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.support.exe import FLEETWATCH



def run(args: list[str], data: bytes = b"", timeout: float = 20, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "CLAUDE_"))}
    return subprocess.run([FLEETWATCH, *args], input=data, capture_output=True, env=env, timeout=timeout, cwd=cwd)


# ---------------------------------------------------------------- hook install --settings

@pytest.mark.parametrize("kind,want", [
    ("fifo", "a FIFO, not a regular file"),
    ("symlink-to-fifo", "a FIFO, not a regular file"),
    ("dev-zero", "a character device, not a regular file"),
    ("symlink-to-dev-zero", "a character device, not a regular file"),
])
def test_install_into_a_fifo_or_device_settings_is_refused_without_blocking(tmp_path, kind, want):
    """`hook install --settings FIFO` waited forever for a writer (open + read); /dev/zero (or a
    symlink to it) read without end. Now refused from fstat, before one byte is read."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    settings = {"fifo": fifo, "symlink-to-fifo": tmp_path / "lf.json", "dev-zero": Path("/dev/zero"),
                "symlink-to-dev-zero": tmp_path / "lz.json"}[kind]
    if kind == "symlink-to-fifo":
        settings.symlink_to(fifo)
    elif kind == "symlink-to-dev-zero":
        settings.symlink_to("/dev/zero")
    r = run(["hook", "install", "--settings", str(settings), "--events", "core", "--command", "fleetwatch"])
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.startswith(f"fleetwatch: cannot read settings: {want} ({settings})\n  hint: "), err
    assert err.count("\n") == 2 and "Traceback" not in err and r.stdout == b""
    assert fifo.is_fifo() and not (tmp_path / "fifo.json.fleetwatch.bak").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"fifo.json", settings.name} - {"zero"})


def test_install_refuses_settings_over_1_mib_and_non_utf8_settings(tmp_path):
    """A 2 GiB sparse settings.json was read whole into memory; a non-UTF-8 one was a traceback."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(2 << 30)
    r = run(["hook", "install", "--settings", str(big), "--events", "core", "--command", "fleetwatch"])
    assert r.returncode == 1 and r.stderr.decode().startswith(
        f"fleetwatch: cannot read settings: larger than 1048576 bytes ({big})\n  hint: ")
    assert big.stat().st_size == 2 << 30
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"model": "\xff"}')
    r = run(["hook", "install", "--settings", str(bad), "--events", "core", "--command", "fleetwatch"])
    err = r.stderr.decode()
    assert r.returncode == 1 and err.startswith(f"fleetwatch: settings.json is not UTF-8 (byte 11) ({bad})"), err
    assert "Traceback" not in err and bad.read_bytes() == b'{"model": "\xff"}'


# ---------------------------------------------------------------- hook: lone UTF-16 surrogates

def _goal(goals: Path, doc_text: str, agent: str = "a01") -> Path:
    p = goals / agent / "goal.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(doc_text)
    return p


@pytest.mark.parametrize("payload,field", [
    ('{"hook_event_name": "SessionStart", "source": "startup", "session_id": "\\ud800"}', "session_id"),
    ('{"hook_event_name": "SessionEnd", "reason": "clear", "session_id": "\\ud800", "cwd": "/w"}', "session_id"),
    ('{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "\\ud800"}', "tool_use_id"),
    ('{"hook_event_name": "PermissionRequest", "agent_id": "\\ud800", "tool_use_id": "t1"}', "agent_id"),
    ('{"hook_event_name": "StopFailure", "error_type": "\\ud800"}', "error_type"),
])
def test_lone_surrogate_in_payload_ids_is_one_clear_line_not_a_unicode_encode_error(tmp_path, payload, field):
    """JSON accepts "\\ud800" but UTF-8 cannot hold it: writing it to goal.json printed
    "fleetwatch hook: UnicodeEncodeError: 'utf-8' codec can't encode character ..."."""
    p = _goal(tmp_path, '{"agent": "a01", "state": "busy", "session_id": "old"}')
    r = run(["hook", "--agent", "a01", "--goals-dir", str(tmp_path)], payload.encode())
    err = r.stderr.decode()
    assert r.returncode == 0
    assert err == (f"fleetwatch hook: stdin payload has a lone UTF-16 surrogate ('\\ud800') in {field}, "
                   "not encodable as UTF-8: ignored\n"), err
    assert p.read_text() == '{"agent": "a01", "state": "busy", "session_id": "old"}'
    assert sorted(x.name for x in p.parent.iterdir()) == ["goal.json", "goal.json.lock"]  # no temp file left


@pytest.mark.parametrize("doc,where", [
    ('{"agent": "a01", "state": "busy", "session_id": "\\udc80"}', "session_id"),
    ('{"agent": "a01", "dod": {"checks": ["ok", "\\udc80"]}}', "dod.checks[1]"),
    ('{"agent": "a01", "\\udc80": 1}', "\\udc80 (a key)"),
])
def test_lone_surrogate_in_goal_json_is_left_untouched_with_one_clear_line(tmp_path, doc, where):
    p = _goal(tmp_path, doc)
    r = run(["hook", "--agent", "a01", "--goals-dir", str(tmp_path)], b'{"hook_event_name": "Stop"}')
    err = r.stderr.decode()
    assert r.returncode == 0
    assert err == (f"fleetwatch hook: {p} has a lone UTF-16 surrogate ('\\udc80') in {where}, "
                   "not encodable as UTF-8: left untouched\n"), err
    assert p.read_text() == doc


def test_non_utf8_agent_id_is_refused_before_creating_anything(tmp_path):
    """--agent $'\\xff' (argv bytes that are not UTF-8) made a folder and lock file for it, then
    failed with a raw UnicodeEncodeError writing {"agent": ...}; an existing goal.json there is
    still updated (its agent id is not rewritten)."""
    r = run(["hook", "--agent", b"\xff", "--goals-dir", str(tmp_path)], b'{"hook_event_name": "Stop"}')
    err = r.stderr.decode()
    assert r.returncode == 0
    assert err == ("fleetwatch hook: agent id '\\udcff' is not UTF-8 (goal.json could not hold it): "
                   "nothing created\n"), err
    assert os.listdir(tmp_path) == []
    folder = os.path.join(os.fsencode(tmp_path), b"\xff")
    os.mkdir(folder)
    with open(os.path.join(folder, b"goal.json"), "w") as f:
        f.write('{"agent": "x", "state": "busy"}')
    r = run(["hook", "--agent", b"\xff", "--goals-dir", str(tmp_path)], b'{"hook_event_name": "Stop"}')
    assert (r.returncode, r.stderr) == (0, b"")
    with open(os.path.join(folder, b"goal.json")) as f:
        assert json.load(f)["state"] == "idle"


# ---------------------------------------------------------------- hook: an agent folder that cannot be made

STOP = b'{"hook_event_name": "Stop"}'


def _one_line(r: subprocess.CompletedProcess) -> str:
    err = r.stderr.decode()
    assert r.returncode == 0 and err.startswith("fleetwatch hook: ") and err.count("\n") == 1, err
    assert "Errno" not in err and "Error:" not in err, err
    return err


def test_over_long_agent_id_is_one_clear_line_not_a_raw_errno_36(tmp_path):
    """--agent of 5,000 characters printed "OSError: [Errno 36] File name too long: '<5,000 a>'"."""
    r = run(["hook", "--agent", "a" * 5000, "--goals-dir", str(tmp_path)], STOP)
    assert _one_line(r) == ("fleetwatch hook: agent id 'aaaaaaaaaaaaaaaaaaaa...' (5000 characters) is too long "
                            "for a folder name (at most 255 bytes): use a shorter --agent or $FLEETWATCH_AGENT\n")
    assert os.listdir(tmp_path) == []
    deep = tmp_path.joinpath(*["d" * 200] * 25)  # each part fine, the whole path over PATH_MAX
    r = run(["hook", "--agent", "a01", "--goals-dir", str(deep)], STOP)
    assert "path of the agent folder too long" in _one_line(r) and "use a shorter --goals-dir" in r.stderr.decode()


@pytest.mark.parametrize("how", ["file", "under-a-file", "symlink-to-a-file", "env"])
def test_goals_dir_that_is_a_file_is_one_clear_line_not_a_raw_not_a_directory_error(tmp_path, how):
    """--goals-dir FILE printed "NotADirectoryError: [Errno 20] Not a directory: 'FILE/a01'"."""
    f = tmp_path / "goals"
    f.write_text("not a folder\n")
    goals = {"file": f, "under-a-file": f / "sub", "symlink-to-a-file": tmp_path / "link", "env": f}[how]
    if how == "symlink-to-a-file":
        goals.symlink_to(f)
    if how == "env":
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEETWATCH_", "CLAUDE_"))}
        r = subprocess.run([FLEETWATCH, "hook", "--agent", "a01"], input=STOP, capture_output=True, timeout=20,
                           env={**env, "FLEETWATCH_GOALS_DIR": str(goals)})
    else:
        r = run(["hook", "--agent", "a01", "--goals-dir", str(goals)], STOP)
    assert _one_line(r) == (f"fleetwatch hook: goals dir {goals} is not a folder: point --goals-dir or "
                            "$FLEETWATCH_GOALS_DIR at a folder\n")
    assert f.read_text() == "not a folder\n"


def test_agent_folder_that_is_a_file_is_one_clear_line_not_a_raw_file_exists_error(tmp_path):
    (tmp_path / "a01").write_text("{}")
    r = run(["hook", "--agent", "a01", "--goals-dir", str(tmp_path)], STOP)
    assert _one_line(r) == (f"fleetwatch hook: {tmp_path / 'a01'} is a file, not the agent's folder: "
                            "move it away or use another --agent\n")
    assert (tmp_path / "a01").read_text() == "{}"
