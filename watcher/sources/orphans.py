"""Windows of the fleet's tmux with no goal.json: executors launched without a contract.

``add(tmux_source, snap)`` runs in ``merge`` after every agent was matched to its window. Only a
tmux source scoped to the fleet (a private ``socket`` or a ``session``) is read this way. A window
is an agent only when something says so; a plain shell, an editor or the board is not. For each
window in scope that is alive (pane not dead) and not named by an ``exclude_windows`` glob:
- linked before to an agent whose goal.json is no longer seen: that agent, MAL_LANZADO
  "goal.json missing" (not CERRADO: its window still lives);
- matched by no agent (and not named like one), and either named by an ``agent_windows`` glob or
  running a Claude Code process in one of its panes (``panes.claude_in``, asked of the source's
  next poll): an agent named after the window, MAL_LANZADO "no goal.json". Any other window is
  not an agent.
A window must be an orphan on two consecutive merges before it is reported (one of grace, as the
fleet's own two-miss rule: a goal.json replaced by rename, or a launcher that opens the window a
moment before it writes the file, is never reported). At most ``MAX_ORPHANS`` per source. While
any other source failed this tick (its agents unseen), nothing is concluded.
"""
from __future__ import annotations

import fnmatch
import weakref
from typing import Any, Callable, NamedTuple

from projections.observations import AgentObs, Snapshot

NO_GOAL = "no goal.json"
GOAL_MISSING = "goal.json missing"
MAX_ORPHANS = 500
_seen: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_linked: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()  # agent -> window


class Window(NamedTuple):
    name: str
    target: str          # the exact target ("=session:index")
    activity: float | None
    dead: bool
    wid: str = ""        # tmux's window id ("@N"), where the source has one


def scoped(src: Any) -> bool:
    spec = src.spec
    return bool(getattr(spec, "socket", None) or getattr(spec, "session", None))


def key(target: str | None) -> str:
    """A window's identity from a target: "=fleet:1.0" and "fleet:1" are the same window."""
    return (target or "").lstrip("=").split(".", 1)[0]


def windows(src: Any) -> list[Window]:
    """The source's windows in scope, from either of its layouts (``wins`` or ``windows``)."""
    wins = getattr(src, "wins", None)
    if wins is not None:
        return [Window(w.name, w.exact() if callable(getattr(w, "exact", None)) else f"={w.session}:{w.index}",
                       w.activity, bool(w.dead), getattr(w, "wid", "")) for w in wins]
    by = getattr(src, "windows", None) or {}
    return [Window(k, "=" + v["target"], v.get("activity"), bool(v.get("dead"))) for k, v in by.items()
            if isinstance(v, dict) and k != v.get("target")]


def candidates(wins: list[Window], agents: dict[str, AgentObs], linked: dict[str, str],
               is_agent: Callable[[Window], bool] = lambda w: True,
               excluded: Callable[[str], bool] = lambda name: False) -> dict[str, tuple[Window, str]]:
    """agent id -> (window, reason) of this tick's orphan windows (pure). ``linked``: agent ->
    window key of the previous tick; ``is_agent``: whether an unmatched window is an agent (an
    ``agent_windows`` name, a Claude Code process); ``excluded``: window names never an agent."""
    wins = [w for w in wins if not excluded(w.name)]
    by = {key(w.target): w for w in wins}
    used = {key(o.target) for o in agents.values() if o.target}
    out: dict[str, tuple[Window, str]] = {}
    for aid, k in sorted(linked.items()):
        w = by.get(k)
        if aid not in agents and w is not None and not w.dead and k not in used:
            out[aid] = (w, GOAL_MISSING)
            used.add(k)
    for w in wins:
        k = key(w.target)
        if k in used or w.dead or w.name in agents or not w.name.strip() or not is_agent(w):
            continue
        out.setdefault(w.name, (w, NO_GOAL))
        used.add(k)
    return out


def add(src: Any, snap: Snapshot) -> None:
    """Add this tick's confirmed orphan windows of ``src`` to ``snap.agents``."""
    if not scoped(src) or any(name != src.name for name in snap.failed):
        return  # a failed (or pending) source hides its agents: nothing is an orphan this tick
    linked = _linked.get(src, {})
    spec = src.spec
    globs = tuple(getattr(spec, "agent_windows", None) or ())
    unmatched: set[str] = set()

    def is_agent(w: Window) -> bool:
        if any(fnmatch.fnmatchcase(w.name, g) for g in globs):
            return True
        unmatched.add(w.wid)  # asked of the next poll: is a Claude Code process in it?
        return bool(getattr(src, "win_claude", {}).get(w.wid))

    excl = tuple(getattr(spec, "exclude_windows", None) or ())
    cands = candidates(windows(src), snap.agents, linked, is_agent,
                       lambda name: any(fnmatch.fnmatchcase(name, g) for g in excl))
    if hasattr(src, "want_wins"):
        src.want_wins |= {w for w in unmatched if w}
    now_linked = {a: key(o.target) for a, o in snap.agents.items() if o.target and o.source != src.name}
    for aid, (w, why) in cands.items():
        if why == GOAL_MISSING:
            now_linked[aid] = key(w.target)  # still its window while it lives
    _linked[src] = now_linked
    prev = _seen.get(src, {})
    seen = {k: prev.get(k, 0) + 1 for k in cands}
    _seen[src] = seen
    n = 0
    for aid in sorted(cands):
        if seen[aid] < 2 or aid in snap.agents or n >= MAX_ORPHANS:
            continue
        w, why = cands[aid]
        snap.agents[aid] = AgentObs(agent=aid, source=src.name, error=why, target=w.target,
                                    last_activity=w.activity)
        n += 1
