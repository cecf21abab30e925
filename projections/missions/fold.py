"""Mission projection: work packages (WPs) and circuits from ``sqlite`` source rows.

Rows: entity ``wp`` (mission, wp, state, deps, attempts, last_error_sig, same_sig_count) and
entity ``circuit`` (scope, state). A circuit's scope is the mission id it guards; a mission with
no circuit row counts as CLOSED.

Invariants
- ``wp.changed`` when a WP's state, deps or retry counters change (first sight included);
  ``to = null`` when a WP disappears from a source that answered this tick. Rows of a source that
  failed this tick keep their last state.
- ``mission.completed`` once when every WP of a mission is DONE; a WP leaving DONE reopens it.
- runnable = READY, every dep DONE, circuit CLOSED. Flagged = attempts > 3 or same_sig_count > 2.
- The orchestrator's rules (``projections.missions.rules``) give ``wp.violated`` (once per
  transition; the active-children cap once per episode) and ``wp.flagged`` (once per crossing).
  A WP ever seen in APPROVAL_REQUIRED is ``approved`` (the critical-risk rule); the query may
  select ``risk``. ESCALATED and BLOCKED WPs need a human (pushed urgent by notify).
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

from events.types import CircuitChanged, MissionCompleted, WpChanged, WpViolated
from projections.rows import unseen
from projections.missions.rules import (ACTIVE, APPROVAL, DONE, MAX_ATTEMPTS, MAX_SAME_SIG, WpFlag, WpRule,
                                        active_count, check, deps_not_done)

NAME = "missions"
TIME = None        # fold reads rec.time itself (projections.base.Projection)
READS_ID = False   # fold never reads rec.id
TYPES = frozenset(("wp.changed", "mission.completed", "circuit.changed", "wp.violated"))  # (others: fold's no-op)

READY = "READY"
NEEDS_HUMAN = (APPROVAL, "ESCALATED", "BLOCKED")
KEEP_VIOLATIONS = 20


# The snapshot schema (``layout``): a snapshot of another layout fails to decode, so ``Projections.load``
# replays the log instead of folding into a stale shape (``rebuild --check`` stays clean after an upgrade)
STATE_TYPE = TypedDict("MissionsState", {"missions": dict, "circuits": dict, "layout": Literal[2]})


def initial() -> dict[str, Any]:
    return {"missions": {}, "circuits": {}, "layout": 2}


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    if rec.type not in TYPES:
        return state
    ev = rec.event
    if isinstance(ev, WpChanged):
        ms = state["missions"]
        m = ms.get(ev.mission)
        if ev.to is None:
            if m is not None:
                m["wps"].pop(ev.wp, None)
                if not m["wps"]:
                    del ms[ev.mission]
                elif m.get("cap_over") and active_count(m["wps"]) <= m["cap_over"]:
                    m["cap_over"] = 0  # a WP gone ends the episode as one done does (it never ended)
            return state
        if m is None:
            m = ms[ev.mission] = {"wps": {}, "completed": False, "completed_at": None}
        old = m["wps"].get(ev.wp)
        m["wps"][ev.wp] = {
            "state": ev.to, "deps": list(ev.deps), "attempts": ev.attempts,
            "last_error_sig": ev.last_error_sig, "same_sig_count": ev.same_sig_count,
            "source": ev.source,
            "since": old["since"] if old is not None and old["state"] == ev.to else rec.time,
            "risk": ev.risk, "approved": ev.to == APPROVAL or bool(old and old.get("approved")),
        }
        if ev.to != DONE:
            m["completed"], m["completed_at"] = False, None
        if m.get("cap_over") and active_count(m["wps"]) <= m["cap_over"]:
            m["cap_over"] = 0  # the episode is over: the next breach is a new one
    elif isinstance(ev, WpViolated):
        m = state["missions"].get(ev.mission)
        if m is not None:
            if ev.rule == WpRule.CHILDREN_ACTIVE_CAP.value:
                m["cap_over"] = max(1, ev.limit)
            v = m.setdefault("violations", [])
            v.append({"wp": ev.wp, "rule": ev.rule, "detail": ev.detail, "time": rec.time})
            del v[:-KEEP_VIOLATIONS]
    elif isinstance(ev, MissionCompleted):
        m = state["missions"].get(ev.mission)
        if m is not None:
            m["completed"], m["completed_at"] = True, rec.time
    elif isinstance(ev, CircuitChanged):
        cs = state["circuits"]
        if ev.to is None:
            cs.pop(ev.scope, None)
        else:
            old = cs.get(ev.scope)
            cs[ev.scope] = {"state": ev.to, "source": ev.source,
                            "since": old["since"] if old and old["state"] == ev.to else rec.time}
    return state


# ---- detect ------------------------------------------------------------------------------
def _dep(x: Any) -> str:
    """One dep id as text: str() of a list nested ~1,000 deep raises RecursionError."""
    try:
        return str(x)[:1000]
    except RecursionError:
        return "[…]"


def parse_deps(raw: Any) -> list[str]:
    """The ``deps`` column: a JSON array of ids (or a list, or a comma-separated string). Any text
    is read, JSON nested too deep to decode included (tests/projections/missions/test_missions_hostile_rows.py)."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, (list, tuple)):
        return [_dep(x) for x in raw]
    if isinstance(raw, (bytes, str)):
        import json  # here: the readers (`status`) import this module and never parse a deps column

        try:
            val = json.loads(raw)
        except (ValueError, RecursionError):
            return [p.strip() for p in str(raw).split(",") if p.strip()]
        if isinstance(val, list):
            return [_dep(x) for x in val]
        return [_dep(val)]
    return [_dep(raw)]


def _int(v: Any) -> int:
    """A counter column as an int; 0 when it is none (text, NULL, an infinite REAL)."""
    try:
        return int(v or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def detect(state: dict[str, Any], snap: Any, now: float, max_children_active: int = 3, **_policy: Any) -> list[Any]:
    """WP and circuit transitions, mission completions and the orchestrator's rules for this tick
    (edge-triggered)."""
    out: list[Any] = []
    changes: list[tuple[str, str, dict | None, dict]] = []
    failed = snap.failed
    live = {r.name for r in snap.results if r.ok} - set(failed)   # the sources that answered this tick
    # -- work packages
    seen: set[tuple[str, str]] = set()
    view: dict[str, dict[str, str]] = {m: {w: x["state"] for w, x in d["wps"].items()}
                                       for m, d in state["missions"].items()}
    for r in sorted(snap.rows.get("wp", []), key=lambda r: (str(r.row.get("mission")), str(r.row.get("wp")))):
        if r.source in failed:
            continue
        row = r.row
        mid, wid, st = _s(row.get("mission")), _s(row.get("wp")), _s(row.get("state"))
        if not mid or not wid or not st or (mid, wid) in seen:
            continue  # no key; or a key twice in the query's rows: the first row wins (swarms too)
        seen.add((mid, wid))
        new: dict[str, Any] = {"state": st, "deps": parse_deps(row.get("deps")), "attempts": _int(row.get("attempts")),
               "last_error_sig": _s(row.get("last_error_sig")), "same_sig_count": _int(row.get("same_sig_count")),
               "risk": _s(row.get("risk"))}
        old = state["missions"].get(mid, {"wps": {}})["wps"].get(wid)
        if old is None or any(old.get(k, new[k]) != new[k] for k in new):  # no risk known yet: not a change
            out.append(WpChanged(mission=mid, wp=wid, from_=old["state"] if old else None, to=st,
                                 deps=new["deps"], attempts=new["attempts"], last_error_sig=new["last_error_sig"],
                                 same_sig_count=new["same_sig_count"], source=r.source, risk=new["risk"]))
            changes.append((mid, wid, old, new))
        view.setdefault(mid, {})[wid] = st
    for mid, wid, w in unseen(state["missions"], "wps", seen, live):
        out.append(WpChanged(mission=mid, wp=wid, from_=w["state"], to=None, source=w["source"]))
        view[mid].pop(wid, None)
    # a change leaving RUNNING/CHECKING is folded after the others of its tick: the fold ends a
    # children-active-cap episode when a change brings the count to the cap, and a handover in one
    # poll (a -> DONE, c -> RUNNING) ended it halfway: the next tick reported the cap again
    out.sort(key=lambda e: e.from_ in ACTIVE and e.to not in ACTIVE)   # stable (tests/watcher/runtime/test_cap_handover.py)
    # -- completions (on the view after this tick's changes)
    for mid in sorted(view):
        wps = view[mid]
        done = bool(wps) and all(s == DONE for s in wps.values())
        m = state["missions"].get(mid)
        if done and (m is None or not m["completed"]):
            out.append(MissionCompleted(mission=mid, wps=len(wps)))
    # -- circuits
    cseen: set[str] = set()
    cview = {s: c["state"] for s, c in state["circuits"].items()}
    for r in sorted(snap.rows.get("circuit", []), key=lambda r: str(r.row.get("scope"))):
        if r.source in failed:
            continue
        scope, st = _s(r.row.get("scope")), _s(r.row.get("state"))
        if not scope or not st or scope in cseen:
            continue  # a scope twice: the first row wins (two rows flipped it at every tick)
        cseen.add(scope)
        old = state["circuits"].get(scope)
        if old is None or old["state"] != st:
            out.append(CircuitChanged(scope=scope, from_=old["state"] if old else None, to=st, source=r.source))
        cview[scope] = st
    for scope in sorted(state["circuits"]):
        c = state["circuits"][scope]
        if scope not in cseen and c["source"] in live:
            out.append(CircuitChanged(scope=scope, from_=c["state"], to=None, source=c["source"]))
            cview.pop(scope, None)
    # -- the orchestrator's rules, on the view after this tick's changes
    out += check(state, changes, view, cview, max_children_active)
    return out


# ---- read side ---------------------------------------------------------------------------
def wp_flags(w: dict[str, Any]) -> list[WpFlag]:
    f = []
    if w["attempts"] > MAX_ATTEMPTS:
        f.append(WpFlag.RETRIES)
    if w["same_sig_count"] > MAX_SAME_SIG:
        f.append(WpFlag.SAME_ERROR)
    return f


def status(state: dict[str, Any], now: float) -> dict[str, Any]:
    """Per mission: WPs by state, runnable, awaiting approval, circuit, flagged retries, completed."""
    done = {w for m in state["missions"].values() for w, x in m["wps"].items() if x["state"] == DONE}
    view = {mid: {w: x["state"] for w, x in m["wps"].items()} for mid, m in state["missions"].items()}
    missions: dict[str, Any] = {}
    for mid in sorted(state["missions"]):
        m = state["missions"][mid]
        by_state: dict[str, list[str]] = {}
        runnable, approval, flagged, human = [], [], [], []
        circ = state["circuits"].get(mid, {"state": "CLOSED"})["state"]   # no circuit row: CLOSED
        for wid in sorted(m["wps"]):
            w = m["wps"][wid]
            by_state.setdefault(w["state"], []).append(wid)
            if w["state"] == READY and circ == "CLOSED" and not deps_not_done(mid, w["deps"], view, done):
                runnable.append(wid)
            if w["state"] == APPROVAL:
                approval.append(wid)
            elif w["state"] in NEEDS_HUMAN:
                human.append({"wp": wid, "state": w["state"]})
            fl = wp_flags(w)
            if fl:
                flagged.append({"wp": wid, "flags": [f.value for f in fl], "attempts": w["attempts"],
                                "same_sig_count": w["same_sig_count"], "last_error_sig": w["last_error_sig"]})
        missions[mid] = {
            "wps": len(m["wps"]), "by_state": by_state,
            "counts": {k: len(v) for k, v in sorted(by_state.items())},
            "runnable": runnable, "approval_required": approval, "needs_human": human,
            "violations": [dict(v) for v in m.get("violations", [])], "active": active_count(m["wps"]),
            "circuit": circ, "circuit_open": circ == "OPEN",
            "flagged": flagged, "completed": m["completed"], "completed_at": m["completed_at"],
        }
    circuits = {s: dict(c) for s, c in sorted(state["circuits"].items())}
    return {"missions": missions, "circuits": circuits,
            "open_circuits": [s for s, c in circuits.items() if c["state"] == "OPEN"]}


def items(state: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """(group, line) for the summary: ``approvals`` then ``violations``; stable order."""
    st = status(state, now)
    ap: list[tuple[str, str]] = []
    vi: list[tuple[str, str]] = []
    for mid, m in st["missions"].items():
        for wid in m["approval_required"]:
            ap.append(("approvals", f"{mid}/{wid}: APPROVAL_REQUIRED (needs a human)"))
        for h in m["needs_human"]:
            ap.append(("approvals", f"{mid}/{h['wp']}: {h['state']} (needs a human)"))
        for v in m["violations"][-3:]:
            vi.append(("violations", f"{mid}/{v['wp']}: broke {v['rule']} ({v['detail'][:80]})"))
        for f in m["flagged"]:
            vi.append(("violations", f"{mid}/{f['wp']}: {'+'.join(f['flags'])} (attempts {f['attempts']}, "
                                     f"same error {f['same_sig_count']}x)"))
    for scope in st["open_circuits"]:
        vi.append(("violations", f"circuit {scope}: OPEN"))
    return ap + vi


def summary(state: dict[str, Any], now: float) -> list[str]:
    return [line for _, line in items(state, now)]
