"""The runs detector keeps nothing between calls (issue 23, issue 46): what the watcher keeps (the
runs that raised, ``watcher.runtime.schedule.RunsTicker``) never changes what ``detect`` reports,
tick by tick. Also the speed work's
equivalences (the UTC day without strftime, time stamps without a cache, the fixed step order)."""
from __future__ import annotations

import copy
from datetime import datetime, timezone

import msgspec
import pytest

from events.types import RuleViolated
from projections.runs import fold as runs
from projections.runs import parse as runs_parse
from projections.runs import quota as runs_quota
from projections.runs import rules as runs_rules
from watcher.runtime.schedule import RunsTicker
from tests.support.runsworld import MIN, T0, Harness, S, doc, fixture_docs, snap


def _enc(evs: list) -> bytes:
    return msgspec.json.encode([[type(e).__struct_config__.tag, e] for e in evs])


def _tick_both(h: Harness, sn, now: float, memo, **policy):
    """detect on a copy of the state, the watcher's RunsTicker on the state; fold what it found."""
    want = runs.detect(copy.deepcopy(h.state), sn, now, **policy)
    memo = memo or RunsTicker()
    got = memo.tick(h.state, sn, now, **policy)
    assert _enc(got) == _enc(want), now
    if got:
        h.log.append(got, now)
    for rec in h.log.read(h.seq):
        h.state = runs.fold(h.state, rec)
        h.seq = rec.seq
    return got, memo


def test_the_ticker_never_changes_what_a_tick_reports(tmp_path):
    h = Harness(tmp_path)
    try:
        memo = None
        a = doc("R1", {"facts": S("done", 0), "audit": S("begin", 1)})
        b = doc("R2", {"facts": S("done", 0)})
        got, memo = _tick_both(h, snap(a, b), T0 + 2 * MIN, memo)
        assert got
        for m in (3, 4, 5):  # nothing changes: nothing reported
            got, memo = _tick_both(h, snap(a, b), T0 + m * MIN, memo)
            assert got == []
        # time alone: audit in begin past the 45 min deadline -> step.overdue, once
        got, memo = _tick_both(h, snap(a, b), T0 + 47 * MIN, memo)
        assert [type(e).__name__ for e in got] == ["StepOverdue"]
        got, memo = _tick_both(h, snap(a, b), T0 + 48 * MIN, memo)
        assert got == []
        # a file changes, another run goes away
        a2 = doc("R1", {"facts": S("done", 0), "audit": S("done", 50, verdict="pass")})
        got, memo = _tick_both(h, snap(a2), T0 + 51 * MIN, memo)
        assert {(type(e).__name__, e.run) for e in got} == {("StepChanged", "R1"), ("RunChanged", "R2")}
        # another writer's event folded into the state: the run is looked at again
        h.log.append([RuleViolated(run="R1", rule="no-redo", key="no-redo:audit#9")], T0 + 52 * MIN)
        got, memo = _tick_both(h, snap(a2), T0 + 52 * MIN, memo)
        assert got == []
        assert h.state["runs"]["R1"]["violations"].get("no-redo:audit#9")
    finally:
        h.close()


def test_a_run_quiet_under_one_deadline_is_overdue_under_another(tmp_path):
    # a run quiet until its 45 min deadline is overdue at once when the deadline becomes 5 min
    h = Harness(tmp_path)
    try:
        d = doc("R1", {"facts": S("begin", 0)})
        _, memo = _tick_both(h, snap(d), T0 + 1 * MIN, None)
        got, memo = _tick_both(h, snap(d), T0 + 2 * MIN, memo)
        assert got == []
        got, memo = _tick_both(h, snap(d), T0 + 6 * MIN, memo, default_deadline=5 * MIN)
        assert [type(e).__name__ for e in got] == ["StepOverdue"]
    finally:
        h.close()


def _module_containers() -> dict[str, bytes]:
    out = {}
    for mod in (runs, runs_parse, runs_quota, runs_rules):
        for k, v in vars(mod).items():
            if isinstance(v, (dict, list, set)):
                out[f"{mod.__name__}.{k}"] = repr(v).encode()
    return out


def test_detect_keeps_nothing_at_module_level():
    # issue 23: no memo dict in the pure core (it was runs._memo and runs_rules._TS)
    before = _module_containers()
    t1, t2 = fixture_docs()
    now = T0 + 90 * MIN
    st = runs.initial()
    runs.detect(st, snap(t1, t2), now)
    runs.judge(st, snap(t1, t2), now, {})
    assert _module_containers() == before
    assert not hasattr(runs, "_memo") and not hasattr(runs_rules, "_TS")


@pytest.mark.parametrize("t", [0.0, -1.0, -86400.0, 86399.999, 1_795_946_400.0, 1e11 - 1,
                               -62135596800.0, 253402300799.0])
def test_the_utc_day_of_an_epoch_is_strftimes_even_for_year_one(t):
    assert runs_quota.day(t) == datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d")


def test_a_step_time_of_a_date_alone_with_z_is_still_read():
    assert runs_rules.ts("2026-11-29Z") == datetime(2026, 11, 29, tzinfo=timezone.utc).timestamp()
    assert runs_rules.ts("2026-11-29T10:00:00.5Z") == T0 + 0.5
    assert runs_rules.ts("2026-11-29T10:00:00+01:00Z") is None
    assert runs_rules.ts("2026-11-29T10:00:00x") is None  # only a final "Z" means UTC


@pytest.mark.parametrize("names,want", [
    (["notify", "facts"], ["facts", "notify"]),
    (["zz", "facts", "aa"], ["facts", "aa", "zz"]),
    ({"audit": 1, "facts": 2}.keys(), ["facts", "audit"]),
    ((n for n in ["deploy", "apply"]), ["apply", "deploy"]),
    ([], []),
])
def test_steps_come_in_the_fixed_order_then_unknown_ones_alphabetically(names, want):
    assert runs_parse.step_names(names) == want


def test_an_epoch_at_with_a_sub_millisecond_fraction_is_not_a_rerun_every_tick(tmp_path):
    # the event keeps `at` as ISO text (milliseconds): read back, it was another time than the
    # file's epoch, so every tick reported the step "repeated between polls" and a no-redo
    h = Harness(tmp_path)
    try:
        d = doc("R1", {"facts": {"status": "done", "at": T0 + 0.1234}})
        assert h.tick(snap(d), T0 + 10)
        assert h.tick(snap(d), T0 + 11) == []
        assert h.tick(snap(d), T0 + 12) == []
    finally:
        h.close()


def test_launch_intents_own_continue_from_holds_it_when_apply_begins_in_the_same_tick(tmp_path):
    # the audit-branch restriction is asked once per run for apply/upload_intent/ledger, but
    # launch_intent's own data.continue_from is its own: a tainted one holds the launch only
    h = Harness(tmp_path)
    try:
        a = doc("A", {"facts": S("done", 0), "audit": S("done", 1, verdict="fail")})
        h.tick(snap(a), T0 + 2 * MIN)
        b = doc("B", {"audit": S("done", 3, verdict="pass"), "apply": S("begin", 4),
                      "validate": S("done", 5), "deploy": S("done", 6),
                      "launch_intent": S("begin", 7, request_id="r1", continue_from="A")})
        evs = h.tick(snap(a, b), T0 + 8 * MIN)
        held = [(e.step, e.detail) for e in evs if type(e).__name__ == "RuleViolated" and e.rule == "audit-branch"]
        assert held == [("launch_intent", "launch_intent began while it continues from tainted run A")]
    finally:
        h.close()


@pytest.mark.parametrize("at", ["2026-11-29T10:00:00Z", "2026-11-29T10:00:00.123Z", "2026-11-29Z", "2026-11-29T10Z",
                                "20261129T100000Z", "2026-11-29T10:00:00+01:00Z", "Z", "2026-11-29T10:00:00",
                                "2026-11-29T11:00:00+01:00"])
def test_a_step_at_reads_as_the_rules_read_it(at):
    # the view's fast reading of "…Z" texts gives ts's answer, the texts only ts reads included
    assert runs_parse.parse_step("facts", {"status": "done", "at": at})[2] == runs_rules.ts(at)


def test_the_watcher_judges_its_runs_through_the_runs_ticker(tmp_path):
    # the Watcher's runs detector is its RunsTicker (Watcher.tickers["runs"]): a quiet tick reports nothing
    import json

    from events.log import EventLog
    from watcher.config import parse
    from watcher.runtime.loop import Watcher

    t1, t2 = fixture_docs()
    for d in (t1, t2):
        (tmp_path / "runs" / d["run"]).mkdir(parents=True)
        (tmp_path / "runs" / d["run"] / "steps.json").write_text(json.dumps(d))
    db = tmp_path / "events.db"
    cfg = parse(f'[store]\npath = "{db}"\n[[sources]]\nname = "steps"\nkind = "steps"\n'
                f'glob = "{tmp_path}/runs/*/steps.json"\n')
    elog = EventLog(str(db))
    w = Watcher(cfg, elog)
    try:
        now = T0 + 90 * MIN
        assert isinstance(w.tickers["runs"], RunsTicker)
        assert w.tick(now) > 0
        assert set(w.proj["runs"]["runs"]) == {t1["run"], t2["run"]}
        assert w.tick(now + 1) == 0
        assert w.tick(now + 2) == 0 and w.tickers["runs"].bad == {}
    finally:
        w.close()
        elog.close()
