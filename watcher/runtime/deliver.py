"""Delivery through apprise: destinations, top priority for urgent pushes, secrets kept out.

- :class:`Deliverer` holds one apprise object per destination: ``""`` the top-level ``urls`` (and
  ``[notify] config``), ``route:<i>`` each ``[[notify.routes]]``, ``escalate`` the
  ``escalate_urls``; each also in a *priority* variant (:func:`priority_url`: the highest
  priority the service takes, e.g. ntfy ``priority=max``, gotify ``emergency``). Bodies are sent
  as plain text (``body_format="text"``), so HTML channels such as email keep one line per item.
- :func:`secrets_of` / :func:`all_secrets`: every component of every configured URL (including
  the ones inside an apprise config file and the heartbeat URL) is redacted from every log line
  and event text (:class:`_RedactFilter` on apprise's and the HTTP stack's loggers).
- :func:`url_problems`: what apprise cannot use among the configured URLs, named by key and
  reason (unknown scheme, a plugin whose optional package is missing, bad syntax), never showing
  the URL itself.
- :class:`Causes`: apprise's own words on why one send failed (HTTP status, connection refused,
  DNS), redacted, for the commands that report one send (`notify-test`, `notify-stopped`).
- ntfy action buttons: a push with ``actions`` (:func:`ntfy_actions`: ntfy's header format, e.g.
  ``http, Acknowledge, URL, method=POST, clear=true; view, Open, URL``) goes to every ``ntfy://``
  / ``ntfys://`` URL of its destination with apprise's own ``actions`` URL parameter, which its
  ntfy plugin sends as the ``X-Actions`` header; other services get the push as it is (its body
  ends with the link). URLs of an apprise config file get no buttons.
"""
from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import msgspec

from projections.notify.fold import redact
from watcher.config import Config, expand
from watcher.config_limits import open_regular, read_fd

log = logging.getLogger("fleetwatch.notify")

# scheme -> (query parameter, value): the top priority apprise maps for that service.
# Pushover's "emergency" re-alerts until acknowledged in its own app; "high" is its top alert
# that fleetwatch's own escalation then follows up.
PRIORITY = {"ntfy": ("priority", "max"), "ntfys": ("priority", "max"), "gotify": ("priority", "emergency"),
            "gotifys": ("priority", "emergency"), "pover": ("priority", "high"), "prowl": ("priority", "emergency"),
            "psafer": ("priority", "emergency"), "psafers": ("priority", "emergency"),
            "lametric": ("priority", "critical"), "dapnet": ("priority", "emergency"),
            "join": ("priority", "emergency"), "opsgenie": ("priority", "emergency")}
_URLISH = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def priority_url(url: str) -> str:
    """``url`` asking its service for the top priority (unchanged when the scheme has none or
    the URL already names a priority)."""
    scheme = url.partition("://")[0].lower()
    p = PRIORITY.get(scheme)
    if p is None or re.search(r"[?&]priority=", url):
        return url
    return f"{url}{'&' if '?' in url else '?'}{p[0]}={p[1]}"


NTFY = ("ntfy", "ntfys")


def ntfy_actions(buttons: list[tuple[str, str, str]]) -> str:
    """ntfy's action header (its simple format) for ``(kind, label, url)`` buttons, ``kind``
    ``http`` (a POST, the notification cleared after) or ``view`` (opens the URL). A URL holding
    a comma, a semicolon or a quote (which that format would split) is left out; at most 3 (ntfy's
    limit)."""
    out = []
    for kind, label, url in buttons:
        if not url or any(ch in url for ch in ",;\"'") or any(ch in label for ch in ",;=\"'"):
            continue
        out.append(f"http, {label}, {url}, method=POST, clear=true" if kind == "http" else f"view, {label}, {url}")
    return "; ".join(out[:3])


def with_actions(url: str, actions: str) -> str:
    """An ntfy URL carrying ``actions`` (apprise's ``actions`` parameter); other URLs unchanged."""
    if not actions or url.partition("://")[0].lower() not in NTFY or re.search(r"[?&]actions=", url):
        return url
    return f"{url}{'&' if '?' in url else '?'}actions={quote(actions, safe='')}"


def secrets_of(urls: list[str]) -> tuple[str, ...]:
    """Every component of the URLs that could be a credential (user, password, path parts,
    query values, host), longest first, so redaction never leaves a piece behind."""
    out: set[str] = set()
    for u in urls:
        if not u:
            continue
        out.add(u)
        try:
            p = urlsplit(u)
        except ValueError:
            continue
        parts = [p.username, p.password, p.hostname, *p.path.split("/"),
                 *(v for _, v in parse_qsl(p.query, keep_blank_values=True))]
        netloc = p.netloc.rpartition("@")[0]
        parts += netloc.split(":")
        for x in parts:
            if x and len(x) >= 4:
                out.add(x)
                out.add(unquote(x))
    return tuple(sorted(out, key=len, reverse=True))


def config_file_urls(path: str | None) -> list[str]:
    """The URLs an apprise config file holds (as apprise reads them, with their tokens), plus
    anything URL-like in its raw text: all of it is secret. Never raises."""
    if not path:
        return []
    p = expand(path)
    found: list[str] = []
    try:  # O_NONBLOCK + fstat: a FIFO or a device there never blocks the start (nor is parsed)
        fd, _ = open_regular(p)
        try:
            found += _URLISH.findall(read_fd(fd, 1_048_576).decode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        return []
    try:
        import apprise

        ac = apprise.AppriseConfig()
        ac.add(p)
        ap = apprise.Apprise()
        ap.add(ac)
        for server in ap:
            try:
                found.append(server.url(privacy=False))
            except Exception:
                continue
    except Exception:
        pass
    return found


def configured_urls(cfg: Config) -> list[str]:
    n = cfg.notify
    return [*n.urls, *(u for r in n.routes for u in r.urls), *n.escalate_urls]


def all_secrets(cfg: Config) -> tuple[str, ...]:
    """What must never appear in a log line or an event: every URL component of urls, routes,
    escalate_urls, the apprise config file and the heartbeat URL."""
    n = cfg.notify
    return secrets_of([*configured_urls(cfg), *config_file_urls(n.config), n.heartbeat_url])


def url_problems(cfg: Config) -> list[str]:
    """One line per configured URL apprise cannot use, naming the key and why (never the URL)."""
    import apprise
    from apprise.manager_plugins import NotificationManager

    mgr = NotificationManager()
    n = cfg.notify
    keyed = [(f"notify.urls[{i}]", u) for i, u in enumerate(n.urls)]
    keyed += [(f"notify.routes[{i}].urls[{j}]", u) for i, r in enumerate(n.routes) for j, u in enumerate(r.urls)]
    keyed += [(f"notify.escalate_urls[{i}]", u) for i, u in enumerate(n.escalate_urls)]
    out = []
    for key, u in keyed:
        scheme = u.partition("://")[0].lower() if "://" in u else ""
        if not scheme:
            out.append(f"{key}: not a URL (expected scheme://...)")
            continue
        if scheme not in mgr:
            out.append(f"{key}: {scheme!r} is not an apprise service")
            continue
        plugin = mgr[scheme]
        if not getattr(plugin, "enabled", True):
            req = (getattr(plugin, "requirements", None) or {}).get("packages_required") or "its optional package"
            req = req if isinstance(req, str) else " ".join(req)
            out.append(f"{key}: the {scheme!r} plugin needs the optional package {req} (pip install {req})")
            continue
        if apprise.Apprise.instantiate(u) is None:
            out.append(f"{key}: not a valid {scheme!r} URL (see the apprise wiki for its syntax)")
    if n.config and not os.path.isfile(expand(n.config)):
        out.append("notify.config: the apprise config file does not exist")
    return out


def exit_if_deliveries_hang(code: int) -> None:
    """End the process now when apprise still runs a delivery it gave up on. A receiver that
    trickles its answer (a byte within every read timeout) outlives apprise's overall timeout: the
    call returns, its thread reads on, and the interpreter joins that thread at exit, so a stopped
    `fleetwatch run` (watcher.stopped recorded, log closed) lived on for as long as the receiver
    held the connection. Call it only when everything is recorded and closed (apprise's own CLI
    does the same)."""
    running = getattr(sys.modules.get("apprise.apprise"), "any_abandoned_calls_still_running", None)
    if running is None or not running():
        return
    log.warning("a push receiver still holds a delivery that timed out: exiting without waiting for it")
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


class _RedactFilter(logging.Filter):
    def __init__(self, secrets: tuple[str, ...]):
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        record.msg, record.args = redact(msg, self.secrets), ()
        return True


# apprise and the HTTP stack under it print URLs (with tokens in paths) at DEBUG/INFO
PINNED_LOGGERS = ("apprise", "urllib3", "requests", "requests_oauthlib", "httpx", "httpcore")


def pin_apprise_logger(secrets: tuple[str, ...] = ()) -> None:
    """Keep apprise and its HTTP libraries at WARNING and redact whatever they still log."""
    for name in PINNED_LOGGERS:
        lg = logging.getLogger(name)
        lg.setLevel(logging.WARNING)
        for f in list(lg.filters):
            if isinstance(f, _RedactFilter):
                lg.removeFilter(f)
        lg.addFilter(_RedactFilter(secrets))


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"()\[\]]+)")
_CAUSED = re.compile(r"Caused by (\w+)")


def _socket_cause(msg: str) -> str:
    """The root of apprise's "Socket Exception: ..." line: the OS's words (``Connection
    refused``, ``Name or service not known``), else the exception's name, else the line."""
    found = _ERRNO.findall(msg)
    if found:
        return found[-1].strip()
    caused = _CAUSED.findall(msg)
    return caused[-1] if caused else msg.partition(":")[2].strip()


class Causes(logging.Handler):
    """apprise's own words on why one send failed (``with Causes(secrets) as c: d.send(...)``,
    then ``c.lines``): its warnings and errors ("error=500", "A Connection error occurred") and
    the socket error under them, which it logs only at DEBUG ("Connection refused"), so the
    ``apprise`` logger is at DEBUG for the block and back after. Every line is redacted (the
    URLs' tokens and hosts never show); the caller escapes it. For one command's send
    (`notify-test`, `notify-stopped`), not for the watcher's: its level is process-wide."""

    MAX = 6

    def __init__(self, secrets: tuple[str, ...] = ()):
        super().__init__(logging.DEBUG)
        self.secrets = secrets
        self.lines: list[str] = []
        self._lg = logging.getLogger("apprise")
        self._level = self._lg.level

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        if record.levelno >= logging.WARNING:
            line = msg
        elif msg.startswith("Socket Exception"):
            line = f"socket: {_socket_cause(msg)}"
        else:
            return  # the URL, the payload, the response body: not causes, and not to be shown
        line = redact(" ".join(line.split()), self.secrets)[:300]
        if line not in self.lines and len(self.lines) < self.MAX:
            self.lines.append(line)

    def __enter__(self) -> "Causes":
        self._level = self._lg.level
        self._lg.addHandler(self)
        self._lg.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *_: object) -> None:
        self._lg.setLevel(self._level)
        self._lg.removeHandler(self)


class Outcome(msgspec.Struct, frozen=True):
    ok: bool
    error: str = ""       # redacted, short
    partial: bool = False


class Deliverer:
    """apprise behind one method. Build and use it in one thread."""

    def __init__(self, cfg: Config, secrets: tuple[str, ...] | None = None):
        self.cfg = cfg
        self.timeout = cfg.dur("notify.timeout")
        self.secrets = all_secrets(cfg) if secrets is None else secrets
        pin_apprise_logger(self.secrets)
        self._aps: dict[tuple[str, bool], Any] = {}
        self._bad: dict[tuple[str, bool], int] = {}
        self._ap("", False)
        self.bad = self._bad[("", False)]
        if self.bad > 0:
            log.warning("notify: %d of %d notify.urls are not valid apprise URLs (ignored)", self.bad,
                        len(cfg.notify.urls))

    def _urls(self, route: str) -> list[str]:
        n = self.cfg.notify
        if route.startswith("route:"):
            i = int(route.partition(":")[2])
            return list(n.routes[i].urls) if i < len(n.routes) else list(n.urls)
        if route == "escalate":
            return list(n.escalate_urls or n.urls)
        return list(n.urls)

    def _ap(self, route: str, priority: bool, actions: str = ""):
        """The apprise object of a destination (built on first use); with ``actions`` and an ntfy
        URL among the destination's, one for this push (its buttons are the push's own)."""
        key = (route, priority)
        urls = self._urls(route)
        per_push = bool(actions) and any(u.partition("://")[0].lower() in NTFY for u in urls)
        ap = None if per_push else self._aps.get(key)
        if ap is not None:
            return ap
        import apprise

        ap = apprise.Apprise()
        bad = 0
        for u in urls:
            if not ap.add(with_actions(priority_url(u) if priority else u, actions if per_push else "")):
                bad += 1
        self._bad[key] = bad
        conf = expand(self.cfg.notify.config) if self.cfg.notify.config else ""
        if os.path.isfile(conf) and (route == "" or (route == "escalate" and not self.cfg.notify.escalate_urls)):
            ac = apprise.AppriseConfig()   # a regular file only: apprise would block on a FIFO
            ac.add(conf)
            ap.add(ac)
        for server in ap:  # connect/read timeouts of every service
            for attr in ("socket_connect_timeout", "socket_read_timeout"):
                if hasattr(server, attr):
                    setattr(server, attr, self.timeout)
        if not per_push:
            self._aps[key] = ap
        return ap

    @property
    def configured(self) -> bool:
        return bool(self.cfg.notify.urls or self.cfg.notify.config)

    def send(self, title: str, body: str, notify_type: str = "info", tag: str = "", *, route: str = "",
             priority: bool = False, actions: str = "") -> Outcome:
        """``actions``: ntfy buttons (:func:`ntfy_actions`) for this push's ntfy URLs."""
        from apprise import NotifyFormat
        from apprise.result import AppriseResultStatus as S

        try:
            ap = self._ap(route, priority, actions)
            kw: dict[str, Any] = {"tag": tag} if tag and not route else {}
            res = ap.notify(body=body, title=title, notify_type=notify_type, body_format=NotifyFormat.TEXT,
                            timeout=self.timeout * 2 + 1, **kw)
        except Exception as e:  # apprise should not raise; never let it kill the worker
            return Outcome(False, redact(f"{type(e).__name__}: {e}", self.secrets)[:200])
        status = getattr(res, "status", None)
        if status is None:  # apprise < 1.10 returned a plain bool
            return Outcome(bool(res), "" if res else "delivery failed")
        if status == S.SUCCESS:
            return Outcome(True)
        if status == S.PARTIAL:
            return Outcome(True, f"delivered to {res.success_count} of {len(res.results)} services", True)
        if status == S.NOMATCH:
            why = f"no notify URL has tag {tag!r}" if tag else "no notify URLs loaded"
            return Outcome(False, why)
        failed = ", ".join(sorted({f"{r.name} {r.status.name.lower()}" for r in res.results
                                   if r.status != S.SUCCESS}))[:200]
        return Outcome(False, redact(f"{status.name.lower()}: {failed}" if failed else status.name.lower(),
                                     self.secrets))
