"""Logging setup for the watcher: journald-aware, secret-redacting.

- Under systemd (``$JOURNAL_STREAM`` set and naming our stderr, as sd-daemon(3) prescribes): no
  timestamps (the journal adds its own) and a ``<N>`` syslog priority prefix on every line so
  journald files each line at the right priority.
- Otherwise: human lines ``2026-11-29T19:20:00Z INFO  fleetwatch.loop: ...`` in UTC.
- The ``apprise``, ``urllib3`` and ``requests`` loggers are pinned to WARNING: their DEBUG output
  contains notification URLs or request paths with tokens.
- :class:`RedactFilter` on our handler replaces everything after ``scheme://`` of any URL with
  ``***`` (apprise URLs carry tokens in the user part, the host or the path), also in tracebacks.
- :class:`LineBudget`: transition lines (INFO) are at most ``BUDGET_LINES`` per ``BUDGET_WINDOW_S``;
  past it they are counted, and one line says how many were left out. journald drops a service's
  lines past its rate limit (``RateLimitBurst=``, 10,000 per 30 s by default, 1,000 on older
  systemd), warnings included, and a first tick at 10,000 agents is 10,000 transitions: without
  the budget it would silence the warnings after it. Warnings and errors are never budgeted;
  ``--log-level debug`` logs every line; ``fleetwatch tail`` always has every transition.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import IO

from events.errors import ConfigError

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR, "critical": logging.CRITICAL}

# sd-daemon(3) priorities
_PRIO = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}

# Libraries whose DEBUG/INFO lines carry notification URLs or request paths with tokens
# (urllib3 logs `"POST /bot<TOKEN>/sendMessage HTTP/1.1" 200` without a scheme).
PINNED = ("apprise", "urllib3", "requests")

URL_RE = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,31})://[^\s'\"<>]+")


def redact(text: str) -> str:
    """Replace everything after ``scheme://`` in each URL with ``***``."""
    return URL_RE.sub(lambda m: f"{m.group(1)}://***", text)


BUDGET_LINES = 500       # transition lines per window (a tenth of journald's default burst's window share)
BUDGET_WINDOW_S = 30.0   # s, monotonic; journald's default RateLimitIntervalSec


class LineBudget:
    """How many transition lines may still be logged in this window (monotonic ``clock``).
    ``take(n)`` returns how many of ``n`` lines to log now; the rest are counted. The count of
    those left out is logged once, with the first ``take`` of a later window (``logger``, INFO),
    so a burst costs at most ``lines`` + 2 lines per window and is never silent."""

    def __init__(self, logger: logging.Logger, lines: int = BUDGET_LINES, window_s: float = BUDGET_WINDOW_S,
                 clock=time.monotonic) -> None:
        self.log, self.lines, self.window_s, self.clock = logger, lines, window_s, clock
        self.start = clock()
        self.left = lines
        self.skipped = 0

    def take(self, n: int) -> int:
        if self.log.isEnabledFor(logging.DEBUG):
            return n
        now = self.clock()
        if not 0 <= now - self.start < self.window_s:  # a new window (a clock that stepped back: a new one too)
            if self.skipped:
                self.log.info("%d transition line(s) were not logged in the last %.0f s (at most %d per %.0f s "
                              "reach the journal; `fleetwatch tail` has every transition)",
                              self.skipped, now - self.start, self.lines, self.window_s)
            self.start, self.left, self.skipped = now, self.lines, 0
        give = min(n, self.left)
        if give < n:
            if self.skipped == 0:
                self.log.info("more than %d transitions in %.0f s: the rest of this window's are counted, "
                              "not logged (`fleetwatch tail -f` shows every one)", self.lines, self.window_s)
            self.skipped += n - give
        self.left -= give
        return give


class RedactFilter(logging.Filter):
    """Formats the message once, redacts URLs, and drops the args (so nothing is re-expanded)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string must not kill logging
            msg = str(record.msg)
        red = redact(msg)
        if red != msg or record.args:
            record.msg, record.args = red, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class JournalFormatter(logging.Formatter):
    """``<N>name: message``; every continuation line gets the same prefix."""

    def __init__(self) -> None:
        super().__init__("%(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        prio = _PRIO.get(record.levelno)
        if prio is None:
            prio = 7 if record.levelno < logging.INFO else 6 if record.levelno < logging.WARNING else 4
        text = super().format(record)
        return "\n".join(f"<{prio}>{line}" for line in text.split("\n"))


class HumanFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%SZ")
        self.converter = time.gmtime   # UTC times (the Z of the format)


def journal_mode(environ: Mapping[str, str], stream: IO[str]) -> bool:
    """True when ``$JOURNAL_STREAM`` (``dev:inode``) names ``stream``'s file (stderr under systemd).
    If ``stream`` has no file descriptor, the variable being set is enough."""
    js = environ.get("JOURNAL_STREAM")
    if not js:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return True
    try:
        dev, ino = (int(x) for x in js.split(":", 1))
    except ValueError:
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


_MARK = "_fleetwatch_handler"


def setup_logging(level: str = "info", environ: Mapping[str, str] = os.environ,
                  stream: IO[str] | None = None) -> logging.Handler:
    """Configure the root logger once (calling again replaces our handler). Returns the handler.
    Raises ConfigError for an unknown level (exit 2 from the CLI)."""
    lvl = LEVELS.get(str(level).lower())
    if lvl is None:
        raise ConfigError(f"unknown log level {level!r}", key="log-level", op="logging",
                          hint="use one of: " + ", ".join(LEVELS))
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    setattr(handler, _MARK, True)
    handler.setFormatter(JournalFormatter() if journal_mode(environ, stream) else HumanFormatter())
    handler.addFilter(RedactFilter())
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _MARK, False):
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(lvl)
    logging.getLogger("fleetwatch").setLevel(lvl)
    for name in PINNED:
        logging.getLogger(name).setLevel(max(lvl, logging.WARNING))
    return handler
