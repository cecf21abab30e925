"""Windows of the fleet's tmux with no goal.json: executors launched without a contract.

``add(tmux_source, snap)`` runs in ``merge`` after every agent was matched to its window. Only a
tmux source scoped to the fleet (a private ``socket`` or a ``session``) is read this way (on the
default server every shell window would count). For each window in scope that is alive (pane
not dead):
- linked before to an agent whose goal.json is no longer seen: that agent, MAL_LANZADO
  "goal.json missing" (not CERRADO: its window still lives);
- matched by no agent (and not named like one): an agent named after the window, MAL_LANZADO
  "no goal.json".
A window must be an orphan on two consecutive merges before it is reported (one of grace, as the
fleet's own two-miss rule: a goal.json replaced by rename, or a launcher that opens the window a
moment before it writes the file, is never reported). At most ``MAX_ORPHANS`` per source. While
any other source failed this tick (its agents unseen), nothing is concluded.
"""
from __future__ import annotations

import weakref
from typing import Any

from projections.observations import AgentObs, Snapshot

NO_GOAL = "no goal.json"
GOAL_MISSING = "goal.json missing"
MAX_ORPHANS = 500
_seen: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def scoped(src: Any) -> bool:
    spec = src.spec
    return bool(getattr(spec, "socket", None) or getattr(spec, "session", None))


def _target(w: Any) -> str:
    ex = getattr(w, "exact", None)
    return ex() if callable(ex) else f"={w.session}:{w.index}"


def candidates(src: Any, agents: dict[str, AgentObs]) -> dict[str, tuple[Any, str]]:
    """agent id -> (window, reason) of this tick's orphan windows (pure over the source's view)."""
    wins = getattr(src, "wins", None)
    links = getattr(src, "links", None)
    if wins is None or links is None:
        return {}
    by_id = {w.wid: w for w in wins}
    used = {wid for a, wid in links.items() if a in agents}
    out: dict[str, tuple[Any, str]] = {}
    for aid, wid in sorted(links.items()):
        w = by_id.get(wid)
        if aid not in agents and w is not None and not w.dead and wid not in used:
            out[aid] = (w, GOAL_MISSING)
            used.add(wid)
    for w in wins:
        if w.wid in used or w.dead or w.name in agents or not w.name.strip():
            continue
        out.setdefault(w.name, (w, NO_GOAL))
        used.add(w.wid)
    return out


def add(src: Any, snap: Snapshot) -> None:
    """Add this tick's confirmed orphan windows of ``src`` to ``snap.agents``."""
    if not scoped(src) or any(name != src.name for name in snap.failed):
        return  # a failed (or pending) source hides its agents: nothing is an orphan this tick
    cands = candidates(src, snap.agents)
    prev = _seen.get(src, {})
    seen = {k: prev.get(k, 0) + 1 for k in cands}
    _seen[src] = seen
    n = 0
    for aid in sorted(cands):
        if seen[aid] < 2 or aid in snap.agents or n >= MAX_ORPHANS:
            continue
        w, why = cands[aid]
        snap.agents[aid] = AgentObs(agent=aid, source=src.name, error=why, target=_target(w),
                                    last_activity=w.activity)
        n += 1
