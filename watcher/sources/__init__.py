"""Snapshot sources. ``build_sources(cfg)`` makes one per ``[[sources]]`` entry; each has
``name``, ``kind``, ``poll(now, full=True) -> SourceResult`` and ``close()``. ``merge`` folds one
tick's results into a :class:`Snapshot` (agents merged by id in the configured source order)."""
from __future__ import annotations

from typing import Any

import msgspec

from projections.observations import Snapshot, SourceResult
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


def duplicate(cur: Any, other: Any) -> Any:
    """One agent id claimed by two files (two folders, or two goals sources): the agent is
    MAL_LANZADO with a reason naming both paths (a third one is added to the same reason), so
    the real agent cannot be masked by a copy. The same id from a command or tmux source (no
    path) is still merged: those enrich, they do not compete."""
    import os

    if os.path.realpath(cur.path) == os.path.realpath(other.path):
        return cur  # one file reached by two globs
    if cur.error and cur.error.startswith("duplicate id"):
        if len(cur.error) > 600 or other.path in cur.error:
            return cur
        return msgspec.structs.replace(cur, error=f"{cur.error}, {other.path}")
    first, second = sorted((cur.path, other.path))
    return msgspec.structs.replace(cur, error=f"duplicate id {cur.agent!r} in {first} and {second}")


def merge(sources: list[Any], results: list[SourceResult]) -> Snapshot:
    snap = Snapshot(results=results)
    tmux = [s for s in sources if s.kind == "tmux"]
    answered = {r.name for r in results}
    for s in sources:  # no result this tick (a poll still pending): its agents are unseen, not gone
        if s.name not in answered:
            snap.failed[s.name] = "pending"
    for res in results:
        if not res.ok:
            snap.failed[res.name] = res.error or "failed"
            continue
        for a in res.agents:
            cur = snap.agents.get(a.agent)
            if cur is None:
                snap.agents[a.agent] = a
            elif a.path is not None and cur.path is not None and a.path != cur.path:
                snap.agents[a.agent] = duplicate(cur, a)  # two files claim one id: never merged
            elif a.last_activity is not None and (cur.last_activity is None or a.last_activity > cur.last_activity):
                snap.agents[a.agent] = msgspec.structs.replace(cur, last_activity=a.last_activity,
                                                               target=cur.target or a.target)
        for r in res.runs:
            snap.runs.setdefault(r.run, r)
        for row in res.rows:
            snap.rows.setdefault(row.entity, []).append(row)
    for t in tmux:
        if t.name in snap.failed:
            continue
        for aid, obs in list(snap.agents.items()):
            snap.agents[aid] = t.enrich(obs)
        orphans.add(t, snap)  # windows of the fleet with no goal.json (watcher/sources/orphans.py)
    return snap
