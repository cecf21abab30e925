"""The inotify fallback (issue 23), with a real `fleetwatch run`: when inotify cannot start (the
user's inotify instances all taken: the kernel's ``max_user_instances``) or watchdog cannot be
imported, the watcher polls every ``watch.interval``, says so once, and still sees every change.

The limit is reached for real: a helper process running as an otherwise unused uid takes every
inotify instance that uid may have, and the watcher runs as that uid (root only; nobody else's
processes are touched)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from events.log import EventLog
from tests.support.exe import FLEETWATCH
from tests.support.livefleet import goal, wait_for

UID = 61_977            # no account, no process: its inotify instances are ours to exhaust
EXE = FLEETWATCH
WARNING = "inotify unavailable"

HOLDER = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print(len(fds), ctypes.get_errno(), flush=True)
sys.stdin.read()
"""


def run_and_see_a_change(base: str, user: int | None, env: dict) -> str:
    """`fleetwatch run` (as ``user``) on one agent; a change must be recorded; its stderr."""
    fleet = os.path.join(base, "fleet")
    goal(fleet, "a1")
    cfg = os.path.join(base, "c.toml")
    with open(cfg, "w") as f:
        f.write(f'[store]\npath = "{base}/e.db"\n[watch]\ninterval = "200ms"\nresync = "1h"\n'
                f'[classify]\nbusy_silence = "30d"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet}/*/goal.json"\n')
    if user is not None:
        for dirpath, dirs, files in os.walk(base):
            for n in [dirpath, *(os.path.join(dirpath, x) for x in dirs + files)]:
                os.chown(n, user, user)
    kw = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    p = subprocess.Popen([EXE, "run", "--config", cfg, "--log-level", "warning"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, cwd=base, **kw)
    try:
        db = os.path.join(base, "e.db")

        def classes() -> list[str]:
            if not os.path.exists(db):
                return []
            lg = EventLog(db, readonly=True)
            try:
                return [r.event.to for r in lg.read(0, types=["agent.classified"])]
            finally:
                lg.close()

        wait_for(lambda: classes() == ["TRABAJANDO"], "the first classification", p)
        goal(fleet, "a1", state="waiting", phase="preguntando")   # a real write inotify would report
        if user is not None:
            os.chown(os.path.join(fleet, "a1", "goal.json"), user, user)
        wait_for(lambda: classes() == ["TRABAJANDO", "RECLAMA"], "the change (polling every interval)", p)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()
    return err.decode()


@pytest.fixture
def base():
    d = tempfile.mkdtemp(prefix="fw-inotify-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the watcher as an unused uid")
def test_inotify_instance_limit_reached_means_polling_said_once(base):
    try:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER], user=UID, group=UID, extra_groups=[],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    except PermissionError:   # a Python under /root (pyenv) on a machine where /root is 0700
        pytest.skip(f"this checkout's Python cannot be run by uid {UID}: every folder above it must be "
                    "searchable (.ci/run does `chmod o+x /root`)")
    try:
        n, errno_ = holder.stdout.readline().split()
        assert int(errno_) == 24, "the uid's inotify instances could not be exhausted (EMFILE expected)"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": base, "XDG_STATE_HOME": base,
               "XDG_CONFIG_HOME": base, **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}
        err = run_and_see_a_change(base, UID, env)
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert err.count(WARNING) == 1 and "polling every interval" in err, err


def test_watchdog_missing_means_polling_said_once(base):
    shadow = os.path.join(base, "shadow", "watchdog")
    os.makedirs(shadow)
    with open(os.path.join(shadow, "__init__.py"), "w") as f:
        f.write("raise ImportError('watchdog is not installed here')\n")
    path = [os.path.join(base, "shadow"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "HOME": base, "XDG_STATE_HOME": base,
           "XDG_CONFIG_HOME": base}
    err = run_and_see_a_change(base, None, env)             # the change is still seen, by polling
    assert err.count(WARNING) == 1 and "polling every interval" in err, err
