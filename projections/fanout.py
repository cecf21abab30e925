"""Fleet fan-out: a splitter spawning beyond its cap K, seen from outside (pure).

More new agents than ``[classify] fanout_max`` within ``fanout_window`` gives one ``fleet.fanout``
warning {count, window}, in the tick that sees them. A new agent is one the fleet does not know
alive: never classified, or CERRADO since (it is classified for the first time again). Each new
agent is counted in one report at most: the event's ``upto`` names the last one it covered, and
the next report counts only later ones (12 new agents in one tick: one event, not one per tick
while they stay within the window). State: ``alive`` (agent -> 1, from ``agent.classified``),
the last ``KEEP`` new agents ``[time, n, agent, seq]`` (``n`` counts them from 1), ``n`` and
``reported`` (the ``upto`` of the last report).

The fleet a watcher finds when it starts is not a fan-out: until its first complete look (every
source answered) the edge passes ``census=True`` and nothing is reported, and afterwards
``census_seq`` (the log's seq after that look) leaves out every agent first seen up to it. So
10 agents that were already running when the watcher (re)started give no push, while 12 agents
launched together a minute later give one.
"""
from __future__ import annotations

from typing import Any

from events.timefmt import parse_iso
from events.types import FleetFanout

NAME = "fanout"
TYPES = frozenset(("agent.classified", "fleet.fanout"))
KEEP = 512
SHOW = 10


def initial() -> dict[str, Any]:
    return {"alive": {}, "births": [], "n": 0, "reported": 0}


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    ev = rec.event
    if rec.type == "agent.classified":
        alive = state["alive"]
        if ev.to == "CERRADO":
            alive.pop(ev.agent, None)
        elif ev.agent not in alive:
            alive[ev.agent] = 1
            state["n"] += 1
            b = state["births"]
            b.append([parse_iso(rec.time), state["n"], ev.agent, rec.seq])
            if len(b) > KEEP:
                del b[: len(b) - KEEP]
    elif rec.type == "fleet.fanout":
        state["reported"] = max(state["reported"], ev.upto)
    return state


def detect(state: dict[str, Any], snap: Any, now: float, fanout_max: int = 8, fanout_window: float = 60.0,
           census: bool = False, census_seq: int = 0, **_policy: Any) -> list[Any]:
    """One fleet.fanout when the unreported new agents within the window exceed the cap (none
    while the watcher takes its census; agents first seen by it, up to ``census_seq``, never)."""
    if fanout_max <= 0 or census:
        return []
    alive = state["alive"]
    new = sorted(snap.agents.keys() - alive.keys())  # a set difference in C: every tick, every agent
    lo, rep = now - fanout_window, state["reported"]
    recent = [b[2] for b in state["births"]
              if b[1] > rep and b[0] >= lo and (b[3] if len(b) > 3 else 0) > census_seq] + new
    if len(recent) <= fanout_max:
        return []
    return [FleetFanout(count=len(recent), window=float(fanout_window), agents=recent[:SHOW],
                        upto=state["n"] + len(new))]
