"""The termination machine and the snapshot diff: pure, table-driven, virtual clock."""
from __future__ import annotations

import pytest

from events.log import EventLog
from projections.fleet import fold as fleet
from projections.fleet.fold import Cls, Limits, classify, detect
from projections.observations import AgentObs, Snapshot, SourceResult
from tests.support.fleetstep import NOW, STALL, obs, step

CLASSIFY = [
    # (observation, expected class) -- one row per rule of docs/contract.md, first match wins
    (None, Cls.CERRADO),                                                   # seen by no source
    (obs(ended=True), Cls.CERRADO),                                        # hook marked SessionEnd
    (obs(pane_dead=True, pane_dead_status=1), Cls.CERRADO),                # tmux pane died
    (obs(error="not JSON"), Cls.MAL_LANZADO),                              # unreadable / not JSON
    (obs(state="sleeping"), Cls.MAL_LANZADO),                              # unknown state
    (obs(state=None), Cls.MAL_LANZADO),                                    # no state at all
    (obs(contract_sha256=None), Cls.MAL_LANZADO),                          # no/empty dod_contract
    (obs(contract_sha256=None, state="waiting"), Cls.MAL_LANZADO),         # MAL_LANZADO beats RECLAMA
    (obs(state="waiting"), Cls.RECLAMA),                                   # waiting for the human
    (obs(state="busy", phase="preguntando"), Cls.RECLAMA),                 # asking
    (obs(state="idle", phase="bloqueado"), Cls.RECLAMA),                   # blocked
    (obs(state="idle", phase="asking"), Cls.RECLAMA),                      # English alias
    (obs(state="waiting", phase="hecho"), Cls.RECLAMA),                    # RECLAMA beats DICE_TERMINADO
    (obs(state="idle", phase="hecho"), Cls.DICE_TERMINADO),                # claims done
    (obs(state="idle", phase="done", last_activity=0), Cls.DICE_TERMINADO),  # done never stalls
    (obs(state="idle", last_activity=NOW - STALL), Cls.ESTANCADO),         # idle exactly stall_after
    (obs(state="idle", last_activity=NOW - STALL + 1), Cls.TRABAJANDO),    # idle, within stall_after
    (obs(state="idle", last_activity=None), Cls.TRABAJANDO),               # no activity known: not stalled
    (obs(state="busy", last_activity=0), Cls.TRABAJANDO),                  # busy never stalls
    (obs(state="busy", phase="testeando"), Cls.TRABAJANDO),                # anything else
]


@pytest.mark.parametrize("o,want", CLASSIFY)
def test_classify(o, want):
    cls, reason = classify(o, NOW, STALL)
    assert cls == want
    assert reason


def snap(*agents: AgentObs, failed: dict | None = None, results=None) -> Snapshot:
    return Snapshot(agents={a.agent: a for a in agents}, failed=failed or {},
                    results=results or [SourceResult(name="fleet", kind="goals")])


def state_with(**classes: str) -> dict:
    st = fleet.initial()
    for a, c in classes.items():
        st["agents"][a] = {"class": c, "since": "x", "state": "busy", "phase": "haciendo", "reason": "",
                           "source": "fleet", "contract_sha256": None, "contract_len": 0, "target": None}
    return st


def classes(evs):
    return [(e.agent, e.from_, e.to) for e in evs if type(e).__name__ == "AgentClassified"]


DIFF = [
    # (prev classes, observations, expected transitions)
    ({}, [obs()], [("a1", None, "TRABAJANDO")]),                                   # first sight
    ({"a1": "TRABAJANDO"}, [obs()], []),                                           # level persists: nothing
    ({"a1": "TRABAJANDO"}, [obs(state="idle", phase="hecho")], [("a1", "TRABAJANDO", "DICE_TERMINADO")]),  # golden
    ({"a1": "TRABAJANDO"}, [obs(state="waiting")], [("a1", "TRABAJANDO", "RECLAMA")]),  # edge 2
    ({"a1": "TRABAJANDO"}, [obs(state="idle", last_activity=NOW - 2 * STALL)],
     [("a1", "TRABAJANDO", "ESTANCADO")]),                                         # time alone
    ({"a1": "CERRADO"}, [], []),                                                   # closed stays closed
    ({"a1": "CERRADO"}, [obs()], [("a1", "CERRADO", "TRABAJANDO")]),               # comes back
]


@pytest.mark.parametrize("prev,seen,want", DIFF)
def test_diff(prev, seen, want):
    evs, _ = detect(state_with(**prev), snap(*seen), NOW, Limits(STALL))
    assert classes(evs) == want


def test_gone_needs_two_misses():
    st = state_with(a1="TRABAJANDO")
    evs, absent = detect(st, snap(), NOW, Limits(STALL))
    assert classes(evs) == [] and absent == {"a1": 1}          # one resync of grace
    evs, absent = detect(st, snap(), NOW, Limits(STALL), absent)
    assert classes(evs) == [("a1", "TRABAJANDO", "CERRADO")] and absent == {}


def test_seen_again_resets_grace():
    st = state_with(a1="TRABAJANDO")
    _, absent = detect(st, snap(), NOW, Limits(STALL))
    evs, absent = detect(st, snap(obs()), NOW, Limits(STALL), absent)
    assert classes(evs) == [] and absent == {}


def test_failed_source_keeps_its_agents():
    st = state_with(a1="RECLAMA")
    res = [SourceResult(name="fleet", kind="command", ok=False, error="exit status 1")]
    absent = None
    for _ in range(3):
        evs, absent = detect(st, snap(failed={"fleet": "exit status 1"}, results=res), NOW, Limits(STALL),
                             absent)
        assert classes(evs) == []
    assert [type(e).__name__ for e in evs] == ["SourceFailed"]


def test_source_failed_and_recovered_are_edges(tmp_path):
    """Failing three ticks in a row is one source.failed; recovering twice is one source.recovered."""
    elog = EventLog(str(tmp_path / "e.db"))
    st = fleet.initial()
    bad = [SourceResult(name="cmd", kind="command", ok=False, error="timed out after 1s")]
    good = [SourceResult(name="cmd", kind="command")]
    kinds = []
    for results in (bad, bad, bad, good, good):
        evs, _ = detect(st, Snapshot(results=results, failed={r.name: r.error for r in results if not r.ok}),
                        NOW, Limits(STALL))
        seqs = elog.append(evs, NOW)
        for rec in elog.read(seqs[0] - 1 if seqs else elog.head()[0]):
            st = fleet.fold(st, rec)
        kinds += [type(e).__name__ for e in evs]
    assert kinds == ["SourceFailed", "SourceRecovered"]


def test_fold_then_diff_is_quiet(tmp_path):
    """detect -> append -> fold -> detect again on the same snapshot gives nothing."""
    elog = EventLog(str(tmp_path / "e.db"))
    st = fleet.initial()
    s = snap(obs(agent="a1"), obs(agent="a2", state="waiting"), obs(agent="a3", error="not JSON"))
    evs, _ = detect(st, s, NOW, Limits(STALL))
    assert len(evs) == 3
    elog.append(evs, NOW)
    for rec in elog.read(0):
        st = fleet.fold(st, rec)
    evs, _ = detect(st, s, NOW + 1, Limits(STALL))
    assert evs == []
    assert [a for a, r in st["agents"].items() if r["class"] == "RECLAMA"] == ["a2"]


# ---- step: the watcher's judge of the changed and due agents (runtime/schedule.py) -----------------------------------------------------
def fold_classified(st, evs, when="t"):
    """Fold agent.classified events as fleet.fold does (a new record per event)."""
    for e in evs:
        if type(e).__name__ == "AgentClassified":
            st["agents"][e.agent] = {"class": e.to, "since": when, "state": e.state, "phase": e.phase,
                                     "reason": e.reason, "source": e.source, "contract_sha256": e.contract_sha256,
                                     "contract_len": e.contract_len, "target": None}
    return st


IDLE = obs(state="idle", last_activity=NOW)
DONE = obs(state="idle", phase="hecho")
STEP = [
    # (tick 1: observation, clock; tick 2: observation (SAME: the very same object), clock; folded?,
    #  expected transitions of tick 2) -- step must give what detect gives from scratch
    (obs(), NOW, "SAME", NOW + 1, True, []),                                     # nothing changed: skipped
    (IDLE, NOW, "SAME", NOW + STALL - 1, True, []),                              # idle, not yet stalled
    (IDLE, NOW, "SAME", NOW + STALL, True, [("a1", "TRABAJANDO", "ESTANCADO")]),  # stalled by time alone, exact bound
    (IDLE, NOW + STALL, "SAME", NOW + STALL - 1, True,
     [("a1", "ESTANCADO", "TRABAJANDO")]),                                       # virtual clock goes back
    (DONE, NOW, "SAME", NOW + 10 * STALL, True, []),                             # done never stalls
    (obs(), NOW, obs(), NOW + 1, True, []),                                      # a new but equal object
    (obs(), NOW, obs(state="waiting"), NOW + 1, True, [("a1", "TRABAJANDO", "RECLAMA")]),  # a real change
    (obs(), NOW, "SAME", NOW + 1, False, [("a1", None, "TRABAJANDO")]),          # tick 1's event never folded: again
]


@pytest.mark.parametrize("o1,t1,o2,t2,folded,want", STEP)
def test_step_memo_gives_what_diff_gives(o1, t1, o2, t2, folded, want):
    o2 = o1 if o2 == "SAME" else o2
    st = fleet.initial()
    evs, memo = step(st, snap(o1), t1, stall_after=STALL)
    if folded:
        st = fold_classified(st, evs)
    evs2, memo = step(st, snap(o2), t2, stall_after=STALL, memo=memo)
    fresh, _ = detect(st, snap(o2), t2, Limits(STALL))
    assert classes(evs2) == classes(fresh) == want


def test_step_skips_only_what_cannot_change():
    """Records replaced by a foreign fold, a new stall_after and gone agents are looked at again."""
    o1, o2 = obs(agent="a1"), obs(agent="a2", state="idle", last_activity=NOW)
    st = fleet.initial()
    evs, memo = step(st, snap(o1, o2), NOW, stall_after=STALL)
    st = fold_classified(st, evs)
    _, memo = step(st, snap(o1, o2), NOW + 1, stall_after=STALL, memo=memo)
    # another writer's event replaced a1's record (say it was closed): the same observation now differs
    st["agents"]["a1"] = dict(st["agents"]["a1"], **{"class": "CERRADO"})
    evs, memo = step(st, snap(o1, o2), NOW + 2, stall_after=STALL, memo=memo)
    assert classes(evs) == [("a1", "CERRADO", "TRABAJANDO")]
    st = fold_classified(st, evs)
    # a shorter stall_after (config reload) applies at once
    evs, memo = step(st, snap(o1, o2), NOW + 3, stall_after=2.0, memo=memo)
    assert classes(evs) == [("a2", "TRABAJANDO", "ESTANCADO")]
    st = fold_classified(st, evs)
    # a2 gone: one resync of grace, then CERRADO (as detect)
    evs, memo = step(st, snap(o1), NOW + 4, stall_after=2.0, memo=memo)
    assert classes(evs) == [] and memo.absent == {"a2": 1}
    evs, memo = step(st, snap(o1), NOW + 5, stall_after=2.0, memo=memo)
    assert classes(evs) == [("a2", "ESTANCADO", "CERRADO")]


@pytest.mark.parametrize("la,stall", [(NOW, STALL), (0.1, 0.2), (1e9 + 0.3, 0.7), (NOW + 0.123456789, 899.99)])
def test_window_bound_agrees_with_classify(la, stall):
    """Inside the window the class is the one given; it ends within a few ulps of the real change
    (conservative: at its end the agent is classified again), rounding included."""
    import math

    def near(t, direction, want):
        return any(classify(o, t := math.nextafter(t, direction), stall)[0] is want for _ in range(4))

    o = obs(state="idle", last_activity=la)
    hi = fleet._due(o, Cls.TRABAJANDO, stall)
    assert classify(o, math.nextafter(hi, 0), stall)[0] is Cls.TRABAJANDO
    assert classify(o, hi, stall)[0] is Cls.ESTANCADO or near(hi, math.inf, Cls.ESTANCADO)
    assert fleet._due(o, Cls.ESTANCADO, stall) == math.inf   # no clock time ends a stall


def test_step_many_agents_some_due():
    """Many agents, a few changing and one stalling by time: the same events as detect, sorted."""
    n = 300
    os_ = [obs(agent=f"a{i:03d}") for i in range(n)]
    os_[7] = obs(agent="a007", state="idle", last_activity=NOW)
    st = fleet.initial()
    evs, memo = step(st, snap(*os_), NOW, stall_after=STALL)
    st = fold_classified(st, evs)
    os2 = list(os_)
    for i in (250, 3, 99):
        os2[i] = obs(agent=f"a{i:03d}", state="waiting")
    evs, memo = step(st, snap(*os2), NOW + STALL, stall_after=STALL, memo=memo)
    fresh, _ = detect(st, snap(*os2), NOW + STALL, Limits(STALL))
    assert classes(evs) == classes(fresh)
    assert [a for a, _, _ in classes(evs)] == ["a003", "a007", "a099", "a250"]


def test_closed_agents_are_forgotten_after_a_week(tmp_path):
    """State stays bounded while agents come and go: a CERRADO agent older than 7 days is pruned
    (deterministically, on events whose seq is a multiple of PRUNE_EVERY); others stay."""
    from events.types import AgentClassified
    from watcher.runtime.state import Projections

    elog = EventLog(str(tmp_path / "e.db"))
    elog.append([AgentClassified(agent="old", to="TRABAJANDO"), AgentClassified(agent="old", from_="TRABAJANDO", to="CERRADO"),
                 AgentClassified(agent="live", to="TRABAJANDO")], NOW)
    later = NOW + 8 * 86400
    filler = [AgentClassified(agent=f"f{i}", to="TRABAJANDO") for i in range(fleet.PRUNE_EVERY)]
    elog.append(filler, later)
    p = Projections.load(elog)
    assert "old" not in p["fleet"]["agents"] and "live" in p["fleet"]["agents"]
    assert "old" not in p["dod"]["agents"] and "live" in p["dod"]["agents"]
