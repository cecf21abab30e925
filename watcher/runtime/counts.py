"""Agents per class for sd_notify's status line (every tick, systemd or not), kept by the
watcher's own commits instead of counted each tick (a full count of a big fleet is in every
write's path).

Invariant: ``seq`` and ``counts`` are the fleet projection's class counts at ``seq``; -1 means
none are known. A batch the watcher commits moves only the agents it names
(:meth:`ClassCounts.before` then :meth:`ClassCounts.moved`); anything else that moves the log
(another writer's events, a source's edge that names no agent, a prune that forgot agents the
batch did not name, a failed append, a reload) leaves them unknown, and the next ask counts in
full.
"""
from __future__ import annotations

from typing import Any, cast

from projections.fleet import fold as fleet


class ClassCounts:
    def __init__(self) -> None:
        self.seq, self.counts = -1, cast(dict[str, int], {})

    def reset(self) -> None:
        self.seq, self.counts = -1, {}

    def of(self, proj: Any) -> dict[str, int]:
        """The counts at ``proj``'s seq (counted in full when not known there)."""
        if self.seq == proj.seq:
            return self.counts
        counts: dict[str, int] = {}
        for a in proj["fleet"]["agents"].values():
            c = a["class"]
            counts[c] = counts.get(c, 0) + 1
        self.seq, self.counts = proj.seq, counts
        return counts

    def before(self, recs: list[Any], proj: Any) -> dict[str, str | None] | None:
        """Before ``recs`` are folded: the class of each agent they name (None: not in the
        fleet), if the counts are those of the seq just before them; None when they are not, or
        when a batch holds a fleet event that names no agent (a source's edge may move many)."""
        if not recs or self.seq != recs[0].seq - 1 or self.seq != proj.seq:
            return None
        agents = proj["fleet"]["agents"]
        types = fleet.TYPES
        out: dict[str, str | None] = {}
        for r in recs:
            if r.type in types:
                aid = getattr(r.event, "agent", None)
                if not isinstance(aid, str):
                    return None
                if aid not in out:
                    a = agents.get(aid)
                    out[aid] = None if a is None else a["class"]
        return out

    def moved(self, before: dict[str, str | None], proj: Any) -> None:
        """The counts after the fold: each named agent moved from its class before to its class
        now; a fold that also forgot agents it did not name (``fleet.prune_closed``) leaves the
        sum off the fleet's size, and then the next ask counts in full."""
        agents = proj["fleet"]["agents"]
        counts = dict(self.counts)
        for aid, old in before.items():
            a = agents.get(aid)
            new = None if a is None else a["class"]
            if new == old:
                continue
            if old is not None and counts[old] == 1:
                del counts[old]
            elif old is not None:
                counts[old] -= 1
            if new is not None:
                counts[new] = counts.get(new, 0) + 1
        if sum(counts.values()) == len(agents):
            self.seq, self.counts = proj.seq, counts
