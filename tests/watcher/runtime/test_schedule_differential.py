"""The one guard of the watcher's incrementality (watcher/runtime/schedule.py): judging only the
agents that changed or are due gives the very events of judging every agent (``fleet.detect``),
tick by tick, on random fleets and histories — observations that change, agents that come and
go, sources that fail, the clock moving on, standing still and going back, the policy changing,
the change hint given, withheld and narrowed as the watcher narrows it; and for runs, judging
only the runs not known quiet gives ``runs.detect``'s events."""
from __future__ import annotations

import copy
import random

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.log import Recorded
from events.timefmt import iso
from events.types import AgentClassified, DodVerdict, tag_of
from projections import classes
from projections.dod import fold as dod
from projections.fleet import fanout
from projections.fleet import fold as fleet
from projections.runs import fold as runs
from projections.runs import parse as runs_parse
from projections.observations import AgentObs, Snapshot, SourceResult
from tests.support.runsworld import T0 as T0_RUNS
from tests.support.runsworld import S, doc
from tests.support.runsworld import snap as runsworld_snap
from watcher.runtime.schedule import DodTicker, FanoutTicker, FleetTicker, RunsTicker

T0 = 1_800_000_000.0
STATES = ("busy", "idle", "waiting", "weird")
PHASES = ("haciendo", "hecho", "preguntando", "done", None)


def random_obs(rng: random.Random, aid: str, now: float) -> AgentObs:
    return AgentObs(agent=aid, source=rng.choice(("goals", "other")), state=rng.choice(STATES),
                    phase=rng.choice(PHASES), contract_sha256=rng.choice(("c" * 64, "c" * 64, None)),
                    last_activity=rng.choice((None, now - rng.uniform(0, 3000))), task=rng.choice((None, "t1", "t2")),
                    ended=rng.random() < 0.05, tool_open=rng.random() < 0.2,
                    error=("unreadable" if rng.random() < 0.03 else None))


def fold(state: dict, events: list, seq: list[int], now: float) -> None:
    recs = []
    for ev in events:
        seq[0] += 1
        recs.append(Recorded(seq[0], f"id{seq[0]}", iso(now), tag_of(ev), ev.subject, 1, ev, b"", b""))
    for rec in recs:
        fleet.fold(state, rec)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ticks=st.integers(5, 40), size=st.integers(1, 30))
def test_judging_changed_and_due_gives_the_events_of_judging_everyone(seed, ticks, size):
    rng = random.Random(seed)
    now = T0
    ids = [f"a{i:02d}" for i in range(size)]
    cur = {a: random_obs(rng, a, now) for a in ids if rng.random() < 0.8}
    state = fleet.initial()
    seq = [0]
    ticker = FleetTicker()
    absent: dict[str, int] = {}
    limits = fleet.Limits(900.0, 600.0, 1800.0)
    gen = 0
    touched: set[str] | None = set()
    for _ in range(ticks):
        changed: set[str] = set()
        for a in rng.sample(ids, k=rng.randint(0, min(len(ids), 5))):   # some agents change, come or go
            cur = dict(cur)   # the merge hands out a new dict, never mutates one it handed out
            if rng.random() < 0.15 and a in cur:
                del cur[a]
            else:
                cur[a] = random_obs(rng, a, now)
            changed.add(a)
        now += rng.choice((0.0, 1.0, 30.0, 600.0, 901.0, 3600.0, -120.0, -1500.0))   # standing, moving, going back
        if rng.random() < 0.05:
            limits = fleet.Limits(rng.choice((300.0, 900.0)), rng.choice((None, 600.0)), 1800.0)
        failed = {"goals": "boom"} if rng.random() < 0.1 else {}
        results = [SourceResult(name="goals", kind="goals", ok=not failed, error="boom" if failed else None)]
        gen += 1
        if touched is None or rng.random() < 0.1:
            dirty = None   # another writer's events, a full merge: no hint
        else:
            dirty = frozenset(changed | touched)
        snap = Snapshot(results=results, agents=cur, failed=failed, gen=gen, dirty=dirty)
        want, absent = fleet.detect(state, snap, now, limits, absent)
        got = ticker.tick(state, snap, now, limits)
        assert got == want
        assert ticker.absent == absent
        fold(state, want, seq, now)
        touched = {ev.agent for ev in want if hasattr(ev, "agent")}
        if any(not hasattr(ev, "agent") for ev in want):
            touched = None
        if state["agents"] and rng.random() < 0.15:   # another writer's event: a record changes, no hint
            a = rng.choice(sorted(state["agents"]))
            fold(state, [AgentClassified(agent=a, to=rng.choice(sorted(classes.NAMES)), reason="elsewhere",
                                         source="goals")], seq, now)
            touched = None


def random_dod_obs(rng: random.Random, aid: str, now: float) -> AgentObs:
    base = random_obs(rng, aid, now)
    return msgspec.structs.replace(
        base, state=rng.choice(("busy", "idle")), phase=rng.choice(("haciendo", "hecho")),
        contract_sha256=rng.choice(("c1", "c2", None)), contract_len=10,
        dod_status=rng.choice((None, "pending", "met", "failed", " MET ")),
        dod_verifier=rng.choice((None, "", aid, "v1", "v2")))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ticks=st.integers(5, 40), size=st.integers(1, 20))
def test_dod_judging_changed_agents_gives_the_events_of_judging_everyone(seed, ticks, size):
    """dod's judge on the agents whose observation or record signature changed (its fold changes
    records in place), and its unverified claims, against ``dod.detect`` (and fanout's new agents
    kept from tick to tick against ``fanout.detect``): the fleet's and dod's
    events of each tick folded into both states, claims made and left to come due, verdicts from
    another writer, failed sources, the clock moving on and going back."""
    rng = random.Random(seed)
    now = T0
    ids = [f"a{i:02d}" for i in range(size)]
    cur = {a: random_dod_obs(rng, a, now) for a in ids if rng.random() < 0.8}
    fst, dst, ost = fleet.initial(), dod.initial(), fanout.initial()
    seq = [0]
    ticker, fanouts = DodTicker(), FanoutTicker()
    limits = fleet.Limits(900.0, None, None)
    gen = 0
    touched: set[str] | None = set()
    for _ in range(ticks):
        changed: set[str] = set()
        for a in rng.sample(ids, k=rng.randint(0, min(len(ids), 5))):
            cur = dict(cur)
            if rng.random() < 0.1 and a in cur:
                del cur[a]
            else:
                cur[a] = random_dod_obs(rng, a, now)
            changed.add(a)
        now += rng.choice((0.0, 60.0, 900.0, 1801.0, -300.0))
        failed = {"goals": "boom"} if rng.random() < 0.1 else {}
        gen += 1
        dirty = None if touched is None or rng.random() < 0.1 else frozenset(changed | touched)
        snap = Snapshot(agents=cur, failed=failed, gen=gen, dirty=dirty)
        fleet_evs, _ = fleet.detect(fst, snap, now, limits, {})
        want = dod.detect(dst, snap, now, claim_unverified_after=1800.0)
        got = ticker.tick(dst, snap, now, 1800.0)
        assert got == want
        launches = fanout.detect(ost, snap, now, fanout_max=2, fanout_window=600.0)
        assert fanouts.tick(ost, snap, now, fanout_max=2, fanout_window=600.0) == launches
        evs = fleet_evs + want + launches
        if dst["agents"] and rng.random() < 0.15:   # another writer's verdict: a record changes in place
            evs.append(DodVerdict(agent=rng.choice(sorted(dst["agents"])), verdict=rng.choice(("met", "failed")),
                                  verifier=rng.choice(("v1", "v9")), evidence="elsewhere",
                                  source=rng.choice(("goal.json", "cli"))))
            touched = None
        else:
            touched = {ev.agent for ev in evs if hasattr(ev, "agent")}
        recs = []
        for ev in evs:
            seq[0] += 1
            recs.append(Recorded(seq[0], f"id{seq[0]}", iso(now), tag_of(ev), ev.subject, 1, ev, b"", b""))
        for rec in recs:
            fleet.fold(fst, rec)
            dod.fold(dst, rec)
            fanout.fold(ost, rec)


RUN_STATUSES = ("begin", "done", "fail", "skip", "review")


def random_run_doc(rng: random.Random, rid: str, minute: float) -> dict:
    steps = {}
    for name in rng.sample(runs_parse.ORDER, k=rng.randint(0, 5)):
        steps[name] = S(rng.choice(RUN_STATUSES), rng.choice((None, minute - rng.uniform(0, 120), minute)),
                        **({"verdict": rng.choice(("pass", "fail", "review"))} if name == "audit" else {}))
    return doc(rid, steps, failures=rng.choice((0, 0, 1, 2)), board=rng.choice(("b1", "b2")),
               **({"continue_from": rng.choice(("R0", "R1"))} if rng.random() < 0.2 else {}))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ticks=st.integers(5, 30), size=st.integers(1, 8))
def test_runs_ticker_gives_the_events_of_judging_every_run(seed, ticks, size):
    """runs: the watcher's RunsTicker (quiet runs skipped until their wake, runs that raised kept
    hidden) gives ``runs.detect``'s events, tick by tick: docs that change or stay the same object,
    runs that come and go or turn unreadable, the clock moving on and back, the deadline changing."""
    rng = random.Random(seed)
    minute, ids = 0.0, [f"R{i}" for i in range(size)]
    docs = {r: random_run_doc(rng, r, minute) for r in ids if rng.random() < 0.8}
    errors: dict[str, str] = {}
    state, seq, ticker = runs.initial(), [0], RunsTicker()
    deadline = 2700.0
    for _ in range(ticks):
        for r in rng.sample(ids, k=rng.randint(0, min(len(ids), 3))):
            x = rng.random()
            if x < 0.15:
                docs.pop(r, None)
            elif x < 0.2:
                errors[r] = "unreadable"
            else:
                errors.pop(r, None)
                docs[r] = random_run_doc(rng, r, minute)
        if rng.random() < 0.1:
            deadline = rng.choice((300.0, 2700.0))
        minute += rng.choice((0.0, 0.5, 3.0, 30.0, 60.0, -2.0))
        now = T0_RUNS + minute * 60
        sn = runsworld_snap(*[d for r, d in docs.items() if r not in errors], errors=errors)
        want = runs.detect(copy.deepcopy(state), sn, now, default_deadline=deadline)
        got = ticker.tick(state, sn, now, default_deadline=deadline)
        assert msgspec.json.encode(got) == msgspec.json.encode(want)
        recs = []
        for ev in got:
            seq[0] += 1
            recs.append(Recorded(seq[0], f"id{seq[0]}", iso(now), tag_of(ev), ev.subject, 1, ev, b"", b""))
        for rec in recs:
            state = runs.fold(state, rec)
