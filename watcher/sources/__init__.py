"""Snapshot sources. ``build_sources(cfg)`` makes one per ``[[sources]]`` entry; each has
``name``, ``kind``, ``poll(now, full=True) -> SourceResult`` and ``close()``. ``merge`` folds one
tick's results into a :class:`Snapshot` (agents merged by id in the configured source order)."""
from __future__ import annotations

from typing import Any

import msgspec

from projections.observations import Snapshot, SourceResult
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
    raise ValueError(spec.kind)


def build_sources(cfg: Config) -> list[Any]:
    return [make(s) for s in cfg.sources]


def merge(sources: list[Any], results: list[SourceResult]) -> Snapshot:
    snap = Snapshot(results=results)
    tmux = [s for s in sources if s.kind == "tmux"]
    for res in results:
        if not res.ok:
            snap.failed[res.name] = res.error or "failed"
            continue
        for a in res.agents:
            cur = snap.agents.get(a.agent)
            if cur is None:
                snap.agents[a.agent] = a
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
    return snap
