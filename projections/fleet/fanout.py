"""Fleet fan-out: a splitter spawning beyond its cap K, seen from outside (pure).

More new agents than ``[classify] fanout_max`` within ``fanout_window`` gives one ``fleet.fanout``
warning {count, window}, in the tick that sees them. A new agent is one the fleet does not know
alive: never classified, or CERRADO since (it is classified for the first time again). Each new
agent is counted in one report at most: the event's ``upto`` names the last one it covered, and
the next report counts only later ones (12 new agents in one tick: one event, not one per tick
while they stay within the window). The count is of distinct agents, never one first seen by
the census (one that ended and came back is no launch). State: ``alive`` (agent -> 1, from ``agent.classified``),
the last ``KEEP`` new agents ``[time, n, agent, seq]`` (``n`` counts them from 1), ``n`` and
``reported`` (the ``upto`` of the last report).

The fleet a watcher finds when it starts is not a fan-out: until its first complete look (every
source answered) the edge passes ``census=True`` and nothing is reported, and afterwards
``census_seq`` (the log's seq after that look) leaves out every agent first seen up to it. So
10 agents that were already running when the watcher (re)started give no push, while 12 agents
launched together a minute later give one.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from events.timefmt import parse_iso
from events.types import FleetFanout
from projections.classes import CERRADO

NAME = "fanout"
TIME = parse_iso   # how fold reads ``rec.time`` (a caller may pass a cache of it as ``times``)
READS_ID = False   # fold never reads rec.id
STATE_TYPE = None  # a snapshot decodes as plain JSON
TYPES = frozenset(("agent.classified", "fleet.fanout"))
KEEP = 512
SHOW = 10


def initial() -> dict[str, Any]:
    return {"alive": {}, "births": [], "n": 0, "reported": 0}


def fold(state: dict[str, Any], rec: Any, times: Callable[[str], float] = TIME) -> dict[str, Any]:
    """One event into the state (a no-op for types outside ``TYPES``; ``times``: see ``Projection``)."""
    ev = rec.event
    if rec.type == "agent.classified":
        alive = state["alive"]
        if ev.to == CERRADO:
            alive.pop(ev.agent, None)
        elif ev.agent not in alive:
            alive[ev.agent] = 1
            state["n"] += 1
            state["births"].append([times(rec.time), state["n"], ev.agent, rec.seq])
            del state["births"][:-KEEP]   # the last KEEP
    elif rec.type == "fleet.fanout":
        state["reported"] = max(state["reported"], ev.upto)
    return state


def detect(state: dict[str, Any], snap: Any, now: float, fanout_max: int = 8, fanout_window: float = 60.0,
           census: bool = False, census_seq: int = 0, new: list[str] | None = None, **_policy: Any) -> list[Any]:
    """The tick's fleet.fanout, if any (as the module's docstring says); ``new``: the snapshot
    agents not alive in the state, in id order, when the caller knows them (else computed here)."""
    if census or fanout_max <= 0:
        return []
    cur = snap.agents
    if new is None:
        new = sorted(cur.keys() - state["alive"].keys())
    # an ended agent (or a dead pane) is no launch: it is never alive, so not "new" each tick
    new = [a for a in new if not (cur[a].ended or cur[a].pane_dead)]
    lo, rep = now - fanout_window, state["reported"]
    births = state["births"]
    # an agent first seen by the census (ended since, now back) is no launch, and an agent born
    # twice in the window (ended and back) is one agent: each counted agent is distinct and new
    known = {b[2] for b in births if (b[3] if len(b) > 3 else 0) <= census_seq}
    recent = list(dict.fromkeys(
        [b[2] for b in births if b[1] > rep and b[0] >= lo and (b[3] if len(b) > 3 else 0) > census_seq] + new))
    recent = [a for a in recent if a not in known] if known else recent
    if len(recent) <= fanout_max:
        return []
    return [FleetFanout(count=len(recent), window=float(fanout_window), agents=recent[:SHOW],
                        upto=state["n"] + len(new))]
