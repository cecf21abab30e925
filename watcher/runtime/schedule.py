"""Which entities a judge looks at on a tick: the ones that changed and the ones that are due.

The projections' judges are plain functions of (id, observation, record, now, policy) that keep
nothing between calls (``projections.fleet.judge``). Judging every entity on every tick gives the
events (``fleet.detect``); the watcher judges only the entities whose observation or folded record
is not the one it last judged them with (by identity: a new but equal object is merely judged
again), plus those whose due time has come (a heap of due times: an agent that only the clock can
make ESTANCADO waits on its timer, as an Alertmanager aggregation group waits on its). The same
events either way: tests/test_schedule_differential.py compares the two on random fleets and
histories.

Invariants:
- Every entity of the snapshot is looked at on the first tick, after :meth:`Scheduler.reset`,
  when the policy changed and when the clock went back (a due time is only ever in the future).
- The change hint (``Snapshot.gen``/``dirty``: the ids the merge and this watcher's folds may have
  changed since the previous snapshot) narrows the comparison to those ids, but only when this
  scheduler looked at that previous snapshot, neither the snapshot's nor the state's number of
  entities moved (an entity came or went, a prune forgot one) and the hint names only entities
  this scheduler judged that the snapshot still has; otherwise every entity is compared.
- A judge's due time ``NEXT_TICK`` looks at the entity again on the next tick whatever changed
  (an event was found: it may not be committed; a blind tmux poll).
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from projections import fleet

_INF = float("inf")


class Scheduler:
    """The changed and due entities of one projection's judge, from one tick to the next."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, policy: Any = None) -> None:
        self.seen: dict[str, tuple[Any, Any]] = {}   # id -> (observation, record) last judged with
        self.heap: list[tuple[float, str]] = []      # (due time, id); stale entries are skipped
        self.due: dict[str, float] = {}              # id -> its live due time
        self.policy = policy
        self.gen = -1                                # the snapshot generation last looked at
        self.sizes = (-1, -1)                        # (snapshot's, state's) entity counts then
        self.clock = -_INF

    def pick(self, cur: dict[str, Any], recs: dict[str, Any], now: float, policy: Any,
             gen: int = -1, dirty: Any = None) -> list[str]:
        """The ids of ``cur`` (this tick's observations) to judge against ``recs`` (the folded
        records), in id order."""
        if policy != self.policy or now < self.clock:
            self.reset(policy)
        self.clock = now
        sizes = (len(cur), len(recs))
        seen = self.seen
        if dirty is not None and gen == self.gen + 1 and sizes == self.sizes \
                and all(a in cur and a in seen for a in dirty):
            ids = list(dirty)
        else:
            ids = list(cur)
            if len(seen) > len(cur):   # entities gone: forget them
                self.seen = seen = {a: v for a, v in seen.items() if a in cur}
        self.gen, self.sizes = gen, sizes
        todo = set()
        get = recs.get
        for a in ids:
            last = seen.get(a)
            if last is None or last[0] is not cur[a] or last[1] is not get(a):
                todo.add(a)
        heap, due = self.heap, self.due
        while heap and heap[0][0] <= now:
            t, a = heapq.heappop(heap)
            if due.get(a) == t:
                del due[a]
                if a in cur:
                    todo.add(a)
        return sorted(todo)

    def judged(self, aid: str, obs: Any, rec: Any, due_at: float) -> None:
        """``aid`` was judged with ``obs`` and ``rec``; judge it again from ``due_at`` on."""
        self.seen[aid] = (obs, rec)
        if due_at == _INF:
            self.due.pop(aid, None)
        elif self.due.get(aid) != due_at:
            self.due[aid] = due_at
            heapq.heappush(self.heap, (due_at, aid))
        if len(self.heap) > 4 * len(self.due) + 1024:   # stale entries: rebuilt from the live ones
            self.heap = [(t, a) for a, t in self.due.items()]
            heapq.heapify(self.heap)


class FleetTicker:
    """The fleet's detector as the watcher runs it: the source edges, the judge on the changed
    and due agents (``Scheduler``), the missing agents (their miss counts kept here)."""

    def __init__(self) -> None:
        self.sched = Scheduler()
        self.absent: dict[str, int] = {}

    def tick(self, state: dict[str, Any], snap: Any, now: float, limits: fleet.Limits,
             judge: Callable[..., tuple[Any, float]] = fleet.judge) -> list[Any]:
        out = fleet.source_edges(state, snap)
        agents, cur, blind = state["agents"], snap.agents, snap.tmux_unknown
        sched = self.sched
        for aid in sched.pick(cur, agents, now, limits, snap.gen, snap.dirty):
            obs, rec = cur[aid], agents.get(aid)
            ev, due = judge(aid, obs, rec, now, limits, blind)
            if ev is not None:
                out.append(ev)
            sched.judged(aid, obs, rec, due)
        self.absent = fleet.missing(state, snap, self.absent, out)
        return out
