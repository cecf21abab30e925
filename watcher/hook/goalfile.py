"""goal.json I/O for ``fleetwatch hook``: hostile-input-safe reads and a read-modify-write that
never loses another writer's update. Standard library only.

Invariants:
- Reads never block and never follow a symlink: goal.json is opened ``O_NONBLOCK|O_NOFOLLOW`` and
  ``fstat``-checked; a FIFO, socket, device, directory or symlink is refused (left untouched), and
  so is a file over ``MAX_GOAL_BYTES`` (refused from its size, before reading anything).
- ``update_goal`` holds ``flock`` on the sidecar ``goal.json.lock`` (writers that take it are
  serialised), and also detects writers that do not: right before the rename it compares goal.json's
  identity (device, inode, size, mtime, ctime) with the file it read; if another writer replaced or
  rewrote it in between, the hook reads again and re-applies its change to the new content
  (bounded retries), so the other writer's keys are never reverted by a stale write-back. Where
  the kernel has ``renameat2(RENAME_EXCHANGE)`` (Linux), the new file is swapped in and the file it
  displaced is checked too: a writer that slipped in between the check and the swap gets its file
  put back and the hook tries again, so not even that microsecond window loses an update. A new
  goal.json is created with ``link`` (fails if another writer created one meanwhile).
- Temporary files are created ``O_CREAT|O_EXCL|O_NOFOLLOW`` under an unpredictable name in the same
  folder: a planted file or symlink is never written through; they are fsynced, renamed over the
  target (readers see the old or the new file, never a torn one) and never left behind.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time

MAX_GOAL_BYTES = 1_048_576   # as the watcher's default [[sources]] max_bytes
LOCK_TIMEOUT = 2.0           # seconds; past it the hook gives up (stderr line, exit 0)
MAX_RETRIES = 8              # re-reads when another writer keeps rewriting goal.json
_RO = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class HookError(Exception):
    """An error of the hook itself: reported as one stderr line, exit status still 0."""


def _identity(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def open_regular(path: str, cap: int = MAX_GOAL_BYTES) -> tuple[int, bytes, os.stat_result] | None:
    """(open fd, content, fstat) of a regular file, None when it does not exist. Raises HookError
    for a symlink, anything but a regular file, a file over ``cap`` bytes, or a read error. The fd
    stays open (the caller closes it): while it is, the file's inode number cannot be reused, so
    comparing identities later is not fooled by a new file that got the same number."""
    try:
        fd = os.open(path, _RO)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise HookError(f"{path} is a symlink: left untouched") from None
        raise HookError(f"cannot read {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HookError(f"{path} is not a regular file: left untouched")
        if st.st_size > cap:
            raise HookError(f"{path} is larger than {cap} bytes: left untouched")
        chunks, got = [], 0
        while got <= cap:
            try:
                b = os.read(fd, min(65536, cap + 1 - got))
            except BlockingIOError:
                raise HookError(f"{path} would block: left untouched") from None
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > cap:  # grew while read
            raise HookError(f"{path} is larger than {cap} bytes: left untouched")
        return fd, b"".join(chunks), st
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, cap: int = MAX_GOAL_BYTES) -> tuple[bytes, os.stat_result] | None:
    """(content, fstat) of a regular file, None when it does not exist (see ``open_regular``)."""
    got = open_regular(path, cap)
    if got is None:
        return None
    os.close(got[0])
    return got[1], got[2]


class Number:
    """A JSON number (or a NaN/Infinity constant) kept as its text, so that it is written back
    byte for byte: ``json`` would make ``1e400`` a float ``inf`` and write ``Infinity`` (not JSON:
    the watcher then refuses the whole goal.json), round ``0.10000000000000000555`` to ``0.1``,
    and refuse an integer of over 4300 digits. Not a str, int or float: the mapping, which reads
    only strings, lists and booleans, never mistakes one for a value of its own."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other) -> bool:
        return isinstance(other, Number) and other.text == self.text

    def __repr__(self) -> str:
        return f"Number({self.text!r})"

    def __str__(self) -> str:
        return self.text


def loads_exact(raw: bytes | str, **kw):
    """``json.loads`` (``kw`` passed on) with every number a :class:`Number` (see ``dumps_exact``)."""
    return json.loads(raw, parse_int=Number, parse_float=Number, parse_constant=Number, **kw)


def dumps_exact(doc, indent: int | None = 2) -> str:
    """``json.dumps`` (UTF-8 text, ``indent``) writing each :class:`Number` as the text it was
    read from: each is first written as a string tagged with a per-call nonce, then replaced."""
    texts: list[str] = []
    tag = os.urandom(8).hex()

    def number(o):
        if not isinstance(o, Number):
            raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
        texts.append(o.text)
        return f"{tag}-{len(texts) - 1}"

    out = json.dumps(doc, ensure_ascii=False, indent=indent, default=number)
    if not texts:
        return out
    parts = out.split(f'"{tag}-')
    for i in range(1, len(parts)):
        n, _, rest = parts[i].partition('"')
        parts[i] = texts[int(n)] + rest
    return "".join(parts)


def read_json(path: str, cap: int = MAX_GOAL_BYTES):
    """The parsed JSON of a regular file, or None (absent, refused, unreadable or not JSON)."""
    try:
        got = read_regular(path, cap)
        return loads_exact(got[0]) if got else None
    except (HookError, ValueError, RecursionError):
        return None


def surrogate_in(obj, char: str | None = None) -> tuple[str, str] | None:
    """(where, the character) of the first lone UTF-16 surrogate (``char`` only, if given) in a
    decoded JSON value, keys included: ``json.loads`` accepts ``"\\ud800"`` but such a string cannot
    be encoded as UTF-8, so goal.json could not be written. None if there is none. For the error
    path only (walks the whole value); iterative, so any depth is fine."""
    stack: list = [("", obj)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            for c in v if char is None else (char,) if char in v else ():
                if "\ud800" <= c <= "\udfff":
                    return where or "the value", c
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                key = str(k).encode("utf-8", "backslashreplace").decode()  # printable, escaped
                at = f"{where}.{key}" if where else key
                stack += [(at, x), (f"{at} (a key)", k)]
        elif isinstance(v, list):
            stack += [(f"{where}[{i}]", x) for i, x in reversed(list(enumerate(v)))]
    return None


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def write_tmp(folder: str, base: str, data: bytes, mode: int) -> str:
    """A new fsynced file in ``folder`` holding ``data``; its path. Never opens an existing path."""
    for _ in range(16):
        tmp = os.path.join(folder, f".{base}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except FileExistsError:
            continue  # planted or a collision: pick another name
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink(tmp)
            raise
        os.close(fd)
        return tmp
    raise HookError(f"cannot create a temporary file in {folder}")


def _unlink(p: str) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def _fsync_dir(folder: str) -> None:
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename itself is atomic


def write_atomic(path: str, data: bytes, mode: int) -> None:
    """Temporary file in the same folder (O_EXCL, no symlink followed), fsync, rename over ``path``,
    fsync the folder."""
    folder = os.path.dirname(path) or "."
    tmp = write_tmp(folder, os.path.basename(path), data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    _fsync_dir(folder)


def _lock(path: str, timeout: float) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise HookError(f"cannot open lock {path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise HookError(f"{path} is not a regular file: update skipped")
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise HookError(f"lock busy for {timeout:g}s, update skipped") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_swap: list = []  # [renameat2 or None, ctypes]: looked up once


def _renameat2():
    """renameat2 and ctypes, looked up once (done before a check, never between a check and the
    swap it guards)."""
    if not _swap:
        try:
            import ctypes

            f = ctypes.CDLL(None, use_errno=True).renameat2
            f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            _swap.extend((f, ctypes))
        except (OSError, AttributeError):
            _swap.extend((None, None))
    return _swap


def exchange(a: str, b: str) -> bool:
    """Atomically swap the files at ``a`` and ``b``; False where the kernel, libc or filesystem
    cannot (the caller falls back to a rename)."""
    f, ctypes = _renameat2()
    if f is None:
        return False
    if f(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    e = ctypes.get_errno()
    if e in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(e, os.strerror(e), b)


def _install(tmp: str, path: str, read: tuple | None) -> bool:
    """Put ``tmp`` in place of ``path`` if ``path`` is still the file read (identity ``read``; None:
    absent). False: another writer got there first (``path`` as that writer left it). The caller
    holds the read file open, so its inode number is not reused meanwhile."""
    if read is None:
        try:
            os.link(tmp, path)  # created only if still absent
        except FileExistsError:
            return False
        except OSError:  # no hard links here: check, then rename
            if _current(path) is not None:
                return False
            os.replace(tmp, path)
            return True
        _unlink(tmp)
        return True
    mine = os.lstat(tmp).st_ino
    _renameat2()
    if _current(path) != read:
        return False
    if not exchange(tmp, path):
        os.replace(tmp, path)
        return True
    try:
        displaced = _identity(os.lstat(tmp))[:4]  # a rename updates ctime: not compared here
    except FileNotFoundError:
        displaced = None
    if displaced == read[:4]:
        _unlink(tmp)  # what we swapped out is what we read: done
        return True
    # a writer replaced goal.json between the check and the swap: give its file back, try again
    if exchange(tmp, path) and os.lstat(tmp).st_ino != mine:
        exchange(tmp, path)  # yet another write landed meanwhile: the newest stays in place
    _unlink(tmp)
    return False


def _current(path: str) -> tuple | None:
    try:
        return _identity(os.lstat(path))
    except FileNotFoundError:
        return None


def update_goal(path: str, change, *, create: bool = True, timeout: float = LOCK_TIMEOUT,
                cap: int = MAX_GOAL_BYTES) -> bool:
    """Run ``change(doc_or_None) -> new_doc_or_None`` under the sidecar lock and store the result,
    re-reading and re-applying when another writer rewrote goal.json meanwhile (see module doc).

    Returns True when goal.json was rewritten. Raises HookError when goal.json is refused or cannot
    be parsed (left untouched), the lock stays busy past ``timeout``, or goal.json changed under the
    hook on every one of ``MAX_RETRIES`` attempts.
    """
    folder = os.path.dirname(path) or "."
    if create:
        os.makedirs(folder, exist_ok=True)
    elif not os.path.isdir(folder):
        return False
    lfd = _lock(path + ".lock", timeout)
    try:
        for _ in range(MAX_RETRIES):
            got = open_regular(path, cap)
            try:
                doc = None
                if got is not None:
                    try:
                        doc = loads_exact(got[1])
                    except (ValueError, RecursionError):
                        raise HookError(f"{path} is not valid JSON: left untouched") from None
                    if not isinstance(doc, dict):
                        raise HookError(f"{path} is not a JSON object: left untouched")
                new = change(doc)
                if new is None:
                    return False
                mode = got[2].st_mode & 0o7777 if got else 0o644 & ~_umask()
                try:
                    data = (dumps_exact(new) + "\n").encode()
                except UnicodeEncodeError:
                    bad = surrogate_in(doc) if doc is not None else None
                    if bad is None:
                        raise  # it came with the change: its caller names it
                    raise HookError(f"{path} has a lone UTF-16 surrogate ({bad[1]!a}) in {bad[0]}, "
                                    "not encodable as UTF-8: left untouched") from None
                tmp = write_tmp(folder, os.path.basename(path), data, mode)
                try:
                    if not _install(tmp, path, _identity(got[2]) if got else None):
                        _unlink(tmp)
                        continue  # another writer replaced or rewrote it since our read: again, on theirs
                except BaseException:
                    _unlink(tmp)
                    raise
            finally:
                if got is not None:
                    os.close(got[0])
            _fsync_dir(folder)
            return True
        raise HookError(f"{path} kept changing under the hook ({MAX_RETRIES} rewrites): update skipped")
    finally:
        os.close(lfd)  # releases the flock
