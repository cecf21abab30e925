"""Which entities a judge looks at on a tick: the ones that changed and the ones that are due.

The projections' judges are plain functions of (id, observation, record, now, policy) that keep
nothing between calls (``projections.fleet.fold.judge``). Judging every entity on every tick gives the
events (``fleet.detect``); the watcher judges only the entities whose observation or folded record
is not the one it last judged them with (by identity: a new but equal object is merely judged
again), plus those whose due time has come (a heap of due times: an agent that only the clock can
make ESTANCADO waits on its timer, as an Alertmanager aggregation group waits on its). The same
events either way: tests/watcher/runtime/test_schedule_differential.py compares the two on random fleets and
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
- A snapshot's agents dict is never changed once handed out (runtime/merged.py): the same dict
  is the same agents, so the fleet's missing agents are not looked for again while it and the
  state's size stay.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from projections.dod import fold as dod
from projections.fleet import fanout
from projections.fleet import fold as fleet
from projections.runs import fold as runs

_INF = float("inf")


class Scheduler:
    """The changed and due entities of one projection's judge, from one tick to the next.
    ``sig``: what of a folded record the judge reads, compared by equality (a projection whose
    fold changes its records in place); None: the record itself, compared by identity (a fold
    that makes a new record for every change, as the fleet's)."""

    def __init__(self, sig: Callable[[Any], Any] | None = None) -> None:
        self.sig = sig
        self.reset()

    def reset(self, policy: Any = None) -> None:
        self.seen: dict[str, tuple[Any, Any]] = {}   # id -> (observation, record) last judged with
        self.heap: list[tuple[float, str]] = []      # (due time, id); stale entries are skipped
        self.due: dict[str, float] = {}              # id -> its live due time
        self.policy = policy
        self.gen = -1                                # the snapshot generation last looked at
        self.hinted = False                          # the last pick narrowed by the change hint
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
        self.hinted = dirty is not None and gen == self.gen + 1 and sizes == self.sizes \
            and all(a in cur and a in seen for a in dirty)
        if self.hinted:
            ids = list(dirty)
        else:
            ids = list(cur)
            if len(seen) > len(cur):   # entities gone: forget them
                self.seen = seen = {a: v for a, v in seen.items() if a in cur}
        self.gen, self.sizes = gen, sizes
        todo = set()
        get, sig = recs.get, self.sig
        for a in ids:
            last = seen.get(a)
            if last is None or last[0] is not cur[a]:
                todo.add(a)
            elif sig is None:
                if last[1] is not get(a):
                    todo.add(a)
            elif last[1] != sig(get(a)):
                todo.add(a)
        heap, due = self.heap, self.due
        while heap and heap[0][0] <= now:
            t, a = heapq.heappop(heap)
            if due.get(a) == t:
                del due[a]
                if a in cur:
                    todo.add(a)
        return sorted(todo)

    def judged(self, done: list[tuple[str, Any, Any, float]]) -> None:
        """Each (id, observation, record, due time) of ``done`` was judged with that observation
        and record; judge it again from its due time on (one call a tick: a big first tick)."""
        seen, due, heap, sig = self.seen, self.due, self.heap, self.sig
        push = heapq.heappush
        for aid, obs, rec, due_at in done:
            seen[aid] = (obs, rec if sig is None else sig(rec))
            if due_at == _INF:
                if aid in due:
                    del due[aid]
            elif due.get(aid) != due_at:
                due[aid] = due_at
                push(heap, (due_at, aid))
        if len(heap) > 4 * len(due) + 1024:   # stale entries: rebuilt from the live ones
            self.heap = [(t, a) for a, t in self.due.items()]
            heapq.heapify(self.heap)


class FleetTicker:
    """The fleet's detector as the watcher runs it: the source edges, the judge on the changed
    and due agents (``Scheduler``), the missing agents (their miss counts kept here)."""

    def __init__(self) -> None:
        self.sched = Scheduler()
        self.absent: dict[str, int] = {}
        self.gone: tuple[Any, int, list[str]] | None = None   # (snapshot agents, state size, ids missing)

    def tick(self, state: dict[str, Any], snap: Any, now: float, limits: fleet.Limits,
             judge: Callable[..., tuple[Any, float]] = fleet.judge) -> list[Any]:
        """This tick's events; if it raises, every agent is judged next tick."""
        try:
            return self._tick(state, snap, now, limits, judge)
        except BaseException:
            self.sched.reset()
            raise

    def _tick(self, state: dict[str, Any], snap: Any, now: float, limits: fleet.Limits,
              judge: Callable[..., tuple[Any, float]]) -> list[Any]:
        out = fleet.source_edges(state, snap)
        agents, cur, blind = state["agents"], snap.agents, snap.tmux_unknown
        sched, done = self.sched, []
        for aid in sched.pick(cur, agents, now, limits, snap.gen, snap.dirty):
            obs, rec = cur[aid], agents.get(aid)
            ev, due = judge(aid, obs, rec, now, limits, blind)
            if ev is not None:
                out.append(ev)
            done.append((aid, obs, rec, due))
        sched.judged(done)
        # the same snapshot dict (the merge hands the last one on while nothing changed) against a
        # state of the same size (it only grows, but by a prune): the same agents are missing
        g = self.gone
        if g is None or g[0] is not cur or g[1] != len(agents):
            g = self.gone = (cur, len(agents), sorted(agents.keys() - cur.keys()))
        self.absent = fleet.missing(state, snap, self.absent, out, g[2])
        return out


class DodTicker:
    """dod's detector as the watcher runs it: the judge on the agents whose observation or
    record signature changed (``dod.signature``: its fold changes records in place), then the
    claims left unverified too long (a scan of the state's claims, every tick)."""

    def __init__(self) -> None:
        self.sched = Scheduler(sig=dod.signature)
        self.claims: set[str] = set()   # the agents in a claim not yet flagged (dod.claiming)

    def reset(self) -> None:
        self.sched.reset()

    def tick(self, state: dict[str, Any], snap: Any, now: float, claim_unverified_after: float) -> list[Any]:
        """This tick's events; if it raises, every agent is judged next tick."""
        try:
            return self._tick(state, snap, now, claim_unverified_after)
        except BaseException:
            self.sched.reset()
            raise

    def _tick(self, state: dict[str, Any], snap: Any, now: float, claim_unverified_after: float) -> list[Any]:
        agents, cur, failed = state["agents"], snap.agents, snap.failed or {}
        out: list[Any] = []
        sched, done = self.sched, []
        for aid in sched.pick(cur, agents, now, None, snap.gen, snap.dirty):
            obs, rec = cur[aid], agents.get(aid)
            if failed and obs.source in failed:   # its last state stands; judged once the source is back
                done.append((aid, obs, rec, fleet.NEXT_TICK))
                continue
            evs = dod.judge(aid, obs, rec)
            out += evs
            done.append((aid, obs, rec, fleet.NEXT_TICK if evs else _INF))
        sched.judged(done)
        # a claim starts or ends only through the agent's own events (it is then in the hint)
        if sched.hinted:
            for aid in snap.dirty:
                (self.claims.add if dod.claiming(agents.get(aid)) else self.claims.discard)(aid)
        else:
            self.claims = set(dod.claiming_ids(state))
        return out + dod.unverified_claims(state, now, claim_unverified_after, sorted(self.claims))


class FanoutTicker:
    """fleet.fanout's detector as the watcher runs it: the agents new to the state (in the
    snapshot, not alive) kept from tick to tick; an agent becomes or stops being alive only
    through its own events, so with the change hint only the hinted agents are looked at."""

    def __init__(self) -> None:
        self.sched = Scheduler()
        self.new: set[str] = set()

    def reset(self) -> None:
        self.sched.reset()

    def tick(self, state: dict[str, Any], snap: Any, now: float, **policy: Any) -> list[Any]:
        cur, alive, dirty = snap.agents, state["alive"], snap.dirty
        hinted = dirty is not None and snap.gen == self.sched.gen + 1 and len(cur) == self.sched.sizes[0]
        self.sched.gen, self.sched.sizes = snap.gen, (len(cur), len(alive))
        if hinted:
            for a in dirty:
                (self.new.add if a in cur and a not in alive else self.new.discard)(a)
        else:
            self.new = set(cur.keys() - alive.keys())
        return fanout.detect(state, snap, now, new=sorted(self.new), **policy)


class RunsTicker:
    """runs' detector as the watcher runs it (``runs.judge``): a run evaluated without an event is
    not evaluated again while its doc (by identity or equality), its folded record's stamp and
    its source are the ones it was quiet with and its wake (``runs.judge``: nothing changes for
    it by time alone until then) has not come; a run that raised on the very doc it still holds
    (the source hands on an unchanged file's doc object) is evaluated as unreadable from the
    start, so a fleet of such runs costs one pass a tick, not one a run. Both are forgotten when
    the policy changes. The same events as ``runs.detect`` (tests/watcher/runtime/test_schedule_differential.py);
    the skip pays its way on the idle tick of a fleet with runs (docs/bench.md, Steps)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.policy: Any = None
        self.quiet: dict[str, tuple[Any, Any, str, float]] = {}  # run -> (doc, stamp, source, wake)
        self.bad: dict[str, tuple[Any, str]] = {}   # run -> (the doc whose evaluation raised, why)

    def tick(self, state: dict[str, Any], snap: Any, now: float, **policy: Any) -> list[Any]:
        key = repr(sorted(policy.items()))
        if key != self.policy:
            self.reset()
            self.policy = key
        recs, cur = state["runs"], snap.runs
        hidden = {rid: why for rid, (doc, why) in self.bad.items()
                  if (o := cur.get(rid)) is not None and o.doc is doc}
        skip: set[str] = set()
        for rid, (doc, stamp, source, wake) in self.quiet.items():
            o, rs = cur.get(rid), recs.get(rid)
            if (o is not None and rs is not None and o.error is None and stamp == rs["stamp"]
                    and source == o.source and now <= wake and (doc is o.doc or doc == o.doc)):
                skip.add(rid)
        evs, bad, quiet = runs.judge(state, snap, now, hidden, skip, **policy)
        self.bad = {rid: (cur[rid].doc, why) for rid, why in bad.items()}
        for rid, until in quiet.items():
            if until is None:
                self.quiet.pop(rid, None)
            else:
                self.quiet[rid] = (cur[rid].doc, recs[rid]["stamp"], cur[rid].source, until)
        if len(self.quiet) > 2 * len(cur) + 64:
            for k in [k for k in self.quiet if k not in cur]:
                del self.quiet[k]
        return evs
