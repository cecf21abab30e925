"""A goal.json folder's agent is the id it named at first sight (the goals source's ``_update``).

An agent that rewrote its own goal.json with another agent's id and that agent's contract, then
claimed done, disappeared ("no longer seen") while a ``met`` was recorded for the other id. Now:

Invariants
- ``Pins.bound``: path -> the agent id the first observation read from the file there (for this
  source's lifetime; observations that carry no id of the file's own, the folder-name fallback of
  an unreadable or invalid file, bind nothing).
- A later observation naming another id is the bound agent, MAL_LANZADO "agent id changed" (its
  error), with nothing of what the file now says (no contract, checks, phase or verdict): never a
  new agent, never another agent's contract. The other id keeps its own folder's observations.
- An observation without an id of its own, or an id that is the bound one by identity
  (``projections.identity``: case, width, homoglyphs), is filed under the bound id.
- Across a restart: ``agent.launched`` is the binding of record (:func:`bind_launched`: the
  folder `fleetwatch launch` wrote, ``[launch] goals_dir/AGENT/goal.json``), and every agent the
  fleet knows (not CERRADO) keeps the folder named after it in a source's ``ROOT/*/NAME`` layout
  (:func:`bind_folders`); across a reload the new sources take the old ones' bindings
  (:func:`carry`). Any other folder is bound afresh at first sight after a restart.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable

import msgspec

from projections.identity import same_identity
from projections.observations import AgentObs
from watcher.sources.filestat import _folder_id, reread_racy

CHANGED = "agent id changed"


class Pins:
    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    def pin(self, path: str, obs: Any) -> Any:
        bound = self.bound.get(path)
        fallback = obs.error is not None and obs.agent in (_folder_id(path), "?")   # no id of the file's own
        if bound is None:
            if not fallback:
                self.bound[path] = obs.agent
            return obs
        if obs.agent == bound:
            return obs
        if fallback or same_identity(obs.agent, bound):
            return msgspec.structs.replace(obs, agent=bound)
        return AgentObs(agent=bound, source=obs.source, path=path, last_activity=obs.last_activity,
                        error=f"{CHANGED}: goal.json now names {obs.agent[:60]!r}; the folder is {bound!r}'s")


def _pins(src: Any) -> Pins:
    pins = src.__dict__.get("pins")
    if pins is None:
        pins = src.pins = Pins()
    return pins


def bind_launched(sources: Iterable[Any], agents: Iterable[str], goals_dir: str) -> int:
    """Bind ``goals_dir/AGENT/goal.json`` to AGENT in every goals source that reads it (the
    launched agents: the binding of record); a path bound already keeps its agent."""
    from watcher.config import expand

    root, n = os.path.normpath(expand(goals_dir)), 0
    for src in sources:
        if getattr(src, "OBS", None) is not AgentObs or not hasattr(src, "matches"):
            continue
        for agent in agents:
            path = os.path.join(root, agent, "goal.json")
            if agent and os.sep not in agent and src.matches(path):
                n += _pins(src).bound.setdefault(path, agent) == agent
    return n


def bind_folders(sources: Iterable[Any], agents: dict[str, str]) -> int:
    """Bind ``ROOT/AGENT/NAME`` to AGENT in each goals source of the simple layout, for the agents
    the fleet knows from that source (``agents``: id -> source name; a restart is no first sight)."""
    n = 0
    for src in sources:
        simple = getattr(src, "_simple", None)
        if getattr(src, "OBS", None) is not AgentObs or simple is None:
            continue
        bound = _pins(src).bound
        for agent in (a for a, name in agents.items() if name == src.name):
            if agent and os.sep not in agent and agent not in (".", ".."):
                n += bound.setdefault(os.path.join(simple[0], agent, simple[1]), agent) == agent
    return n


def carry(old: Iterable[Any], new: Iterable[Any]) -> None:
    """A reload: each new source takes the bindings of the old source of its name."""
    kept = {s.name: s.__dict__["pins"] for s in old if "pins" in s.__dict__}
    for s in new:
        if s.name in kept and getattr(s, "OBS", None) is AgentObs:
            _pins(s).bound.update(kept[s.name].bound)


def pinned(update: Callable[..., Any]) -> Callable[..., Any]:
    """``GlobSource._update`` filing each observation under its folder's agent (:class:`Pins`),
    and reading a file once more when its key cannot be trusted (``filestat.reread_racy``)."""
    update = reread_racy(update)

    def _update(self: Any, path: str, st: Any, ent: Any, obs: Any = None) -> Any:
        ent = update(self, path, st, ent, obs)
        if ent is not None and ent.obs is not None:
            ent.obs = _pins(self).pin(path, ent.obs)
        return ent

    return _update
