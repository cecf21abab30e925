"""Hostile inputs to ``fleetwatch hook`` and ``fleetwatch hook install`` found by a hostile pass:
each one gets one clear line (never a hang, a traceback or a raw exception text). Real files,
real FIFOs and devices, real processes through the console script."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")


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
