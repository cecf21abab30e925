"""Snapshot sources. ``build_sources(cfg)`` makes one per ``[[sources]]`` entry through the one
table of kinds (:data:`KINDS`, watcher/config_sources.py); each is a :class:`Source`. ``merge`` folds one tick's results into
a :class:`Snapshot` (agents merged by id in the configured source order)."""
from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import msgspec

from projections.observations import AgentObs, RunObs, Snapshot, SourceResult
from watcher.sources import orphans
from watcher.config import Config
from watcher.config import Source as Spec
from watcher.config_sources import KINDS  # noqa: F401  (the one table of kinds, re-exported)


@runtime_checkable
class Source(Protocol):
    """What the runtime asks of every source (tests/repo/test_sources_protocol.py runs one shared
    check over every kind). ``partial``: ``poll(now, False, changed=paths)`` looks only at those
    paths (file sources); ``cache``: path -> entry with ``fails`` (the two-read rule's suspects;
    empty for a source that reads no files); ``delta``: (the result's agents it changed from,
    the new list, the changed (old, new) pairs) of its last poll, or None when not known (the
    patched merge, runtime/merged.py). A source that reads no files: ``partial = False``,
    ``cache`` empty (:data:`NO_FILES`), ``delta = None``."""

    name: str
    kind: str
    partial: bool

    @property
    def cache(self) -> Mapping[str, Any]: ...

    @property
    def delta(self) -> tuple[Any, Any, Any] | None: ...

    def poll(self, now: float, full: bool = True) -> SourceResult: ...

    def close(self) -> None: ...


@runtime_checkable
class WindowSource(Source, Protocol):
    """A source that adds to every agent's observation after the merge (tmux: its window's
    activity, target, dead pane); ``known``: one poll succeeded (its last windows stand while a
    later poll fails); ``quiet``: agent -> (from, until) of the watcher's own keys, whose echo is
    not activity."""

    known: bool
    quiet: dict[str, tuple[float, float]]

    def enrich(self, obs: AgentObs) -> AgentObs: ...


@runtime_checkable
class SessionSource(Source, Protocol):
    """A source whose sessions join their agents in the merged snapshot, before any
    :class:`WindowSource` looks (Claude Code's session list)."""

    def join(self, snap: Snapshot) -> None: ...


NO_FILES: Mapping[str, Any] = MappingProxyType({})   # the ``cache`` of a source that reads no files


def make(spec: Spec) -> Source:
    """The source of ``spec``'s kind (its row of ``KINDS``: module and class; config checked the kind)."""
    kind = KINDS[spec.kind]
    made: Source = getattr(importlib.import_module(kind.module), kind.cls)(spec)
    return made


def build_sources(cfg: Config) -> list[Source]:
    return [make(s) for s in cfg.sources]


def duplicate(claims: list[Any]) -> Any:
    """One agent id claimed by several files (two folders, or two goals sources), given as
    one observation per distinct file (``combine`` drops a file reached by two globs): the agent
    is MAL_LANZADO with a reason naming the paths in path order, so the real agent cannot be
    masked by a copy. Whatever order the sources listed them in, the result is the same: the
    fields of the first path's file, the reason "duplicate id 'x' in A and B[, C ...]" (at most
    ~600 characters of paths)."""
    from watcher.sources.filestat import shown_name  # a path with bytes that are not UTF-8

    first, second, *rest = sorted(claims, key=lambda o: o.path)
    ident = first.run if isinstance(first, RunObs) else first.agent
    error = f"duplicate id {ident!r} in {shown_name(first.path)} and {shown_name(second.path)}"
    for o in rest:
        if len(error) > 600:
            break
        error = f"{error}, {shown_name(o.path)}"
    return msgspec.structs.replace(first, error=error)


def combine(obs: list[Any]) -> Any:
    """The one observation of an id several observations name (in source order). Files compete:
    two distinct files are a ``duplicate``. Otherwise the first observation stands and the
    others enrich it: the later last activity (with its target when it had none) — how a
    command or tmux source adds activity to an agent's goal.json."""
    files: dict[str, Any] = {}
    for o in sorted((o for o in obs if o.path is not None), key=lambda o: o.path):
        files.setdefault(os.path.realpath(o.path), o)
    if len(files) >= 2:
        base = duplicate(list(files.values()))
        rest = [o for o in obs if o.path is None]
    else:
        base = obs[0]
        rest = [o for o in obs[1:] if o.path is None or base.path is None]
    for o in rest:
        if o.last_activity is not None and (base.last_activity is None or o.last_activity > base.last_activity):
            base = msgspec.structs.replace(base, last_activity=o.last_activity, target=base.target or o.target)
    return base


def merge(sources: list[Source], results: list[SourceResult]) -> Snapshot:
    snap = Snapshot(results=results)
    tmux = [s for s in sources if isinstance(s, WindowSource)]
    answered = {r.name for r in results}
    for s in sources:  # no result this tick (a poll still pending): its agents are unseen, not gone
        if s.name not in answered:
            snap.failed[s.name] = "pending"
    several: dict[str, list[AgentObs]] = {}  # agent id -> its observations, when more than one
    twice: dict[str, list[RunObs]] = {}      # run id -> its observations, when more than one
    agents = snap.agents
    for res in results:
        if not res.ok:
            snap.failed[res.name] = res.error or "failed"
            continue
        for a in res.agents:
            cur = agents.get(a.agent)
            if cur is None:
                agents[a.agent] = a
            else:
                several.setdefault(a.agent, [cur]).append(a)
        for r in res.runs:
            held = snap.runs.get(r.run)
            if held is None:
                snap.runs[r.run] = r
            else:
                twice.setdefault(r.run, [held]).append(r)
        for row in res.rows:
            snap.rows.setdefault(row.entity, []).append(row)
    for aid, obs in several.items():
        agents[aid] = combine(obs)
    for rid, runs in twice.items():  # one run id in two steps.json: the first listed masked the other
        files: dict[str, RunObs] = {}
        for path, o in sorted(((o.path, o) for o in runs if o.path is not None), key=lambda po: po[0]):
            files.setdefault(os.path.realpath(path), o)  # one file reached by two globs is one file
        if len(files) >= 2:
            snap.runs[rid] = duplicate(list(files.values()))
    for c in sources:  # Claude Code's sessions join their agents (watcher/sources/claude.py), before tmux looks
        if isinstance(c, SessionSource):
            c.join(snap)
    for t in tmux:
        # failed this tick: its last known windows stand (a dead pane, a window's activity and
        # target do not vanish for a tick: no CERRADO -> TRABAJANDO flap, no false stall)
        failed = t.name in snap.failed
        if failed and not t.known:
            snap.tmux_unknown = True  # never answered: nothing known (the fleet keeps the log's)
            continue
        for aid, seen in list(snap.agents.items()):
            snap.agents[aid] = t.enrich(seen)
        if not failed:
            orphans.add(t, snap)  # windows of the fleet with no goal.json (watcher/sources/orphans.py)
    return snap
