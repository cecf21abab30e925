"""The process groups of the DoD checks running now, kept on disk so that none outlives the watcher.

A check runs in its own process group (``watcher.sources.command.run_bounded``), killed whole at
its timeout; but a watcher that stops (SIGTERM, Ctrl-C, a reload) or is killed -9 mid-check used
to leave the group running, whatever it held (``sleep infinity``: forever).

Invariants
- ``Ledger`` is the ``pgids`` set of the checker's ``Running``: ``run_bounded`` adds a group when
  it starts and discards it before reaping its leader; each member is also one file
  ``<folder>/<pgid>`` holding the leader's start time and the watcher's pid and start time.
- ``reap`` (a checker starting) kills the groups recorded by a watcher that is no longer alive,
  then forgets them. A group is killed only when it is provably the recorded one: its leader is
  alive with the recorded start time, or it has no leader at all (Linux never reuses a number
  still naming a process group, so a leaderless group with that number is still ours); a live
  process with that pid and another start time is a stranger's and is left alone. The groups of
  watcher still running (another, or this process's own) are never touched.
- Never raises: a folder that cannot be written only loses the restart's clean-up.
"""
from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("fleetwatch.checker")


def _stat(pid: int) -> tuple[int, int] | None:
    """(process group id, start time in clock ticks) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2:].split()
    try:
        if rest[0] in (b"Z", b"X"):   # a zombie is no member: its number is free once reaped
            return None
        return int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def _members(pgid: int) -> list[int]:
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if n.isdigit():
            st = _stat(int(n))
            if st is not None and st[0] == pgid:
                out.append(int(n))
    return out


class Ledger(set):
    """A set of process group ids that is also one file per group in ``folder``."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder
        me = _stat(os.getpid())
        self.owner = f"{os.getpid()} {me[1] if me else 0}"
        self.warned = False

    def add(self, pgid: int) -> None:       # type: ignore[override]
        super().add(pgid)
        st = _stat(pgid)
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            tmp = os.path.join(self.folder, f".{pgid}.tmp")
            with open(tmp, "w") as f:
                f.write(f"{st[1] if st else 0} {self.owner}\n")
            os.replace(tmp, os.path.join(self.folder, str(pgid)))
        except OSError as e:
            if not self.warned:   # once: a folder that cannot be written stays so, check after check
                self.warned = True
                log.warning("cannot record the running checks in %s (%s): a watcher killed -9 now leaves "
                            "them running", self.folder, e.strerror)

    def discard(self, pgid: int) -> None:   # type: ignore[override]
        super().discard(pgid)
        try:
            os.unlink(os.path.join(self.folder, str(pgid)))
        except OSError:
            pass


def _alive(owner: str) -> bool:
    try:
        pid, start = (int(x) for x in owner.split())
    except ValueError:
        return False
    st = _stat(pid)
    return st is not None and st[1] == start


def reap(folder: str) -> int:
    """Kill the check groups a dead watcher left running (see the invariants); how many."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    killed = 0
    for n in names:
        if not n.isdigit():
            continue
        path = os.path.join(folder, n)
        try:
            with open(path) as f:
                start, owner = f.read().split(" ", 1)
            start_ticks = int(start)
        except (OSError, ValueError):
            start_ticks, owner = -1, ""
        owner = owner.strip()
        if _alive(owner):
            continue   # a watcher still running (this one too): its checks are its own
        pgid = int(n)
        leader = _stat(pgid)
        ours = leader[1] == start_ticks if leader is not None else True
        if ours and _members(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        try:
            os.unlink(path)
        except OSError:
            pass
    if killed:
        log.warning("killed %d DoD check process group(s) left running by a watcher that died", killed)
    return killed
