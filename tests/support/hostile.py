"""Helpers for the hostile-input tests (issue 47): a real small file system, a fleet of goal.json
files with cmd contracts, a real `fleetwatch run`, the log's rows."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.fwcli import ENV, FW, fw


@contextlib.contextmanager
def small_fs(size: str = "4m") -> Iterator[str | None]:
    """A tmpfs of ``size`` mounted on a fresh folder (None when this process may not mount one:
    not root, or no mount namespace rights); unmounted after."""
    d = tempfile.mkdtemp(prefix="fw-small-")
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d],
                                           capture_output=True).returncode != 0:
        os.rmdir(d)
        yield None
        return
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], capture_output=True)
        os.rmdir(d)


def fill(folder: str, leave: int = 0) -> str:
    """Take every free block of ``folder``'s file system but ``leave`` bytes (one fallocate)."""
    filler = os.path.join(folder, "filler")
    st = os.statvfs(folder)
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, max(1, st.f_bavail * st.f_frsize - leave))
    finally:
        os.close(fd)
    return filler


def world(tmp: Path, db: str, extra: str = "", notify: str | None = None) -> tuple[Path, Path]:
    """(fleet folder, config path): a goals source, checks on, ticks of 200 ms."""
    fleet = tmp / "fleet"
    fleet.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "config.toml"
    text = (f'[store]\npath = "{db}"\ndurability = "normal"\n[watch]\ninterval = "200ms"\n'
            f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n'
            f'[dod]\nrun_checks = true\ncheck_timeout = "60s"\n{extra}')
    if notify:
        text += f'[notify]\nurls = ["{notify}"]\ngroup_wait = "1s"\n'
    cfg.write_text(text)
    return fleet, cfg


def goal(fleet: Path, folder: str, checks: list, *, claim: bool = True, cwd: str | None = None, **kw) -> Path:
    """``folder``/goal.json (its agent id the folder's name unless ``agent=`` says otherwise)."""
    d = fleet / folder
    d.mkdir(parents=True, exist_ok=True)
    g = {"agent": folder, "state": "idle" if claim else "busy", "phase": "hecho" if claim else "haciendo",
         "dod_contract": checks, "cwd": cwd or str(d), "last_activity": time.time(), **kw}
    (d / "g.tmp").write_text(json.dumps(g))
    os.replace(d / "g.tmp", d / "goal.json")
    return d


def check(cmd: list[str], cid: str = "tests") -> dict:
    return {"id": cid, "kind": "cmd", "cmd": cmd, "required": True}


def start(cfg: Path, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
    """A real `fleetwatch run` (stderr to ``log`` when given)."""
    err = open(log, "ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen([*FW, "run", "--config", str(cfg)], env={**ENV, **(env or {})},
                                stdout=subprocess.DEVNULL, stderr=err)
    finally:
        if log is not None:
            err.close()


def rows(db: str, types: tuple[str, ...] = ()) -> list[dict]:
    """The log's rows as `tail --json` prints them ([] while it does not exist)."""
    if not os.path.exists(db):
        return []
    r = fw("tail", "--json", "-n", "100000", "--db", db)
    out = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    return [x for x in out if not types or x["type"] in types]


def verdicts(db: str) -> list[dict]:
    return [r["data"] for r in rows(db, ("dod.verdict",)) if r["data"].get("source") == "checks"]


def stop(p: subprocess.Popen, timeout: float = 30) -> int:
    if p.poll() is None:
        p.terminate()
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait(10)
