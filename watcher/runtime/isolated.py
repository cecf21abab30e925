"""Run a command where it cannot reach the watcher: ``run_isolated`` (DoD checks, verifiers).

Invariants
- The command runs in a PID namespace of its own, so it can neither see nor signal the watcher
  or any other process outside it (``kill -15 $PPID``, ``kill -9 -1``, ``pkill fleetwatch``: the
  watcher is not there to be named; its ``/proc`` is a fresh one showing only its own processes).
  Two ways, the first that works here (probed once per process: a tiny run must come back with
  the command numbered 3 or less):
  ``bwrap --dev-bind / / --unshare-pid --die-with-parent --proc /proc`` (bubblewrap: its own
  init is pid 1, the command pid 2, normal signal semantics), else ``unshare --pid --fork
  --kill-child --mount-proc`` (util-linux; with ``--user --map-current-user`` when not root) and a
  ``sh`` as the namespace's pid 1 that runs the command as pid 2 and hands back its status;
  last ``unshare-pid``, the same without ``--mount-proc`` where mounting is refused (a unit's
  system call filter): signals still reach nothing outside (a pid read in the host's ``/proc``
  names no process of the namespace), but the host's processes stay visible there.
  The network and user are the caller's. The file system too, except under bwrap the folders
  the caller names ``read_only`` (the log's folder and files and the watcher's state: a check or a
  verifier cannot delete, rewrite or fill the log it is judged into) are mounted read-only, each
  unless the command's own folder is inside it, and never a folder that holds the home folder;
  under unshare they stay writable (``doctor`` says so).
- Neither available (a kernel or a unit that forbids namespaces): the command runs as before,
  in its own session only, and :func:`isolation` says why (``doctor`` warns).
- A budget: stdout at most ``Budget.out_bytes`` (beyond: killed, ``too-large``); every file it
  writes at most ``Budget.file_bytes`` (RLIMIT_FSIZE through ``prlimit``: a bigger write fails
  with SIGXFSZ/EFBIG, the run is ``too-large``).
- Everything else as ``watcher.sources.command.run_bounded``: no shell of ours around the argv,
  its own process group killed whole at the timeout and when it ends, stderr never kept. A
  wrapper reports a death by signal N as status 128+N: read back as ``signal``.
- Never raises: every failure is a value.
"""
from __future__ import annotations

import os
import shutil
import threading
from typing import NamedTuple

from watcher.sources.command import MAX_OUTPUT, RunError, RunResult, Running, run_bounded

KINDS = ("auto", "bwrap", "unshare", "unshare-pid", "none")
PROBE_TIMEOUT = 10.0
SIGXFSZ = 25
# sh as pid 1: the command as pid 2 with sh's own stdin (an asynchronous list's stdin is /dev/null
# unless redirected from a descriptor saved before), its status handed back
_PID2 = 'exec 3<&0; "$@" 0<&3 3<&- & wait $!'


class Budget(NamedTuple):
    out_bytes: int = MAX_OUTPUT        # stdout kept; beyond it the run is killed (too-large)
    file_bytes: int | None = None      # RLIMIT_FSIZE for everything it writes (None: unlimited)


class Isolation(NamedTuple):
    kind: str                          # bwrap | unshare | none
    prefix: tuple[str, ...]            # put before the argv
    why: str = ""                      # kind none: why neither way works here


def _prefix(kind: str) -> tuple[str, ...] | None:
    if kind == "bwrap":
        exe = shutil.which("bwrap")
        return (exe, "--dev-bind", "/", "/", "--unshare-pid", "--die-with-parent", "--proc", "/proc",
                "--") if exe else None
    if kind in ("unshare", "unshare-pid"):
        exe = shutil.which("unshare")
        if not exe:
            return None
        user = () if os.geteuid() == 0 else ("--user", "--map-current-user")
        proc = ("--mount-proc",) if kind == "unshare" else ()
        return (exe, *user, "--pid", "--fork", "--kill-child", *proc, "--", "sh", "-c", _PID2, "fleetwatch-check")
    return None


_lock = threading.Lock()
_probed: dict[str, Isolation] = {}


def _works(prefix: tuple[str, ...]) -> str:
    """"" when a run through ``prefix`` is in a new PID namespace, else why not."""
    r = run_bounded([*prefix, "sh", "-c", "[ $$ -le 3 ]"], PROBE_TIMEOUT, 4096)
    if r.error_class is None:
        return ""
    return r.error or "failed"


def isolation(want: str = "auto") -> Isolation:
    """The way commands are isolated here (probed once per process and ``want``)."""
    with _lock:
        got = _probed.get(want)
        if got is not None:
            return got
        tried = []
        for kind in (("bwrap", "unshare", "unshare-pid") if want == "auto" else (want,)):
            if kind == "none":
                got = Isolation("none", (), "isolation turned off ([dod] check_isolation = \"none\")")
                break
            prefix = _prefix(kind)
            if prefix is None:
                tried.append(f"{kind}: not installed")
                continue
            why = _works(prefix)
            if not why:
                got = Isolation(kind, prefix)
                break
            tried.append(f"{kind}: {why}")
        if got is None:
            got = Isolation("none", (), "; ".join(tried) or "no way to isolate")
        _probed[want] = got
        return got


def protected(read_only: tuple[str, ...], cwd: str | None) -> list[str]:
    """The files and folders of ``read_only`` that exist and hold no part of ``cwd`` (real paths,
    once each). A folder that holds the home folder is never one (a log kept in ``~`` would make
    every cache a check writes there read-only): the files named beside it still are."""
    out: list[str] = []
    here = os.path.realpath(cwd) if cwd else None
    home = os.path.realpath(os.path.expanduser("~"))
    for d in read_only:
        real = os.path.realpath(d)
        if real in out or not (os.path.isfile(real) or os.path.isdir(real)):
            continue
        if os.path.isdir(real) and os.path.commonpath([home, real]) == real:
            continue
        if here is not None and os.path.commonpath([here, real]) == real:
            continue
        out.append(real)
    return out


def wrapped(argv: list[str], iso: Isolation, budget: Budget, read_only: list[str] | None = None) -> list[str]:
    """``argv`` behind the budget's file size limit and the isolation's prefix (under bwrap with
    each folder of ``read_only`` mounted read-only)."""
    prefix = list(iso.prefix)
    if iso.kind == "bwrap" and read_only:
        at = prefix.index("--")
        prefix[at:at] = [a for d in read_only for a in ("--ro-bind", d, d)]
    out = prefix + list(argv)
    if budget.file_bytes:
        exe = shutil.which("prlimit")
        if exe:
            out = [exe, f"--fsize={int(budget.file_bytes)}", "--", *out]
    return out


def run_isolated(argv: list[str], cwd: str | None = None, timeout: float = 300.0, stdin: bytes | None = None,
                 budget: Budget | None = None, *, running: Running | None = None, isolate: str = "auto",
                 read_only: tuple[str, ...] = ()) -> RunResult:
    """Run ``argv`` in ``cwd`` isolated (module invariants), ``stdin`` as its standard input
    (None: /dev/null), killed at ``timeout`` s, within ``budget`` (None: the default one), the
    folders of ``read_only`` not writable (under bwrap)."""
    budget = budget or Budget()
    if not argv:
        return RunResult(None, "cannot run an empty command", RunError.CANNOT_RUN)
    iso = isolation(isolate)
    if iso.kind != "none" and shutil.which(argv[0]) is None and os.sep not in argv[0]:
        return RunResult(None, f"command not found: {argv[0]}", RunError.NOT_FOUND)
    r = run_bounded(wrapped(argv, iso, budget, protected(read_only, cwd)), timeout, budget.out_bytes, cwd=cwd, running=running, stdin=stdin)
    code = r.exit_code
    if budget.file_bytes and code is not None and code in (-SIGXFSZ, 128 + SIGXFSZ):
        return RunResult(None, f"wrote a file larger than its budget ({budget.file_bytes} bytes)",
                         RunError.TOO_LARGE, code)
    if iso.kind != "none" and r.error_class is RunError.EXIT and code is not None and 128 < code <= 128 + 64:
        return RunResult(None, f"killed by signal {code - 128}", RunError.SIGNAL, code)
    return r


__all__ = ["Budget", "Isolation", "KINDS", "isolation", "protected", "run_isolated", "wrapped"]
