"""The termination machine and the snapshot diff: pure, table-driven, virtual clock."""
from __future__ import annotations

import pytest

from events.log import EventLog
from projections import fleet
from projections.fleet import Cls, classify, diff
from projections.observations import AgentObs, Snapshot, SourceResult

NOW = 1_800_000_000.0
STALL = 900.0


def obs(**kw) -> AgentObs:
    base = dict(agent="a1", source="fleet", state="busy", phase="haciendo", contract_sha256="c" * 64,
                contract_len=10, last_activity=NOW)
    base.update(kw)
    return AgentObs(**base)


CLASSIFY = [
    # (observation, expected class) -- one row per rule of CONTRACT.md, first match wins
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
    evs, _ = diff(state_with(**prev), snap(*seen), NOW, stall_after=STALL)
    assert classes(evs) == want


def test_gone_needs_two_misses():
    st = state_with(a1="TRABAJANDO")
    evs, absent = diff(st, snap(), NOW, stall_after=STALL)
    assert classes(evs) == [] and absent == {"a1": 1}          # one resync of grace
    evs, absent = diff(st, snap(), NOW, stall_after=STALL, absent=absent)
    assert classes(evs) == [("a1", "TRABAJANDO", "CERRADO")] and absent == {}


def test_seen_again_resets_grace():
    st = state_with(a1="TRABAJANDO")
    _, absent = diff(st, snap(), NOW, stall_after=STALL)
    evs, absent = diff(st, snap(obs()), NOW, stall_after=STALL, absent=absent)
    assert classes(evs) == [] and absent == {}


def test_failed_source_keeps_its_agents():
    st = state_with(a1="RECLAMA")
    res = [SourceResult(name="fleet", kind="command", ok=False, error="exit status 1")]
    absent = None
    for _ in range(3):
        evs, absent = diff(st, snap(failed={"fleet": "exit status 1"}, results=res), NOW, stall_after=STALL,
                           absent=absent)
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
        evs, _ = diff(st, Snapshot(results=results, failed={r.name: r.error for r in results if not r.ok}),
                      NOW, stall_after=STALL)
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
    evs, _ = diff(st, s, NOW, stall_after=STALL)
    assert len(evs) == 3
    elog.append(evs, NOW)
    for rec in elog.read(0):
        st = fleet.fold(st, rec)
    evs, _ = diff(st, s, NOW + 1, stall_after=STALL)
    assert evs == []
    assert fleet.status(st, NOW)["counts"]["RECLAMA"] == 1
