"""The hub's health as `status`, the board and the phone show it (pure: ``now`` is a parameter).

``hub_view(doc, now)`` reads the hub's status document (``watcher/hub/health.py`` writes it beside
the hub's log) trusting nothing in it, and gives: whether the hub runs and is connected to NATS,
since when; per host whether it is heard (an event or a heartbeat within ``silent_after`` while
the hub is connected), the age of the last word from it, the host's time of its last event and
the lag (arrival minus that time). While NATS is down or the hub does not run, everything shown
is as of the last moment the hub was connected: ``stale`` is True and ``stale_since`` says when.
``hub_line`` is the one line of text of it.
"""
from __future__ import annotations

from typing import Any

from events.timefmt import iso, parse_iso
from projections.text import age as fmt_age
from projections.text import safe

FRESH = 15.0        # a status file older than this (seconds) is a hub that stopped writing it
MAX_HOSTS = 1000


def time_of(v: Any) -> float | None:
    """Epoch seconds of an ISO time (None when absent, not a string or unreadable)."""
    if not isinstance(v, str):
        return None
    try:
        return parse_iso(v)
    except (ValueError, OverflowError):
        return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def hub_view(doc: Any, now: float, silent_after: float = 300.0) -> dict[str, Any] | None:
    """The hub's health at ``now`` (None: ``doc`` is no hub status document)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nats"), dict):
        return None
    nats = doc["nats"]
    written = time_of(doc.get("written_at"))
    running = doc.get("running") is not False and written is not None and now - written <= FRESH
    connected = running and nats.get("connected") is True
    since = time_of(nats.get("since"))
    last_up = time_of(nats.get("last_up"))
    stale_since = None if connected else (last_up if last_up is not None else since)
    hosts = []
    raw = doc.get("hosts")
    for h, v in list(raw.items() if isinstance(raw, dict) else ())[:MAX_HOSTS]:
        if not isinstance(v, dict):
            continue
        seen, ev = time_of(v.get("last_seen")), time_of(v.get("last_event"))
        heard = connected and seen is not None and now - seen <= silent_after and v.get("silent") is not True
        hosts.append({"host": str(h), "connected": heard, "age_s": None if seen is None else round(now - seen, 1),
                      "last_event": v.get("last_event") if ev is not None else None,
                      "event_age_s": None if ev is None else round(now - ev, 1),
                      "lag_s": _num(v.get("lag_s")), "silent": v.get("silent") is True})
    return {"running": running, "connected": connected, "since": nats.get("since") if since is not None else None,
            "down_s": None if connected or since is None else round(now - since, 1),
            "stale": not connected, "stale_since": None if stale_since is None else iso(stale_since), "hosts": hosts}


def hub_line(v: dict[str, Any]) -> str:
    """``hub: NATS up, 2/3 hosts heard (vm3 6m ago), lag 2.0s`` or ``hub: NATS DOWN for 3m: data
    stale since 2026-12-07T19:20:01Z``."""
    if not v["running"]:
        head = "hub: NOT RUNNING"
    elif v["connected"]:
        head = "hub: NATS up"
    else:
        head = f"hub: NATS DOWN for {fmt_age(v.get('down_s'))}"
    if v["stale"]:
        head += f": data stale since {safe(v.get('stale_since') or 'the start', 30)}"
    hosts = v["hosts"]
    up = [h for h in hosts if h["connected"]]
    out = f"{head}, {len(up)}/{len(hosts)} hosts heard"
    down = [h for h in hosts if not h["connected"]]
    if down:
        out += " (" + ", ".join(f"{safe(h['host'], 30)} {fmt_age(h['age_s'])} ago" if h["age_s"] is not None
                                else safe(h["host"], 30) for h in down[:3]) + (", …" if len(down) > 3 else "") + ")"
    lag = max((h["lag_s"] or 0.0 for h in up), default=0.0)
    if lag >= 1.0:
        out += f", lag {fmt_age(lag)}"
    return out


def host_lines(v: dict[str, Any]) -> list[str]:
    """One line per host: ``vm1  heard 3s ago  last event 19:20:01Z (12s ago)  lag 0.2s``."""
    out = []
    for h in v["hosts"]:
        state = "heard" if h["connected"] else ("SILENT" if h["silent"] else "not heard")
        line = f"{safe(h['host'], 40)}  {state}" + (f" {fmt_age(h['age_s'])} ago" if h["age_s"] is not None else "")
        if h["last_event"]:
            line += f"  last event {safe(h['last_event'], 30)} ({fmt_age(h['event_age_s'])} ago)"
        if h["lag_s"] is not None:
            line += f"  lag {fmt_age(h['lag_s'])}"
        out.append(line)
    return out


def mark_stale(rows: list[dict[str, Any]], v: dict[str, Any]) -> None:
    """Set ``stale`` on each agent row (``HOST/AGENT``) whose data is as of an earlier time: all
    of them while the hub's data is stale, else those of a host not heard now."""
    quiet = {h["host"] for h in v["hosts"] if not h["connected"]}
    for r in rows:
        host = r["agent"].partition("/")[0] if isinstance(r.get("agent"), str) else ""
        r["stale"] = bool(v["stale"] or host in quiet)

