"""The replay's speed work changes no state (issue 19: the rebuild row): folding in batches one
projection at a time, the per-type dispatch and the caller's time caches give exactly the snapshot
bytes of each module's plain ``fold`` called on every event; ``rebuild --check`` still compares at
the very seq each snapshot covers. And the pure core keeps no cache of its own (issue 23)."""
from __future__ import annotations

import functools

import pytest

from projections import base
from projections.base import encode_state, registry
from watcher.runtime import state as state_mod
from watcher.runtime.state import Projections, TimeCache, rebuild

from tests.support.seededlogs import T0, bench_mix, churn, plain_replay
from tests.support.exe import ROOT


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


NOTIFY_REPORT = tuple(f"projections.{m}" for m in (
    "notify.fold", "notify.escalate", "notify.flap", "notify.msg", "notify.plan", "notify.policy",
    "notify.quiet", "notify.rules", "report.fold", "report.view"))


def test_no_module_level_cache_in_notify_and_report(tmp_path):
    """Issue 23: folding, planning and the report's figures leave every module global of
    notify*/report* as it was (no memo dict that fills), and none is an lru_cache."""
    import importlib

    from projections.notify import plan as notify_plan
    from projections.report import view as report_view
    from projections.notify.policy import Policy

    mods = [importlib.import_module(n) for n in NOTIFY_REPORT]
    for m in mods:
        assert not [k for k, v in vars(m).items()
                    if isinstance(v, functools._lru_cache_wrapper) and v.__module__ == m.__name__], m.__name__
    before = {m.__name__: _containers(m) for m in mods}
    elog = churn(str(tmp_path / "e.db"))
    p, _ = rebuild(elog, store=False)
    for dt in (0, 10, 600):
        notify_plan.plan(p["notify"], T0 + dt, Policy())
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
    code = ("import importlib, json, sys; from tests.watcher.runtime.test_rebuild_batches import NOTIFY_REPORT, _containers; "
            "print(json.dumps({n: _containers(importlib.import_module(n)) "
            "for n in NOTIFY_REPORT}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(ROOT)).stdout
    return json.loads(out)


def test_the_framework_documents_time(tmp_path):
    """A module's ``TIME`` is what its fold reads ``rec.time`` with when no cache is passed."""
    for name, m in registry().items():
        t = getattr(m, "TIME", None)
        if t is not None:
            import inspect
            assert inspect.signature(m.fold).parameters["times"].default is t, name
    assert "TIME" in (base.__doc__ or "")


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
