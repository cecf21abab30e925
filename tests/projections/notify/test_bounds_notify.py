"""The notify state's bounds, reached (issue 23): MAX_CONDS, MAX_RECENT, MAX_EXPIRY and the retry
table, each driven past its bound on a virtual clock; what is kept, what is dropped, that a RECLAMA
is not forgotten while anything else can go first, and that nothing is pushed twice after a prune."""
from __future__ import annotations


from events.types import NoticeFailed, NoticeSent, RuleViolated
from projections.notify import fold as notify
from projections.base import decode_state, encode_state
from projections.notify.fold import MAX_CONDS, MAX_EXPIRY, MAX_RECENT
from projections.notify.plan import plan

from tests.support.notifyworld import P, T0, World

KEEP = MAX_CONDS * 3 // 4          # what an over-cap prune cuts down to


def reclama_sent(w: World, agent: str, t: float) -> str:
    """``agent`` RECLAMA, planned and pushed (its notice.sent folded); its condition id."""
    w.cls(agent, "RECLAMA", t, state="waiting")
    [m] = plan(w.state, t + P.group_wait, P).send
    w.sent(m, t + P.group_wait + 1)
    return w.state["agents"][agent]["cond"]


def flood_cleared(w: World, n: int, t: float, prefix: str = "f") -> None:
    """``n`` agents each RECLAMA then TRABAJANDO in one instant: ``n`` cleared conditions, none old
    enough (5 min) to be pruned by age."""
    for i in range(n):
        w.cls(f"{prefix}{i}", "RECLAMA", t, state="waiting")
        w.cls(f"{prefix}{i}", "TRABAJANDO", t)
        assert len(w.state["conds"]) <= MAX_CONDS


def test_max_conds_exactly_is_kept_and_one_more_cuts_the_cleared_to_three_quarters():
    w = World()
    for i in range(MAX_CONDS):
        w.cls(f"a{i}", "ESTANCADO", T0, state="idle")
        w.cls(f"a{i}", "TRABAJANDO", T0, state="busy")           # cleared: droppable past the cap
    assert len(w.state["conds"]) == MAX_CONDS                       # at the bound: nothing dropped
    w.cls("last", "ESTANCADO", T0, state="idle")
    assert len(w.state["conds"]) == KEEP                           # past it: down to 3/4 at once
    kept = {c["name"] for c in w.state["conds"].values()}
    assert kept == {f"a{i}" for i in range(MAX_CONDS + 1 - KEEP, MAX_CONDS)} | {"last"}   # the newest


def test_past_max_conds_no_active_condition_is_dropped():
    """Regression (the cap once dropped the oldest active conditions): 2,001 stalled agents are
    2,001 levels nobody dealt with; the cap bounds what can never be pushed again, not the fleet."""
    w = World()
    for i in range(MAX_CONDS + 1):
        w.cls(f"a{i}", "ESTANCADO", T0, state="idle")
    assert len(w.state["conds"]) == MAX_CONDS + 1
    assert all(v["cond"] in w.state["conds"] for v in w.state["agents"].values())


def test_past_max_conds_cleared_conditions_go_before_a_pushed_reclama():
    w = World()
    cid = reclama_sent(w, "keep", T0)
    flood_cleared(w, MAX_CONDS + 10, T0 + 20)
    c = w.state["conds"][cid]
    assert c["cleared"] is None and c["sent_rev"] == 0 and w.state["agents"]["keep"]["cond"] == cid
    cleared = [k for k, v in w.state["conds"].items() if v["cleared"] is not None]
    assert len(cleared) == len(w.state["conds"]) - 1
    # the oldest cleared ones went: the newest flood agents are still there
    names = {w.state["conds"][k]["name"] for k in cleared}
    assert f"f{MAX_CONDS + 9}" in names and "f0" not in names


def test_nothing_is_pushed_twice_after_an_overflow_prune():
    w = World()
    reclama_sent(w, "keep", T0)
    flood_cleared(w, MAX_CONDS + 10, T0 + 20)
    for t in (T0 + 21, T0 + 60, T0 + 400, T0 + 3600):   # within repeat_interval (4 h)
        assert plan(w.state, t, P).send == []


def test_past_max_conds_one_shots_go_before_an_unsent_reclama():
    """A burst of one-shot rule violations (never pushed, min_severity aside) over the cap:
    the active RECLAMA is kept and still pushed once."""
    w = World()
    w.cls("keep", "RECLAMA", T0, state="waiting")
    for i in range(MAX_CONDS + 5):
        w.add(RuleViolated(run=f"r{i}", rule="no-redo"), T0 + 1)
        assert len(w.state["conds"]) <= MAX_CONDS
    cid = w.state["agents"]["keep"]["cond"]
    assert cid in w.state["conds"]
    sent = [m for m in plan(w.state, T0 + 20, P).send if cid + "@0" in m.keys]
    assert len(sent) == 1


def test_past_max_conds_no_reclama_agent_is_forgotten():
    w = World()
    n = MAX_CONDS + 1
    for i in range(n):
        w.cls(f"a{i}", "RECLAMA", T0, state="waiting")
    missing = [a for a, v in w.state["agents"].items() if v["cond"] not in w.state["conds"]]
    assert missing == []
    assert plan(w.state, T0 + 20, P).send[0].title == f"{n} need you"


def test_snapshot_cuts_through_the_cap_equal_one_fold():
    """Decoding a snapshot at any cut, while the cap prunes, changes nothing."""
    evs = []
    for i in range(MAX_CONDS + 600):
        evs.append((f"f{i}", "RECLAMA", T0 + i * 0.01))
        if i % 3:
            evs.append((f"f{i}", "TRABAJANDO", T0 + i * 0.01))
    full, inc = World(), World()
    for i, (a, to, t) in enumerate(evs):
        full.cls(a, to, t, state="waiting")
        if i % 701 == 0:
            inc.state = decode_state(notify, encode_state(inc.state))
        inc.cls(a, to, t, state="waiting")
    assert encode_state(inc.state) == encode_state(full.state)
    assert len(full.state["conds"]) <= MAX_CONDS


def test_recent_notices_are_trimmed_past_max_recent_newest_kept():
    w = World()
    for i in range(MAX_RECENT + 64):
        w.add(NoticeSent(notice=f"n{i}", covers=[], attempt=1, title="t", severity="info", keys=[]), T0 + i * 0.001)
    assert len(w.state["recent"]) == MAX_RECENT + 64                # at the bound: nothing trimmed
    w.add(NoticeSent(notice="last", covers=[], attempt=1, title="t", severity="info", keys=[]), T0 + 1)
    rec = w.state["recent"]
    assert len(rec) == MAX_RECENT and "last" in rec and "n0" not in rec
    assert f"n{MAX_RECENT + 63}" in rec


def test_retry_entries_of_gone_conditions_are_swept_past_max_conds():
    w = World()
    w.cls("keep", "RECLAMA", T0, state="waiting")
    cid = w.state["agents"]["keep"]["cond"]
    keys = [f"notice:n{i}|GONE#{i}@0" for i in range(MAX_CONDS)] + [cid + "@0"]
    w.add(NoticeFailed(notice="n", attempt=1, error="500", keys=keys, retry_at=None), T0 + 11)
    assert set(w.state["retry"]) == {cid}                           # the live one keeps its backoff


def test_expiry_queue_is_rebuilt_past_max_expiry():
    """Pushed one-shots are deleted at once but leave their day-long expiry entry: past
    MAX_EXPIRY entries the queues are rebuilt from the live conditions (stale entries dropped)."""
    w = World()
    w.cls("keep", "RECLAMA", T0, state="waiting")
    for i in range(MAX_EXPIRY):
        seq = w.add(RuleViolated(run=f"r{i}", rule="no-redo"), T0 + 1)
        cid = f"run:r{i}|RULE_VIOLATED#{seq}"
        w.add(NoticeSent(notice=f"n{i}", covers=[seq], attempt=1, title="t", severity="warning",
                         keys=[cid + "@0"]), T0 + 2)
        assert cid not in w.state["conds"]                          # pushed: gone, its entry stays
    assert len(w.state["exp_day"]) == MAX_EXPIRY                    # at the bound: all stale, kept
    seq = w.add(RuleViolated(run="last", rule="no-redo"), T0 + 3)
    assert w.state["exp_day"] == [[T0 + 3 + notify.ONESHOT_KEEP_S, f"run:last|RULE_VIOLATED#{seq}"]]
    assert w.state["agents"]["keep"]["cond"] in w.state["conds"]


def test_silences_are_kept_a_day_past_their_end_then_swept():
    from events.log import iso
    from events.types import SilenceAdded
    w = World()
    w.add(SilenceAdded(silence="old", subject_match="agent:x", until=iso(T0 + 60)), T0)
    w.add(SilenceAdded(silence="new", subject_match="agent:x", until=iso(T0 + 2 * 86400)), T0)
    t = T0 + 60 + notify.ONESHOT_KEEP_S                     # exactly a day past its end: kept
    w.cls("a", "RECLAMA", t - 400, state="waiting")
    w.cls("a", "TRABAJANDO", t - 400)                       # cleared: its expiry brings a prune at t
    w.cls("b", "RECLAMA", t, state="waiting")
    assert set(w.state["silences"]) == {"old", "new"}
    w.cls("a", "RECLAMA", t + 1, state="waiting")
    w.cls("a", "TRABAJANDO", t + 1)
    w.cls("b", "TRABAJANDO", t + 1 + notify.CLEARED_KEEP_S + notify.SWEEP_S + 1)   # the next prune and sweep
    assert set(w.state["silences"]) == {"new"}


def test_past_max_conds_a_new_active_condition_runs_no_prune_that_can_drop_nothing(monkeypatch):
    """Regression (issue 19, a first tick over a stalled fleet of 10k-50k agents): past MAX_CONDS,
    every new condition ran ``prune``, though with both expiry queues empty it could drop nothing
    (active conditions are never dropped): 48,000 no-op prunes at 50k ESTANCADO agents, ~100 of
    the notify fold's ~330 ms. Now a prune runs past the cap only when a queue holds something or
    the sweep is due; the state is the same as the old fold's, a prune after every new condition
    past the cap (each skipped one was a no-op), and the sweep still runs on time."""
    calls = []
    real = notify.prune

    def counting(st, t):
        calls.append(t)
        real(st, t)

    def fold_all(extra_prune: bool) -> dict:
        w = World()
        for i in range(MAX_CONDS + 3000):  # 60 s of event time in 1/50 s steps: the sweep comes due once
            t = T0 + i / 50
            w.cls(f"a{i}", "ESTANCADO", t, state="idle")
            if extra_prune and len(w.state["conds"]) > MAX_CONDS:  # as the fold did: a prune per new one
                real(w.state, t)
        return w.state

    monkeypatch.setattr(notify, "prune", counting)
    state = fold_all(extra_prune=False)
    assert len(state["conds"]) == MAX_CONDS + 3000                  # every active one kept
    assert len(calls) <= 2, len(calls)                              # the sweeps due, not one a condition
    assert state["sweep_at"] > T0 + (MAX_CONDS + 3000) / 50 - 60    # the sweep ran when due
    monkeypatch.setattr(notify, "prune", real)
    assert encode_state(state) == encode_state(fold_all(extra_prune=True))
