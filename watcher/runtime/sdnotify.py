"""sd_notify without a dependency: datagrams to ``$NOTIFY_SOCKET`` (systemd Type=notify).

Behaviour and invariants
- ``$NOTIFY_SOCKET`` unset (not under systemd) -> every call is a cheap no-op.
- A leading ``@`` names a socket in the abstract namespace (sent as a leading NUL byte).
- A failed send is logged at DEBUG and swallowed: notification never raises into the run loop.
- Watchdog pacing: ``watchdog_interval`` = ``$WATCHDOG_USEC`` / 2 seconds (None when unset or when
  ``$WATCHDOG_PID`` names another process). The loop calls :meth:`tick_completed` after each
  *completed* tick; a ping goes out only when at least ``watchdog_interval`` passed since the last
  one. A hung tick therefore stops the pings and systemd restarts the service after WatchdogSec.
- :meth:`reloading` sends ``RELOADING=1`` together with ``MONOTONIC_USEC`` (CLOCK_MONOTONIC in µs),
  which ``Type=notify-reload`` (systemd >= 253) requires and older managers ignore; finish a reload
  with :meth:`ready_after_reload` (``READY=1``), whether the new config was taken or refused.
- ``NotifyAccess=main``: only the watcher process itself may notify; child processes (command
  sources) inheriting ``$NOTIFY_SOCKET`` are ignored by systemd.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger("fleetwatch.sdnotify")

from projections import classes
from projections.text import age as fmt_age


class SystemdNotifier:
    """Sends sd_notify messages. Construct with :meth:`from_env`."""

    def __init__(self, address: str | None = None, watchdog_usec: int | None = None):
        self.address = address
        self.watchdog_interval: float | None = (watchdog_usec / 2e6) if watchdog_usec else None
        self._last_ping: float | None = None
        self._warned = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> SystemdNotifier:
        """Read ``$NOTIFY_SOCKET``, ``$WATCHDOG_USEC`` and ``$WATCHDOG_PID``. Never raises."""
        addr = environ.get("NOTIFY_SOCKET") or None
        if addr is not None and not (addr.startswith("/") or addr.startswith("@")):
            log.debug("NOTIFY_SOCKET of an unsupported kind (%s...); notifications disabled", addr[:6])
            addr = None
        usec: int | None = None
        try:
            usec = int(environ.get("WATCHDOG_USEC", "") or 0) or None
        except ValueError:
            usec = None
        pid = environ.get("WATCHDOG_PID")
        if usec and pid:
            try:
                if int(pid) != os.getpid():
                    usec = None
            except ValueError:
                usec = None
        if usec is not None and usec <= 0:
            usec = None
        return cls(addr, usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    # ---- messages ---------------------------------------------------------------------------
    def notify(self, message: str) -> bool:
        """Send one datagram; True if sent. Never raises."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(message.encode("utf-8", "replace"), target)
            return True
        except OSError as e:
            if not self._warned:
                log.debug("sd_notify to %s failed: %s", self.address, e.strerror or e)
                self._warned = True
            return False

    def ready(self) -> bool:
        """READY=1: the first tick is committed."""
        return self.notify("READY=1")

    def status(self, text: str) -> bool:
        """STATUS=<one line> (newlines flattened)."""
        line = " ".join(str(text).split())
        return self.notify(f"STATUS={line}")

    def stopping(self) -> bool:
        """STOPPING=1 (on SIGTERM, before the last commit)."""
        return self.notify("STOPPING=1")

    def reloading(self) -> bool:
        """RELOADING=1 plus MONOTONIC_USEC (required by Type=notify-reload)."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.notify(f"RELOADING=1\nMONOTONIC_USEC={usec}")

    def ready_after_reload(self) -> bool:
        """READY=1 again: the reload is over (new config taken, or the old one kept)."""
        return self.notify("READY=1")

    # ---- watchdog ---------------------------------------------------------------------------
    def tick_completed(self, mono_now: float) -> bool:
        """Call after every completed tick. Sends WATCHDOG=1 when ``watchdog_interval`` has
        passed since the last ping (or on the first call). Returns True if it pinged."""
        if self.watchdog_interval is None or self.address is None:
            return False
        if self._last_ping is not None and mono_now - self._last_ping < self.watchdog_interval:
            return False
        self._last_ping = mono_now
        return self.notify("WATCHDOG=1")


def _age(seconds: float) -> str:
    """Tick freshness: tenths under 10 s (a healthy tick is seconds old), else the shared format."""
    seconds = max(0.0, seconds)
    return f"{seconds:.1f}s" if seconds < 10 else fmt_age(seconds)


def status_line(counts: dict[str, int], last_tick_age: float) -> str:
    """``"9 agents: 2 RECLAMA, 7 TRABAJANDO; 3 CERRADO; last tick 1.2s ago"`` (pure). The live
    classes add up to the agent count; CERRADO agents are not live and stand apart after it. Classes
    with a zero count are left out. Order: the class table's urgency rank (unknown classes last,
    alphabetically)."""
    items = sorted(((c, n) for c, n in counts.items() if n and c != classes.CERRADO),
                   key=lambda cn: (classes.rank(cn[0]), cn[0]))
    live = sum(n for _, n in items)
    head = f"{live} agent{'s' if live != 1 else ''}"
    if items:
        head += ": " + ", ".join(f"{n} {c}" for c, n in items)
    if counts.get(classes.CERRADO):
        head += f"; {counts[classes.CERRADO]} {classes.CERRADO}"
    return f"{head}; last tick {_age(last_tick_age)} ago"
