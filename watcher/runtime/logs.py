"""Logging setup for the watcher: journald-aware, secret-redacting.

- Under systemd (``$JOURNAL_STREAM`` set and naming our stderr, as sd-daemon(3) prescribes): no
  timestamps (the journal adds its own) and a ``<N>`` syslog priority prefix on every line so
  journald files each line at the right priority.
- Otherwise: human lines ``2026-11-29T19:20:00Z INFO  fleetwatch.loop: ...`` in UTC.
- The ``apprise``, ``urllib3`` and ``requests`` loggers are pinned to WARNING: their DEBUG output
  contains notification URLs or request paths with tokens.
- :class:`RedactFilter` on our handler replaces everything after ``scheme://`` of any URL with
  ``***`` (apprise URLs carry tokens in the user part, the host or the path), also in tracebacks.
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
    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%SZ")


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
