"""Signed links to the phone page: ``<public_url>/n/<notice>?t=<token>[&c=<items>]``.

A token is ``<expiry, base 36>.<HMAC-SHA256(key, "n1|<notice>|<expiry>"), base64url, 32 chars>``:
it names exactly one notice, expires (``[web] token_ttl``, 24 h by default) and holds nothing
but the expiry and the MAC (never an apprise secret, never the key). A push's link also carries
the conditions it is about: ``c=<seqs in base 36, dot-joined>-<HMAC(key, "c1|<notice>|<seqs>"),
16 chars>`` (at most ``MAX_ITEMS`` seqs): the page shows them and acts on them from the first
tap, before ``notice.sent`` is in the log; a ``c`` whose MAC does not hold is ignored (the
notice's own records still count), never trusted. The key is 32 random bytes
that fleetwatch creates on first use (mode 0600, folder 0700) at ``[web] key_file``, default
``$XDG_STATE_HOME/fleetwatch/web.key``, outside the event log: deleting it revokes every link.
Verification is constant-time (``hmac.compare_digest``). Used by the notifier (signing, when
``[web]`` is set) and by ``watcher.web`` (checking).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import stat

from events.errors import FleetwatchError
from watcher.config import Config, expand, parse_duration, xdg

NOTICE_RE = re.compile(r"^n[0-9a-f]{15}$")
TOKEN_RE = re.compile(r"^([0-9a-z]{1,10})\.([A-Za-z0-9_-]{32})$")
MAX_ITEMS = 100   # conditions a link names (a URL stays under ~1 KB)
ITEMS_RE = re.compile(r"^([0-9a-z]{1,13}(?:\.[0-9a-z]{1,13}){0,%d})-([A-Za-z0-9_-]{16})$" % (MAX_ITEMS - 1))
KEY_BYTES = 32


class KeyError_(FleetwatchError):
    """The web key file cannot be created or read safely."""

    exit_code = 2


def key_path(cfg: Config) -> str:
    web = cfg.web
    return expand(web.key_file) if web is not None and web.key_file else os.path.join(xdg("state"), "web.key")


def load_key(path: str, *, create: bool = True) -> bytes:
    """The HMAC key at ``path``, created (0600, O_EXCL, no symlink followed) when missing.
    Refuses a key file that is not a regular file, is readable by others, or is too short."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        if not create:
            raise KeyError_("no web key yet", op="web key", path=path) from None
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        key = os.urandom(KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return load_key(path, create=False)
        try:
            os.write(fd, key.hex().encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        return key
    except OSError as e:
        raise KeyError_(f"cannot open the web key: {e.strerror}", op="web key", path=path,
                        hint="it must be a regular file (not a symlink)") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyError_("the web key is not a regular file", op="web key", path=path)
        if st.st_mode & 0o077:
            raise KeyError_("the web key is readable by others", op="web key", path=path,
                            hint=f"chmod 600 {path}")
        raw = os.read(fd, 256).strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(raw.decode())
    except (ValueError, UnicodeDecodeError):
        key = b""
    if len(key) < 16:
        raise KeyError_("the web key is damaged", op="web key", path=path,
                        hint="delete it: a new one is made (old links stop working)")
    return key


def _mac(key: bytes, notice: str, exp: int) -> str:
    d = hmac.new(key, f"n1|{notice}|{exp}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(d).decode()[:32]


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def sign(key: bytes, notice: str, now: float, ttl: float) -> str:
    exp = int(now + ttl)
    return f"{_b36(exp)}.{_mac(key, notice, exp)}"


def check(key: bytes, notice: str, token: str | None, now: float) -> bool:
    """True only for an unexpired token made with ``key`` for exactly this notice."""
    return _verdict(key, notice, token, now) == "ok"


def expired(key: bytes, notice: str, token: str | None, now: float) -> bool:
    """A token made with ``key`` for this notice that has expired (the page offers a way on)."""
    return _verdict(key, notice, token, now) == "expired"


def _verdict(key: bytes, notice: str, token: str | None, now: float) -> str:
    if not token or not NOTICE_RE.fullmatch(notice or ""):
        return "bad"
    m = TOKEN_RE.fullmatch(token)   # whole: "$" alone also matches before a final newline
    if m is None:
        return "bad"
    exp = int(m.group(1), 36)
    if not hmac.compare_digest(m.group(2), _mac(key, notice, exp)):
        return "bad"
    return "expired" if now >= exp else "ok"


def b36(n: int) -> str:
    return _b36(n)


def items_of(key: bytes, notice: str, seqs: list[int]) -> str:
    """The ``c`` of a notice's links: its condition seqs, signed ("" for none, or beyond
    ``MAX_ITEMS``: the page then knows the conditions from ``notice.sent`` alone)."""
    seqs = sorted({s for s in seqs if isinstance(s, int) and s > 0})
    if not 0 < len(seqs) <= MAX_ITEMS:
        return ""
    items = ".".join(_b36(s) for s in seqs)
    return f"{items}-{_cmac(key, notice, items)}"


def parse_items(key: bytes, notice: str, c: str | None) -> list[int]:
    """The seqs a ``c`` names when its MAC holds for ``key`` and ``notice``; [] otherwise."""
    m = ITEMS_RE.fullmatch(c or "")
    if m is None or not hmac.compare_digest(m.group(2), _cmac(key, notice, m.group(1))):
        return []
    return [int(x, 36) for x in m.group(1).split(".")]


def _cmac(key: bytes, notice: str, items: str) -> str:
    d = hmac.new(key, f"c1|{notice}|{items}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(d).decode()[:16]


def cond_seq(cid: str) -> int | None:
    """The seq of a condition id (``subject|CLASS#seq``), or None."""
    tail = cid.rpartition("#")[2]
    return int(tail) if tail.isdigit() else None


def public_base(cfg: Config) -> str:
    web = cfg.web
    if web is None:
        return ""
    return (web.public_url or f"http://{web.listen}").rstrip("/")


def link(cfg: Config, key: bytes, notice: str, now: float, items: str = "", action: str = "") -> str:
    """The page link for one notice (empty without ``[web]``); ``items``: :func:`items_of` of its
    conditions; ``action`` (ack, snooze): the URL of that button's POST instead of the page."""
    if cfg.web is None:
        return ""
    ttl = parse_duration(cfg.web.token_ttl, "web.token_ttl")
    where = f"/{action}" if action else ""
    c = f"&c={items}" if items else ""
    return f"{public_base(cfg)}/n/{notice}{where}?t={sign(key, notice, now, ttl)}{c}"


def _file_id(path: str) -> tuple[int, ...] | None:
    """What changes when the key file is deleted, replaced, rewritten or chmod-ed (ctime)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size, st.st_mode)


class CurrentKey:
    """The key as its file holds it now, for the page (every request) and the notifier (every
    push): deleting or replacing the file revokes every link at once and the next push is
    signed with the new key (a missing one is made anew, as at start). ``get`` is one stat while
    the file is unchanged; a key that cannot be used (readable by others, damaged) is None, and
    ``problem`` says why (the caller logs it once per change)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.key: bytes | None = None
        self.problem: FleetwatchError | None = None
        self._id: tuple[int, ...] | None = None
        self.changes = -1   # how often the file changed after the first load

    def get(self) -> bytes | None:
        fid = _file_id(self.path)
        if fid is None or fid != self._id:
            try:
                self.key, self.problem = load_key(self.path), None
            except FleetwatchError as e:
                self.key, self.problem = None, e
            self._id = _file_id(self.path)
            self.changes += 1
        return self.key

