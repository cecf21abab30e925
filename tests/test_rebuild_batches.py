"""The replay's speed work changes no state (issue 19: the rebuild row): folding in batches one
projection at a time, the per-type dispatch and the caller's time caches give exactly the snapshot
bytes of each module's plain ``fold`` called on every event; ``rebuild --check`` still compares at
the very seq each snapshot covers. And the pure core keeps no cache of its own (issue 23)."""
from __future__ import annotations

import functools
from pathlib import Path
import random

import pytest

from events.log import EventLog
from events.timefmt import iso
from events.types import (AgentClassified, AgentNudged, CircuitChanged, DodFlagged, DodVerdict, NoticeAcked,
                          NoticeFailed, NoticeSent, SilenceAdded, SourceFailed, SourceRecovered, StepChanged,
                          SwarmChanged, WatcherStarted, WatcherStopped, WpChanged)
from projections import base
from projections.base import encode_state, registry
from watcher.runtime import state as state_mod
from watcher.runtime.state import Projections, TimeCache, rebuild

T0 = 1_800_000_000.0
CLASSES = ("TRABAJANDO", "RECLAMA", "DICE_TERMINADO", "ESTANCADO", "CERRADO", "MAL_LANZADO")


def churn(path: str, appends: int = 160, seed: int = 5) -> EventLog:
    """A seeded log of every type notify and report fold: agents through every class (and
    closed), verdicts, pushes of live conditions, failures, acks, silences, steps, work packages,
    swarms, restarts; appends of 1..40 events sharing a time, the clock jumping by 0 s .. 2 days
    (so prunes, sweeps and UTC midnights are crossed)."""
    rnd = random.Random(seed)
    elog = EventLog(path, durability="normal")
    now, last_cls = T0, {}
    for _ in range(appends):
        now += rnd.choice((0.0, 0.5, 1.0, 30.0, 400.0, 3600.0, 86400.0 * 2))
        evs, agents = [], []
        for _ in range(rnd.randrange(1, 40)):
            k = rnd.random()
            a = f"a{rnd.randrange(12)}"
            if k < 0.4:
                to = rnd.choice(CLASSES)
                evs.append(AgentClassified(agent=a, to=to, state="busy", phase="haciendo", reason="busy"))
                agents.append((a, to))
            elif k < 0.45:
                evs.append(DodVerdict(agent=a, verdict=rnd.choice(("met", "failed", "unevaluable")),
                                      verifier=rnd.choice(("v1", a, "fleetwatch-checks")), evidence="pytest -q"))
            elif k < 0.5 and last_cls:
                cid = rnd.choice(sorted(last_cls.values()))
                typ = rnd.choice((NoticeSent, NoticeFailed, NoticeAcked))
                if typ is NoticeSent:
                    evs.append(NoticeSent(notice=f"n{rnd.randrange(99)}", covers=[1], keys=[cid + "@0"],
                                          severity=rnd.choice(("urgent", "warning"))))
                elif typ is NoticeFailed:
                    evs.append(NoticeFailed(notice=f"n{rnd.randrange(99)}", keys=[cid + "@0"], error="timeout",
                                            retry_at=iso(now + 60)))
                else:
                    evs.append(NoticeAcked(notice=f"n{rnd.randrange(99)}", conditions=[cid]))
            elif k < 0.55:
                evs.append(AgentNudged(agent=a, attempt=rnd.randrange(1, 3)))
            elif k < 0.65:
                m = f"m{rnd.randrange(3)}"
                evs.append(WpChanged(mission=m, wp=f"{m}-wp{rnd.randrange(4)}",
                                     to=rnd.choice(("READY", "RUNNING", "DONE", "APPROVAL_REQUIRED", "BLOCKED"))))
            elif k < 0.75:
                evs.append(SwarmChanged(group=f"g{rnd.randrange(3)}", child=f"c{rnd.randrange(5)}",
                                        to=rnd.choice(("queued", "running", "done", "failed"))))
            elif k < 0.82:
                evs.append(StepChanged(run=f"r{rnd.randrange(3)}", step="apply",
                                       to=rnd.choice(("begin", "done", "fail")), attempt=rnd.randrange(1, 3)))
            elif k < 0.86:
                evs.append(rnd.choice((SourceFailed, SourceRecovered))(source="fleet", error="timeout"))
            elif k < 0.89:
                evs.append(rnd.choice((WatcherStarted, WatcherStopped))(version="1", pid=1))
            elif k < 0.92:
                evs.append(CircuitChanged(scope=f"m{rnd.randrange(3)}", to=rnd.choice(("OPEN", "CLOSED"))))
            elif k < 0.95:
                evs.append(DodFlagged(agent=a, flag=rnd.choice(("self-approved", "claim-unverified"))))
            else:
                evs.append(SilenceAdded(silence=f"s{rnd.randrange(4)}", subject_match=f"agent:{a}",
                                        until=iso(now + rnd.choice((60, 86400 * 3)))))
        seqs = elog.append(evs, now)
        for (a, to), seq in zip(agents, [s for s, e in zip(seqs, evs) if isinstance(e, AgentClassified)]):
            last_cls[a] = f"agent:{a}|{to}#{seq}"
    return elog


def plain_replay(elog: EventLog) -> dict[str, bytes]:
    """Each module's own ``fold`` on every event, one by one: no TYPES skip, no caches, no batches."""
    out = {}
    for name, m in registry().items():
        st = m.initial()
        for rec in elog.read(0):
            st = m.fold(st, rec)
        out[name] = encode_state(st)
    return out


@pytest.mark.parametrize("batch", [1, 7, 2000])
def test_batched_replay_equals_the_plain_fold_of_every_event(tmp_path, monkeypatch, batch):
    monkeypatch.setattr(state_mod, "FOLD_BATCH", batch)
    elog = churn(str(tmp_path / "e.db"))
    want = plain_replay(elog)
    p, diff = rebuild(elog, store=False)
    assert diff is None and p.encoded() == want
    q = Projections()                      # event by event, as the live loop folds
    for rec in elog.read(0):
        q.fold(rec)
    assert q.encoded() == want
    elog.close()


def test_catch_up_from_the_middle_equals_the_full_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(state_mod, "FOLD_BATCH", 13)
    elog = churn(str(tmp_path / "e.db"))
    head = elog.head()[0]
    p = Projections()
    for rec in elog.read(0, limit=head // 3):
        p.fold(rec)
    assert p.catch_up(elog) == head - head // 3
    assert p.seq == head and p.encoded() == plain_replay(elog)
    elog.close()


def test_rebuild_check_compares_at_a_snapshot_seq_inside_a_batch(tmp_path, monkeypatch):
    """A snapshot stored at a seq that is no batch border is compared at that seq: equal when
    right, named when its bytes were made at another seq."""
    monkeypatch.setattr(state_mod, "FOLD_BATCH", 50)
    elog = churn(str(tmp_path / "e.db"))
    mid = 123
    p = Projections()
    for rec in elog.read(0, limit=mid):
        p.fold(rec)
    elog.put_snapshots(mid, p.encoded())
    _, diff = rebuild(elog, check=True, store=False)
    assert diff is None
    p.fold(next(iter(elog.read(mid, limit=1))))        # the states one event later, stored as at ``mid``
    changed = {n: b for n, b in p.encoded().items() if b != encode_state(Projections().states[n])}
    elog.put_snapshots(mid, p.encoded())
    _, diff = rebuild(elog, check=True, store=False)
    assert diff is not None and diff.seq == mid and diff.projection in changed
    elog.close()


def test_time_cache_parses_each_distinct_time_once_and_stays_bounded():
    calls = []
    tc = TimeCache(lambda s: calls.append(s) or float(len(calls)))
    assert [tc[s] for s in ("a", "a", "b", "b", "a")] == [1.0, 1.0, 2.0, 2.0, 1.0]
    assert calls == ["a", "b"]
    for i in range(TimeCache.MAX + 10):
        tc[str(i)]
    assert len(tc) <= TimeCache.MAX


def _containers(m) -> dict:
    """The module's global dicts, lists and sets by name: their keys (or length)."""
    return {k: sorted(map(repr, v)) if isinstance(v, (dict, set)) else len(v)
            for k, v in vars(m).items() if isinstance(v, (dict, list, set)) and not k.startswith("__")}


NOTIFY_REPORT = ("notify", "notify_escalate", "notify_flap", "notify_msg", "notify_plan", "notify_policy",
                 "notify_quiet", "notify_rules", "report", "report_view")


def test_no_module_level_cache_in_notify_and_report(tmp_path):
    """Issue 23: folding, planning and the report's figures leave every module global of
    notify*/report* as it was (no memo dict that fills), and none is an lru_cache."""
    import importlib

    from projections import notify_plan, report_view
    from projections.notify_flap import FlapMemo
    from projections.notify_policy import Policy

    mods = [importlib.import_module(f"projections.{n}") for n in NOTIFY_REPORT]
    for m in mods:
        assert not [k for k, v in vars(m).items()
                    if isinstance(v, functools._lru_cache_wrapper) and v.__module__ == m.__name__], m.__name__
    before = {m.__name__: _containers(m) for m in mods}
    elog = churn(str(tmp_path / "e.db"))
    p, _ = rebuild(elog, store=False)
    memo = FlapMemo()
    for dt in (0, 10, 600):
        notify_plan.plan(p["notify"], T0 + dt, Policy(), flap_memo=memo)
    report_view.figures(p["report"], T0 + 86400 * 30)
    after = {m.__name__: _containers(m) for m in mods}
    assert after == before
    assert after == _fresh_containers()   # and as a fresh import has them: a memo filled earlier
    elog.close()                          # in this process (by other tests) compares equal above


def _fresh_containers() -> dict:
    """:func:`_containers` of every NOTIFY_REPORT module as a fresh interpreter imports them."""
    import json
    import subprocess
    import sys
    code = ("import importlib, json, sys; from tests.test_rebuild_batches import NOTIFY_REPORT, _containers; "
            "print(json.dumps({f'projections.{n}': _containers(importlib.import_module(f'projections.{n}')) "
            "for n in NOTIFY_REPORT}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[1])).stdout
    return json.loads(out)


def test_the_framework_documents_time(tmp_path):
    """A module's ``TIME`` is what its fold reads ``rec.time`` with when no cache is passed."""
    for name, m in registry().items():
        t = getattr(m, "TIME", None)
        if t is not None:
            import inspect
            assert inspect.signature(m.fold).parameters["times"].default is t, name
    assert "TIME" in (base.__doc__ or "")


def bench_mix(path: str, n: int = 12_000, seed: int = 7) -> EventLog:
    """bench_rebuild.py's mix (agent classes of 500 agents, verdicts, work packages, circuits, swarm
    children, steps, source edges), appends of 1,000 events one second apart: over 2,000 notify
    conditions (the cap's prune), no time-based prune."""
    rnd = random.Random(seed)
    elog = EventLog(path, durability="normal")
    now, done = T0, 0
    while done < n:
        evs = []
        for _ in range(1000):
            k = rnd.random()
            a = f"a{rnd.randrange(500)}"
            if k < 0.45:
                evs.append(AgentClassified(agent=a, to=rnd.choice(CLASSES[:4] + ("TRABAJANDO",)), state="busy",
                                           phase="haciendo", reason="busy", source="fleet",
                                           contract_sha256=f"{a:0>64}", contract_len=40))
            elif k < 0.50:
                evs.append(DodVerdict(agent=a, verdict=rnd.choice(("met", "failed")), verifier="v1",
                                      evidence="pytest -q: green"))
            elif k < 0.70:
                m = rnd.randrange(50)
                evs.append(WpChanged(mission=f"m{m}", wp=f"m{m}-wp{rnd.randrange(20)}",
                                     to=rnd.choice(("READY", "RUNNING", "DONE", "FAILED", "APPROVAL_REQUIRED")),
                                     deps=[f"m{m}-wp0"], attempts=rnd.randrange(3), source="missions"))
            elif k < 0.72:
                evs.append(CircuitChanged(scope=f"m{rnd.randrange(50)}", to=rnd.choice(("OPEN", "CLOSED"))))
            elif k < 0.92:
                evs.append(SwarmChanged(group=f"g{rnd.randrange(40)}", child=f"c{rnd.randrange(30)}",
                                        to=rnd.choice(("queued", "running", "done", "failed")), label="read a file"))
            elif k < 0.99:
                evs.append(StepChanged(run=f"r{rnd.randrange(30)}", step=rnd.choice(("facts", "audit", "apply")),
                                       to=rnd.choice(("begin", "done"))))
            else:
                evs.append(rnd.choice((SourceFailed, SourceRecovered))(source="fleet", error="timeout"))
        now += 1.0
        elog.append(evs, now)
        done += len(evs)
    return elog


def test_replay_of_a_bench_sized_mix_equals_the_fold_of_every_event(tmp_path):
    """The rebuild row's log in small (the notify cap's prune runs): rebuild's batches (islice,
    the GC paused, compress by type) end in the bytes of each module's own fold of every event."""
    import gc

    elog = bench_mix(str(tmp_path / "e.db"))
    want = plain_replay(elog)
    was = gc.isenabled()
    p, diff = rebuild(elog, store=False)
    assert gc.isenabled() == was                  # the pause is undone
    assert diff is None and p.encoded() == want
    assert len(p["notify"]["conds"]) > 1000       # the cap's prune ran, not only appends
    elog.close()
