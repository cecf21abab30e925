"""What runs in a tmux pane, read from ``/proc`` (Linux): is a Claude Code process there?

The tmux source asks this in its poll thread, never in the tick, for the panes it was asked
about: the panes hooks recorded (goal.json ``tmux.pane``) and the live windows no agent matched
(candidates for "a Claude Code session runs here", see ``orphans.py``). No screen is read.

- ``claude_in(pane_pid, pid)``: with the pid the hook recorded, True while that process lives
  (not a zombie) and descends from the pane's process; without one, True while any process of the
  pane's tree (the pane's own process included: ``tmux new-window claude``) is Claude Code.
  None when nothing can be said (no ``/proc``, the pane's process already gone).
- ``is_claude(pid)``: the process's name (``comm``), executable or argv[0] is ``claude``
  (``claude.exe`` of the npm package, the native installer's ``claude``), or a node running the
  npm package's ``cli.js``.
At most ``MAX_PROCS`` processes of a tree are looked at, ``MAX_DEPTH`` levels deep.
"""
from __future__ import annotations

import os

CLAUDE_NAMES = frozenset({"claude", "claude.exe"})
MAX_PROCS = 256
MAX_DEPTH = 12
_CAP = 4096  # bytes read of a /proc file


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, _CAP)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, None if it is gone."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return None
    rest = raw[raw.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses
    try:
        return rest[0].decode("ascii", "replace"), int(rest[1])
    except (IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids[:64]:
        raw = _read(f"/proc/{pid}/task/{tid}/children")
        if raw:
            out += [int(x) for x in raw.split() if x.isdigit()]
    return out


def is_claude(pid: int) -> bool:
    comm = (_read(f"/proc/{pid}/comm") or b"").strip().decode("utf-8", "replace")
    if comm in CLAUDE_NAMES:
        return True
    try:
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("claude"):
            return True
    except OSError:
        pass
    argv = (_read(f"/proc/{pid}/cmdline") or b"").split(b"\0")
    if os.path.basename(argv[0]).decode("utf-8", "replace") in CLAUDE_NAMES:
        return True
    return comm.startswith("node") and any(b"claude-code/cli" in a for a in argv[1:3])


def descends(pid: int, ancestor: int) -> bool:
    """``pid`` lives and ``ancestor`` is it or one of its parents (``MAX_DEPTH`` levels)."""
    cur = pid
    for _ in range(MAX_DEPTH):
        st = _stat(cur)
        if st is None or (cur == pid and st[0] in ("Z", "X")):
            return False
        if cur == ancestor:
            return True
        if st[1] <= 1:
            return False
        cur = st[1]
    return False


def claude_in(pane_pid: int | None, pid: int | None = None) -> bool | None:
    """Is Claude Code running in the pane whose process is ``pane_pid`` (see the module doc)?"""
    if not pane_pid or not os.path.isdir("/proc/self"):
        return None
    if not alive(pane_pid):
        return None
    if pid:
        return descends(pid, pane_pid)
    todo, seen, depth = [pane_pid], 0, 0
    while todo and seen < MAX_PROCS and depth <= MAX_DEPTH:
        nxt: list[int] = []
        for p in todo:
            seen += 1
            if is_claude(p) and alive(p):
                return True
            nxt += children(p)
        todo, depth = nxt[:MAX_PROCS], depth + 1
    return False
