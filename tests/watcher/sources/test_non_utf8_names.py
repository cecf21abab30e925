"""A folder name (or a goals root) whose bytes are not UTF-8 must not stop the watcher.

Found by a hostile CLI pass: one agent folder named ``bad\\xff\\xfe`` made ``fleetwatch run``
crash on its first commit (UnicodeEncodeError from the chain encoder: os.fsdecode's lone
surrogates in the agent id), so the whole fleet went unwatched and the service would restart into
the same crash. The same for a root with such bytes (from ``$VAR`` in the glob) going missing, and
for a duplicate id whose reason names such a path. Such bytes are now shown as ``\\xNN``.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from tests.support.exe import FLEETWATCH

GOOD = {"state": "busy", "phase": "haciendo", "dod_contract": "tests pass"}


def _goal(folder: bytes, **kw) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, b"goal.json"), "w") as f:
        json.dump({**GOOD, **kw}, f)


def _cfg(tmp_path: Path, glob: str) -> Path:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[watch]\ninterval = "200ms"\n[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{glob}"\n')
    return cfg


def _events(db: str) -> list[dict]:
    out = subprocess.run([FLEETWATCH, "export", "--db", db], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_non_utf8_folder_name_does_not_crash_the_watcher(tmp_path):
    root = os.fsencode(tmp_path / "fleet")
    _goal(root + b"/bad\xff\xfename")
    _goal(root + b"/ok")
    _goal(root + b"/twin\xfe", agent="twin", state="waiting")
    _goal(root + b"/twin", agent="twin", state="waiting")
    db = str(tmp_path / "e.db")
    cfg = _cfg(tmp_path, f"{tmp_path}/fleet/*/goal.json")
    p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    got = {e["data"]["agent"]: e["data"] for e in _events(db) if e["type"] == "agent.classified"}
    assert got["bad\\xff\\xfename"]["to"] == "TRABAJANDO" and got["ok"]["to"] == "TRABAJANDO"
    assert got["twin"]["to"] == "MAL_LANZADO" and "twin\\xfe/goal.json" in got["twin"]["reason"]
    v = subprocess.run([FLEETWATCH, "verify", "--db", db], capture_output=True, text=True, timeout=60)
    assert v.returncode == 0, v.stdout + v.stderr
    s = subprocess.run([FLEETWATCH, "status", "--db", db], capture_output=True, text=True, timeout=60)
    assert s.returncode == 0 and "bad\\\\xff\\\\xfename" in s.stdout, s.stdout + s.stderr


def test_non_utf8_goals_root_going_missing_is_a_failed_source(tmp_path):
    root = os.fsencode(tmp_path) + b"/r\xff"
    _goal(root + b"/a1")
    db = str(tmp_path / "e.db")
    cfg = _cfg(tmp_path, "$FW_TEST_ROOT/*/goal.json")
    env = {**os.environ, "FW_TEST_ROOT": os.fsdecode(root)}
    p = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg), "--db", db], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while not any(e["type"] == "agent.classified" for e in _events(db) if os.path.exists(db)):
            assert time.monotonic() < deadline and p.poll() is None, "the watcher never recorded a1"
            time.sleep(0.1)
        os.rename(root, os.fsencode(tmp_path) + b"/away")
        while not any(e["type"] == "source.failed" for e in _events(db)):
            assert time.monotonic() < deadline and p.poll() is None, "no source.failed, or the watcher died"
            time.sleep(0.1)
        assert p.poll() is None
    finally:
        p.terminate()
        out = p.communicate(timeout=30)[0]
    assert p.returncode == 0 and "Traceback" not in out, out
    failed = [e["data"] for e in _events(db) if e["type"] == "source.failed"]
    assert failed[0]["error_class"] == "root-missing" and "r\\xff" in failed[0]["error"]
