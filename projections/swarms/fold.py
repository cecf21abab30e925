"""Swarm projection: per group progress of children (group, child, status, label) rows.

Rows come from a ``command`` source with ``entity = "swarm"`` or a ``sqlite`` source with
``entity = "swarm"``; each row's ``status`` is one of queued, running, done, failed, killed,
timeout (others are kept and counted under their own name).

Invariants
- ``swarm.changed`` once per child status change (first sight included); ``to = null`` when a
  child disappears from a source that answered this tick. Rows of a failed source keep their state.
- A group is settled when none of its children is queued or running.
- Caps (the swarm design's 8 / 50 / 200; 0 = no cap), per group: ``max_concurrent`` running
  children, ``max_children`` active (queued + running) children, ``max_total`` children ever
  seen (``ever`` counts distinct children: one that disappears and comes back is not counted
  again, up to LEFT_MAX gone children remembered per group; a group whose children all disappear
  is forgotten).
  ``detect`` gives one ``swarm.capped`` per breach episode; the fold ends an episode when the
  count is back at or under the limit (never, for ``max-total``). ``status`` flags the levels.
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

from events.types import SwarmCapped, SwarmChanged
from projections.rows import unseen

NAME = "swarms"
TIME = None        # fold reads rec.time itself (projections.base.Projection)
READS_ID = False   # fold never reads rec.id

STATUSES = ("queued", "running", "done", "failed", "killed", "timeout")
ACTIVE = ("queued", "running")
_ALIASES = {"pending": "queued", "waiting": "queued", "in_progress": "running", "active": "running",
            "completed": "done", "succeeded": "done", "success": "done", "ok": "done",
            "error": "failed", "cancelled": "killed", "canceled": "killed", "timed_out": "timeout"}


CAPS = (8, 50, 200)  # the swarm design's defaults: max_concurrent, max_children, max_total
# each cap (its flag and swarm.capped's ``cap``, in CAPS' order) and the level it limits, as the
# summary and notify's SWARM_CAP say a breach: "<n> running > max_concurrent <limit>"
CAP_LEVEL = {"max-concurrent": "running", "max-children": "active children", "max-total": "children ever"}


def breach(cap: str, level: int, limit: int) -> str:
    return f"{level} {CAP_LEVEL.get(cap, cap)} > {cap.replace('-', '_')} {limit}"


def _limits(max_concurrent: int, max_children: int, max_total: int) -> dict[str, int]:
    return dict(zip(CAP_LEVEL, (max_concurrent, max_children, max_total)))


def cap_counts(counts: dict[str, int], ever: int) -> dict[str, int]:
    """The level each cap limits: running, active (queued + running), children ever seen."""
    return dict(zip(CAP_LEVEL, (counts.get("running", 0), sum(counts.get(s, 0) for s in ACTIVE), ever)))


def _counts(children: dict[str, Any]) -> dict[str, int]:
    c: dict[str, int] = {}
    for ch in children.values():
        st = ch if isinstance(ch, str) else ch["status"]
        c[st] = c.get(st, 0) + 1
    return c


STATE_TYPE = TypedDict("SwarmsState", {"groups": dict, "layout": Literal[3]})
LEFT_MAX = 1024  # gone children remembered per group (so that their return is not a new child)


def initial() -> dict[str, Any]:
    return {"groups": {}, "layout": 3}


def _text(v: Any, n: int) -> str:
    """At most ``n`` characters showing any JSON value a command printed, a list or object nested
    too deep for str() included (tests/projections/swarms/test_swarm_hostile_values.py)."""
    try:
        return str(v)[:n]
    except RecursionError:
        return "[…]" if isinstance(v, list) else "{…}"


def norm_status(raw: Any) -> str:
    s = _text(raw or "", 64).strip().lower()
    return _ALIASES.get(s, s) or "unknown"


TYPES = frozenset(("swarm.changed", "swarm.capped"))  # the event types fold reads (others: no-op)


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    """One event into the state (a no-op for types outside ``TYPES``)."""
    gs = state["groups"]
    ev = rec.event
    if isinstance(ev, SwarmCapped):
        g = gs.get(ev.group)
        if g is not None:
            g.setdefault("capped", {})[ev.cap] = ev.limit
        return state
    if not isinstance(ev, SwarmChanged):
        return state
    g = gs.get(ev.group)
    if ev.to is None:
        if g is not None:
            if g["children"].pop(ev.child, None) is not None:
                left = g.setdefault("left", {})
                left[ev.child] = 1
                if len(left) > LEFT_MAX:
                    del left[next(iter(left))]  # the oldest: counted again if it ever comes back
            g["last_change"] = rec.time
            if not g["children"]:
                del gs[ev.group]
            else:
                _end_episodes(g)  # a child gone ends an episode as one done does (it never ended)
        return state
    if g is None:
        g = gs[ev.group] = {"children": {}, "first_seen": rec.time, "last_change": rec.time, "ever": 0, "capped": {},
                            "left": {}}
    if ev.child not in g["children"] and g.get("left", {}).pop(ev.child, None) is None:
        g["ever"] = g.get("ever", len(g["children"])) + 1  # a distinct child (one back from gone is not)
    g["children"][ev.child] = {"status": ev.to, "label": ev.label, "since": rec.time, "source": ev.source}
    g["last_change"] = rec.time
    _end_episodes(g)
    return state


def _end_episodes(g: dict[str, Any]) -> None:
    capped = g.get("capped")
    if capped:
        level = cap_counts(_counts(g["children"]), g.get("ever", len(g["children"])))
        for cap in [c for c, lim in capped.items() if level.get(c, 0) <= lim]:
            del capped[cap]  # the episode is over: the next breach is a new one


def detect(state: dict[str, Any], snap: Any, now: float, max_concurrent: int = CAPS[0], max_children: int = CAPS[1],
           max_total: int = CAPS[2], **_policy: Any) -> list[Any]:
    """Child status transitions for this tick (edge-triggered), then one ``swarm.capped`` per
    group and cap that the view after them breaks outside an open episode."""
    out: list[Any] = []
    view: dict[str, dict[str, str]] = {g: {c: ch["status"] for c, ch in d["children"].items()}
                                       for g, d in state["groups"].items()}
    ever = {g: d.get("ever", len(d["children"])) for g, d in state["groups"].items()}
    failed = snap.failed
    live = {r.name for r in snap.results if r.ok} - set(failed)
    seen: set[tuple[str, str]] = set()
    rows = [(str(r.row["group"]), str(r.row["child"]), r) for r in snap.rows.get("swarm", [])
            if r.source not in failed and r.row.get("group") is not None and r.row.get("child") is not None]
    for g, c, r in sorted(rows, key=lambda t: (t[0], t[1])):
        if (g, c) in seen:
            continue  # a duplicate key: the first row wins
        seen.add((g, c))
        st = norm_status(r.row.get("status"))
        label = _text(r.row.get("label") or "", 200)
        old = state["groups"].get(g, {"children": {}})["children"].get(c)
        if old is None or old["status"] != st:
            out.append(SwarmChanged(group=g, child=c, from_=old["status"] if old else None, to=st,
                                    label=label, source=r.source))
        if old is None and c not in state["groups"].get(g, {}).get("left", ()):
            ever[g] = ever.get(g, 0) + 1  # a distinct child: one back from gone counts once
        view.setdefault(g, {})[c] = st
    for g, c, ch in unseen(state["groups"], "children", seen, live):
        out.append(SwarmChanged(group=g, child=c, from_=ch["status"], to=None, source=ch["source"]))
        view[g].pop(c, None)
    # a change leaving running, or queued/running, is folded after the others of its tick: the
    # fold ends a cap's episode when a change brings its count to the limit, and a handover in one
    # poll (a -> done, c -> running) ended it halfway: the next tick reported the cap again
    out.sort(key=lambda e: (e.from_ == "running" and e.to != "running") or (e.from_ in ACTIVE and e.to not in ACTIVE))
    limits = _limits(max_concurrent, max_children, max_total)
    for g in sorted(view):
        if not view[g]:
            continue  # the group is forgotten
        capped = state["groups"].get(g, {}).get("capped") or {}
        for cap, n in cap_counts(_counts(view[g]), ever.get(g, 0)).items():
            lim = limits[cap]
            if lim > 0 and n > lim and cap not in capped:
                out.append(SwarmCapped(group=g, cap=cap, count=n, limit=lim))
    return out


def status(state: dict[str, Any], now: float, max_concurrent: int = CAPS[0], max_children: int = CAPS[1],
           max_total: int = CAPS[2]) -> dict[str, Any]:
    """Per group: counts by status, active, settled, children ever seen, caps flagged."""
    groups: dict[str, Any] = {}
    total_running = 0
    limits = _limits(max_concurrent, max_children, max_total)
    for gid, g in sorted(state["groups"].items()):
        counts = {s: 0 for s in STATUSES} | _counts(g["children"])
        active = sum(counts[s] for s in ACTIVE)
        total_running += counts["running"]
        ever = g.get("ever", len(g["children"]))
        flags = [cap for cap, n in cap_counts(counts, ever).items() if limits[cap] and n > limits[cap]]
        groups[gid] = {"children": len(g["children"]), "counts": counts, "active": active, "ever": ever,
                       "settled": active == 0, "flags": flags,
                       "first_seen": g["first_seen"], "last_change": g["last_change"]}
    return {"groups": groups, "running": total_running,
            "caps": {"max_concurrent": max_concurrent, "max_children": max_children, "max_total": max_total}}


def items(state: dict[str, Any], now: float, max_concurrent: int = CAPS[0], max_children: int = CAPS[1],
          max_total: int = CAPS[2]) -> list[tuple[str, str]]:
    """(group, line): one ``swarms`` progress line per group, plus ``violations`` for caps."""
    st = status(state, now, max_concurrent, max_children, max_total)
    limits = _limits(max_concurrent, max_children, max_total)
    prog, vi = [], []
    for gid, g in st["groups"].items():
        c = g["counts"]
        parts = [f"{c[s]} {s}" for s in STATUSES if c.get(s)]
        parts += [f"{n} {s}" for s, n in sorted(c.items()) if s not in STATUSES and n]
        prog.append(("swarms", f"{gid}: {'settled' if g['settled'] else 'active'}, " + ", ".join(parts)))
        level = cap_counts(c, g["ever"])
        vi += [("violations", f"swarm {gid}: {breach(cap, level[cap], limits[cap])}") for cap in g["flags"]]
    return vi + prog
