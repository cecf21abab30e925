"""The hub's own health, where the reading commands see it, and the NATS probe `doctor` runs.

The hub writes ``<log>.hub.json`` (``HealthFile``): whether it is connected to NATS and since
when, and per host the last time it heard the host (an event or a heartbeat), the host's time of
its last event and the lag (arrival minus that time). It is a status file, not the log: it holds
live values (ages, lag) that the log records only as transitions (``host.silent`` /
``host.resumed``). Written atomically (temp file + rename), at most once a second and at every
connection change. ``read(log_path)`` gives the document (None when the log is no hub's);
``projections.present.views.hub_view`` turns it into what `status`, the board and the phone show.

Invariants: a write never raises into the hub (a full disk costs the status file, not a
consume round); what is read is checked by shape (``views.hub_view`` trusts nothing in it).
"""
from __future__ import annotations

import os
import time
from typing import Any

from events.timefmt import iso

# json and logging are imported where used: `status` imports this module on its fast path
SUFFIX = ".hub.json"
EVERY = 2.0          # seconds between two writes while nothing changes
MAX_BYTES = 1 << 20  # a status file bigger than this is not read


def path_for(log_path: str) -> str:
    return log_path + SUFFIX


class HealthFile:
    """The hub's side: ``heard(host, now)`` per message or heartbeat, ``arrived(origins, now)``
    per appended batch (the host's time of its last event, the lag), ``round(hub, now)`` every
    consume round (the NATS connection's state; the file written when due)."""

    def __init__(self, log_path: str, urls: list[str], silent_after: float = 300.0):
        self.path = path_for(log_path)
        self.urls = urls
        self.silent_after = silent_after
        self.nc: Any = None                   # the hub's current NATS client (None: not connected)
        self.connected = False
        self.since: float | None = None       # when the current state (up or down) began
        self.last_up: float | None = None     # when NATS was last known connected (data is as of then)
        self.hosts: dict[str, dict[str, Any]] = {}
        self._written = 0.0
        self._dirty = True

    def nats(self, up: bool, now: float) -> None:
        if up != self.connected or self.since is None:
            self.connected, self.since, self._dirty = up, now, True
        if up:
            self.last_up = now

    def arrived(self, origins: list[Any], now: float) -> None:
        """Rows just appended: each host's last event time (its own clock) and the lag."""
        from events.timefmt import parse_iso

        for o in origins:
            try:
                self.heard(o.host, now, min(parse_iso(o.time), now))
            except (ValueError, OverflowError):
                self.heard(o.host, now)

    def round(self, silent: Any, now: float) -> None:
        nc = self.nc
        self.nats(bool(nc is not None and getattr(nc, "is_connected", False)), now)
        self.maybe_write(now, silent)

    def heard(self, host: str, now: float, event_time: float | None = None) -> None:
        h = self.hosts.setdefault(host, {"seen": now, "event_time": None, "lag_s": None})
        h["seen"] = now
        if event_time is not None:
            h["event_time"] = event_time
            h["lag_s"] = round(max(0.0, now - event_time), 3)

    def maybe_write(self, now: float, silent: set[str] | frozenset[str] = frozenset(), force: bool = False) -> None:
        if self.connected:
            self.last_up = now
        if not (force or self._dirty or now - self._written >= EVERY):
            return
        doc = {
            "pid": os.getpid(), "written_at": iso(now), "silent_after": self.silent_after, "nats": {
                "connected": self.connected, "since": iso(self.since) if self.since is not None else None,
                "last_up": iso(self.last_up) if self.last_up is not None else None, "servers": len(self.urls)},
            "hosts": {h: {"last_seen": iso(v["seen"]),
                          "last_event": iso(v["event_time"]) if v["event_time"] is not None else None,
                          "lag_s": v["lag_s"], "silent": h in silent}
                      for h, v in sorted(self.hosts.items())},
        }
        import json

        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, self.path)
        except OSError as e:
            import logging

            logging.getLogger("fleetwatch.hub").debug("hub health file not written: %s", e.strerror or e)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        self._written, self._dirty = now, False


def host_times(origins: list[Any], now: float) -> list[float]:
    """Each origin's time on its host (``Origin.time``; a time ahead of ``now`` or unreadable is
    ``now``): the hub appends each event at it, so a caught-up event keeps the time it happened
    at on its host, not its arrival's."""
    from events.timefmt import parse_iso

    out = []
    for o in origins:
        try:
            out.append(min(parse_iso(o.time), now))
        except (ValueError, OverflowError, TypeError):
            out.append(now)
    return out


def view(log_path: str, now: float) -> dict[str, Any] | None:
    """``projections.present.hub.hub_view`` of the document beside ``log_path`` (None: no hub's)."""
    from projections.present.hub import hub_view

    doc = read(log_path)
    if doc is None:
        return None
    sa = doc.get("silent_after")
    return hub_view(doc, now, float(sa) if isinstance(sa, (int, float)) and not isinstance(sa, bool) and sa > 0
                    else 300.0)


def read(log_path: str) -> dict[str, Any] | None:
    """The hub's health document beside ``log_path`` (None: not a hub's log, or unreadable),
    with ``running``: whether a writer (the hub) holds that log now."""
    from events.lock import writer_running
    from watcher.config_limits import read_regular

    try:
        raw = read_regular(path_for(log_path), MAX_BYTES)
    except OSError:
        return None
    import json

    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    doc["running"] = writer_running(log_path)[0]
    return doc


# ---- doctor ---------------------------------------------------------------------------------
def forwarded(log_path: str, stream: str, host: str) -> tuple[int, int] | None:
    """(the seq this host's forwarder got acknowledged, the log's head) read without writing;
    None when the log or its forwarder's position cannot be read (never forwarded, no log)."""
    import apsw

    if not os.path.exists(log_path):
        return None
    try:
        c = apsw.Connection(log_path, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            head = c.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
            r = c.execute("SELECT seq FROM fw_position WHERE stream=? AND host=?", (stream, host)).fetchall()
        finally:
            c.close()
    except apsw.Error:
        return None
    acked = r[0][0] if r else 0
    if not isinstance(head, int) or not isinstance(acked, int):   # seq columns hold integers
        return None
    return acked, head


def probe(urls: str | list[str], creds: str | None, stream: str, timeout: float = 5.0) -> tuple[str, str]:
    """Connect to NATS and look the stream up: ("ok", detail), ("no-stream", detail) or
    ("unreachable", why). Never raises; bounded by ``timeout``."""
    import asyncio

    try:
        import nats  # noqa: F401
    except ImportError:
        return "no-extra", "nats-py is not installed"
    from nats.errors import NoServersError

    from watcher.hub.forwarder import connect

    async def go() -> tuple[str, str]:
        try:
            nc = await connect(urls, creds, "fleetwatch-doctor", timeout=timeout, once=True)
        except (asyncio.TimeoutError, TimeoutError):
            return "unreachable", f"no answer within {timeout:.0f}s"
        except NoServersError:
            return "unreachable", "no server answered: refused, unreachable or not speaking NATS"
        except Exception as e:
            return "unreachable", type(e).__name__
        try:
            from nats.js.errors import NotFoundError

            js = nc.jetstream()
            try:
                info = await asyncio.wait_for(js.stream_info(stream), timeout)
            except NotFoundError:
                return "no-stream", f"stream {stream} does not exist yet"
            except Exception as e:
                return "unreachable", f"JetStream did not answer ({type(e).__name__}: is it enabled, -js?)"
            return "ok", f"stream {stream}: {info.state.messages} messages"
        finally:
            try:
                await asyncio.wait_for(nc.close(), 1.0)
            except Exception:
                pass

    start = time.monotonic()
    try:
        return asyncio.run(asyncio.wait_for(go(), timeout + 2.0))
    except Exception as e:
        return "unreachable", f"{type(e).__name__} after {time.monotonic() - start:.0f}s"
