"""Snapshot sources. ``build_sources(cfg)`` makes one per ``[[sources]]`` entry; each has
``name``, ``kind``, ``poll(now, full=True) -> SourceResult`` and ``close()``. ``merge`` folds one
tick's results into a :class:`Snapshot` (agents merged by id in the configured source order)."""
from __future__ import annotations

import os
from typing import Any

import msgspec

from projections.observations import RunObs, Snapshot, SourceResult
from watcher.sources import orphans
from watcher.config import Config, Source


def make(spec: Source) -> Any:
    if spec.kind in ("goals", "steps"):
        from watcher.sources.files import FACTORY

        return FACTORY[spec.kind](spec)
    if spec.kind == "command":
        from watcher.sources.proc import CommandSource

        return CommandSource(spec)
    if spec.kind == "tmux":
        from watcher.sources.proc import TmuxSource

        return TmuxSource(spec)
    if spec.kind == "sqlite":
        from watcher.sources.sqlite import SqliteSource

        return SqliteSource(spec)
    if spec.kind == "claude":
        from watcher.sources.claude import ClaudeSource

        return ClaudeSource(spec)
    raise ValueError(spec.kind)


def build_sources(cfg: Config) -> list[Any]:
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


def merge(sources: list[Any], results: list[SourceResult]) -> Snapshot:
    snap = Snapshot(results=results)
    tmux = [s for s in sources if s.kind == "tmux"]
    answered = {r.name for r in results}
    for s in sources:  # no result this tick (a poll still pending): its agents are unseen, not gone
        if s.name not in answered:
            snap.failed[s.name] = "pending"
    several: dict[str, list[Any]] = {}  # agent id -> its observations, when more than one
    twice: dict[str, list[Any]] = {}    # run id -> its observations, when more than one
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
            cur = snap.runs.get(r.run)
            if cur is None:
                snap.runs[r.run] = r
            else:
                twice.setdefault(r.run, [cur]).append(r)
        for row in res.rows:
            snap.rows.setdefault(row.entity, []).append(row)
    for aid, obs in several.items():
        agents[aid] = combine(obs)
    for rid, runs in twice.items():  # one run id in two steps.json: the first listed masked the other
        files: dict[str, Any] = {}
        for o in sorted((o for o in runs if o.path is not None), key=lambda o: o.path):
            files.setdefault(os.path.realpath(o.path), o)  # one file reached by two globs is one file
        if len(files) >= 2:
            snap.runs[rid] = duplicate(list(files.values()))
    for c in sources:  # Claude Code's sessions join their agents (watcher/sources/claude.py), before tmux looks
        if c.kind == "claude":
            c.join(snap)
    for t in tmux:
        # failed this tick: its last known windows stand (a dead pane, a window's activity and
        # target do not vanish for a tick: no CERRADO -> TRABAJANDO flap, no false stall)
        failed = t.name in snap.failed
        if failed and not getattr(t, "known", False):
            snap.tmux_unknown = True  # never answered: nothing known (the fleet keeps the log's)
            continue
        for aid, obs in list(snap.agents.items()):
            snap.agents[aid] = t.enrich(obs)
        if not failed:
            orphans.add(t, snap)  # windows of the fleet with no goal.json (watcher/sources/orphans.py)
    return snap
