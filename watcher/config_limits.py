"""Range checks of the config and safe reads of small files (imported by ``watcher/config.py``).

- ``check_ranges`` walks every key of a decoded config, whatever section added it: each duration
  (a field typed ``str | int``, also in lists and tables) must parse and be at most a century (36500d);
  each integer must be 0 … 10⁹; each float finite and not negative. Then the keys with tighter
  bounds (``SPECIFIC``). Every problem names its key (``sources[1].timeout``); exit 2 at the CLI.
- A source's ``timeout`` must stay under ``MAX_SOURCE_TIMEOUT``: half the shipped unit's
  ``WatchdogSec`` (the ping interval), so even a poll that ran its full timeout in the tick
  could never get the service killed by the watchdog and restarted into the same hang.
- ``read_regular`` opens with ``O_NONBLOCK`` and checks the open descriptor (``fstat``): a FIFO,
  socket, device or folder is refused before one byte is read, and at most ``limit + 1`` bytes
  are ever read (so nothing can block or balloon on it).
- ``private_dir`` creates a folder (and missing parents) 0700 whatever the umask.
"""
from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable
from typing import Any

import msgspec

from events.private import private_dir  # noqa: F401  (re-exported: watcher code imports it from here)

WATCHDOG_SEC = 30.0                 # systemd/fleetwatch.service: WatchdogSec=30
MAX_SOURCE_TIMEOUT = WATCHDOG_SEC / 2
MAX_CONFIG_BYTES = 1 << 20
MAX_COUNT = 10 ** 9
MAX_BYTES_CAP = 256 << 20           # sources[].max_bytes
_DUR_TYPE = str | int

# key (with [] for any index) -> (low, high, what): seconds for durations, else the number itself
SPECIFIC: dict[str, tuple[float, float, str]] = {
    "watch.interval": (0.05, 86400.0, "between 50ms and 1d"),
    "watch.debounce": (0.0, 10.0, "between 0ms and 10s"),
    "watch.resync_rate": (1, 10_000_000, "between 1 and 10000000 files a second"),
    "sources[].timeout": (0.05, MAX_SOURCE_TIMEOUT,
                          f"between 50ms and {MAX_SOURCE_TIMEOUT:g}s (the service watchdog, "
                          f"WatchdogSec={WATCHDOG_SEC:g}, must survive a stuck source)"),
    "sources[].max_bytes": (1, MAX_BYTES_CAP, f"between 1 and {MAX_BYTES_CAP} bytes"),
    "notify.timeout": (0.05, 600.0, "between 50ms and 10m"),
    "dod.check_timeout": (0.1, 86400.0, "between 100ms and 1d (checks run off the tick: no watchdog limit)"),
    "dod.check_max_bytes": (1, MAX_BYTES_CAP, f"between 1 and {MAX_BYTES_CAP} bytes"),
    "notify.retry[]": (0.0, 86400.0, "between 0s and 1d"),
}


def _is_dur(t: Any) -> bool:
    if t == _DUR_TYPE:
        return True
    args = getattr(t, "__args__", None) or ()
    return any(_is_dur(a) for a in args)


def _generic(key: str) -> str:
    out, depth = [], 0
    for ch in key:
        if ch == "[":
            depth += 1
            out.append("[]")
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _values(key: str, v: Any):
    """(key, scalar) for a scalar, a list or a table of them."""
    if isinstance(v, list):
        for i, x in enumerate(v):
            yield from _values(f"{key}[{i}]", x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _values(f"{key}.{k}", x)
    else:
        yield key, v


def _walk(obj: Any, prefix: str, dur: Callable[[object, str], float], bad, found: dict[str, float]) -> None:
    for f in msgspec.structs.fields(type(obj)):
        if f.name.startswith("_") or f.encode_name.startswith("_"):
            continue
        v = getattr(obj, f.name)
        key = f"{prefix}{f.encode_name}"
        if isinstance(v, msgspec.Struct):
            _walk(v, key + ".", dur, bad, found)
            continue
        if isinstance(v, list) and v and all(isinstance(x, msgspec.Struct) for x in v):
            for i, x in enumerate(v):
                _walk(x, f"{key}[{i}].", dur, bad, found)
            continue
        is_dur = _is_dur(f.type)
        for k, x in _values(key, v):
            if x is None:
                continue
            if is_dur and not isinstance(x, (float, list, dict)) and (isinstance(x, str) or isinstance(x, int)):
                found[k] = dur(x, k)
            elif isinstance(x, bool) or isinstance(x, str):
                continue
            elif isinstance(x, int):
                if not 0 <= x <= MAX_COUNT:
                    raise bad(k, f"must be between 0 and {MAX_COUNT}, got {x}")
                found[k] = float(x)
            elif isinstance(x, float):
                if not math.isfinite(x) or x < 0:
                    raise bad(k, f"must be a finite number >= 0, got {x}")
                found[k] = x


def check_ranges(cfg: Any, bad: Callable[[str, str], Exception], dur: Callable[[object, str], float]) -> None:
    """Raise ``bad(key, message)`` for the first value out of range (see the module docstring)."""
    found: dict[str, float] = {}
    _walk(cfg, "", dur, bad, found)
    for key, secs in found.items():
        lim = SPECIFIC.get(_generic(key))
        if lim is not None and not lim[0] <= secs <= lim[1]:
            raise bad(key, f"must be {lim[2]}")


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


class NotRegular(OSError):
    """The path is no regular file (``kind``: "a FIFO", "a folder", ...); nothing was read."""

    strerror: str   # always set (OSError's may be None)

    def __init__(self, path: str, kind: str):
        super().__init__(f"{kind}, not a regular file")
        self.strerror = f"{kind}, not a regular file"
        self.filename = path
        self.kind = kind


class TooLarge(OSError):
    def __init__(self, path: str, limit: int):
        super().__init__(f"larger than {limit} bytes")
        self.strerror = f"larger than {limit} bytes"
        self.filename = path


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """An fd opened read-only, non-blocking, close-on-exec, and its fstat; raises NotRegular
    (fd closed) for anything but a regular file. A FIFO opens at once with O_NONBLOCK."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(path, file_kind(st.st_mode))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_fd(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (reads until EOF or the limit)."""
    parts: list[bytes] = []
    n = 0
    while n < limit:
        chunk = os.read(fd, min(limit - n, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        n += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; NotRegular / TooLarge / OSError."""
    fd, st = open_regular(path)
    try:
        if st.st_size > limit:
            raise TooLarge(path, limit)
        raw = read_fd(fd, limit + 1)
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise TooLarge(path, limit)
    return raw
