"""DoD projection: table-driven folds and detects (pure, virtual clock)."""
from __future__ import annotations

import pytest

from events.types import DodContractChanged, tag_of
from projections.dod import fold as dod
from tests.support.fleetstep import dod_step

from tests.support.dodworld import SELF, T0, V, cls, fold_all, obs, rec, snap

# (events folded in order, expected status of a1)
STATUS_TABLE = [
    ([cls("a1", "TRABAJANDO")], "pending"),                                    # working, no claim
    ([cls("a1", "DICE_TERMINADO")], "claimed"),                                # claims done
    ([cls("a1", "DICE_TERMINADO"), V("met")], "met"),                          # verified after the claim
    ([cls("a1", "DICE_TERMINADO"), V("failed")], "failed"),                    # verifier said no
    ([V("failed"), cls("a1", "DICE_TERMINADO")], "claimed"),                   # a new claim after a failure
    ([cls("a1", "DICE_TERMINADO"), V("unevaluable")], "unevaluable"),          # escalates
    ([V("unevaluable"), cls("a1", "TRABAJANDO"), cls("a1", "DICE_TERMINADO")], "unevaluable"),  # never closes
    ([V("unevaluable"), V("met", "v2")], "met"),                               # only another verdict replaces it
    ([cls("a1", "DICE_TERMINADO"), SELF], "self-approved"),                    # agent approved itself
    ([cls("a1", "DICE_TERMINADO"), SELF, V("met")], "met"),                    # then a real verifier
    ([cls("a1", "DICE_TERMINADO"), V("met", "a1")], "claimed"),               # self-verdict is not a verdict
    ([cls("a1", "DICE_TERMINADO"), V("met"), cls("a1", "TRABAJANDO")], "met"),  # met stays when back to work
]


@pytest.mark.parametrize("events,expected", STATUS_TABLE)
def test_status_table(events, expected):
    st = fold_all(events)
    assert dod.status(st, T0 + 100)["agents"]["a1"]["status"] == expected


def test_contract_fixed_at_first_sight_and_changes_counted():
    st = fold_all([cls("a1", "TRABAJANDO", "c1"), cls("a1", "RECLAMA", "c2"),   # fleet events never move it
                   DodContractChanged(agent="a1", old_sha256="c1", new_sha256="c2")])
    a = dod.status(st, T0)["agents"]["a1"]
    assert (a["contract_sha256"], a["contract_changes"], a["contract_changed"]) == ("c1", 1, True)
    assert any("rewritten" in line for line in dod.summary(st, T0))


def test_contract_fixed_when_first_seen_later():
    st = fold_all([cls("a1", "MAL_LANZADO", None), cls("a1", "TRABAJANDO", "c9")])
    assert st["agents"]["a1"]["contract_sha256"] == "c9"


# (folded events, observation, expected event tags + key fields)
DETECT_TABLE = [
    ([], obs(), []),                                                           # unknown agent: fleet fixes first
    ([cls("a1", "TRABAJANDO")], obs(), []),                                    # same contract: nothing
    ([cls("a1", "TRABAJANDO")], obs(sha="c2"), [("dod.contract_changed", "c2")]),  # rewritten
    ([cls("a1", "TRABAJANDO"), DodContractChanged(agent="a1", old_sha256="c1", new_sha256="c2")],
     obs(sha="c2"), []),                                                       # one event per change
    ([cls("a1", "TRABAJANDO")], obs(sha=None), [("dod.contract_changed", None)]),  # contract removed
    ([cls("a1", "TRABAJANDO")], obs(status="met"), [("dod.flagged", "self-approved")]),  # met, no verifier
    ([cls("a1", "TRABAJANDO")], obs(status="met", verifier="a1"), [("dod.flagged", "self-approved")]),  # self
    ([cls("a1", "TRABAJANDO"), SELF], obs(status="met"), []),                  # flagged once
    ([cls("a1", "TRABAJANDO")], obs(status="met", verifier="v1"), [("dod.verdict", "met")]),  # goal.json verdict
    ([cls("a1", "TRABAJANDO"), V("met", "v1", "goal.json")], obs(status="met", verifier="v1"), []),  # once
    ([cls("a1", "TRABAJANDO"), V("met", "v1", "goal.json")], obs(status="failed", verifier="v1"),
     [("dod.verdict", "failed")]),                                             # status changed
    ([cls("a1", "TRABAJANDO"), V("met", "v9", "cli")], obs(status="met", verifier="v1"),
     [("dod.verdict", "met")]),                                                # cli verdicts do not mask goal.json
    ([cls("a1", "TRABAJANDO")], obs(status="failed", verifier="a1"), []),      # self "failed": ignored
    ([cls("a1", "TRABAJANDO")], obs(sha="c2", error="not JSON"), []),          # unreadable file: no verdicts
    ([cls("a1", "TRABAJANDO")], obs(status="pending", verifier="v1"), []),     # pending is no verdict
]


@pytest.mark.parametrize("events,o,expected", DETECT_TABLE)
def test_detect_table(events, o, expected):
    st = fold_all(events)
    out = dod.detect(st, snap(o), T0 + 10, claim_unverified_after=1800)
    got = []
    for e in out:
        key = {"dod.contract_changed": "new_sha256", "dod.flagged": "flag", "dod.verdict": "verdict"}[tag_of(e)]
        got.append((tag_of(e), getattr(e, key)))
    assert got == expected


def test_detect_skips_failed_source():
    st = fold_all([cls("a1", "TRABAJANDO")])
    assert dod.detect(st, snap(obs(sha="c2", status="met"), failed={"fleet": "boom"}), T0) == []


def test_claim_unverified_once_per_claim():
    st = fold_all([cls("a1", "DICE_TERMINADO")])           # claim at T0+1
    assert dod.detect(st, snap(), T0 + 1 + 1799, claim_unverified_after=1800) == []
    out = dod.detect(st, snap(), T0 + 1 + 1800, claim_unverified_after=1800)
    assert [(tag_of(e), e.flag) for e in out] == [("dod.flagged", "claim-unverified")]
    st = dod.fold(st, rec(2, out[0], T0 + 1801))
    assert dod.detect(st, snap(), T0 + 9999, claim_unverified_after=1800) == []   # once
    assert any("no verdict" in line for line in dod.summary(st, T0 + 9999))
    # a new claim (after going back to work) may be flagged again
    st = dod.fold(st, rec(3, cls("a1", "TRABAJANDO"), T0 + 10000))
    st = dod.fold(st, rec(4, cls("a1", "DICE_TERMINADO"), T0 + 10001))
    out = dod.detect(st, snap(), T0 + 10001 + 1800, claim_unverified_after=1800)
    assert [e.flag for e in out] == ["claim-unverified"]


def test_claim_with_verdict_is_not_flagged():
    st = fold_all([cls("a1", "DICE_TERMINADO"), V("failed")])
    assert dod.detect(st, snap(), T0 + 99999, claim_unverified_after=1800) == []


def test_verdict_before_claim_does_not_verify_it():
    st = fold_all([V("met"), cls("a1", "TRABAJANDO"), cls("a1", "DICE_TERMINADO")])
    assert [e.flag for e in dod.detect(st, snap(), T0 + 99999, claim_unverified_after=60)] == ["claim-unverified"]


def test_self_approval_flags_again_after_a_goal_verdict():
    st = fold_all([cls("a1", "TRABAJANDO"), SELF, V("failed", "v1", "goal.json")])
    out = dod.detect(st, snap(obs(status="met")), T0, claim_unverified_after=1800)
    assert [e.flag for e in out] == ["self-approved"]


# ---- detect_memo: detect with the per-tick memo ----------------------------------------------
def tags(evs):
    return [(tag_of(e), getattr(e, "flag", None) or getattr(e, "verdict", None) or getattr(e, "new_sha256", None))
            for e in evs]


MEMO_TABLE = [
    # (folded before tick 1, observation of tick 1, events folded between the ticks, tick 2 observation
    #  ("SAME": the very same object), fold tick 1's own events?, expected tags of tick 2)
    ([cls("a1", "TRABAJANDO")], obs(), [], "SAME", True, []),                            # nothing changed: skipped
    ([cls("a1", "TRABAJANDO")], obs(sha="c2"), [], "SAME", True, []),                    # its change is folded: once
    ([cls("a1", "TRABAJANDO")], obs(sha="c2"), [], "SAME", False,
     [("dod.contract_changed", "c2")]),                                                # not folded (append failed): again
    ([cls("a1", "TRABAJANDO")], obs(status="met"), [V("failed", "v1", "goal.json")], "SAME", True,
     [("dod.flagged", "self-approved")]),                                              # a goal.json verdict reset self_key
    ([cls("a1", "TRABAJANDO")], obs(status="met", verifier="v1"), [V("failed", "v1", "goal.json")], "SAME", True,
     [("dod.verdict", "met")]),                                                        # the state moved, the file did not
    ([cls("a1", "TRABAJANDO")], obs(), [], obs(), True, []),                             # a new but equal object
    ([cls("a1", "TRABAJANDO")], obs(), [], obs(status="met", verifier="v2"), True, [("dod.verdict", "met")]),  # change
    ([], obs(), [cls("a1", "TRABAJANDO", "c0")], "SAME", True, [("dod.contract_changed", "c1")]),  # first sight fixed c0
]


@pytest.mark.parametrize("before,o1,between,o2,fold_own,want", MEMO_TABLE)
def test_detect_memo_gives_what_detect_gives(before, o1, between, o2, fold_own, want):
    o2 = o1 if o2 == "SAME" else o2
    st = fold_all(before)
    seq = len(before)
    out, memo = dod_step(st, snap(o1), T0 + 10, None, claim_unverified_after=1800, seq=seq)
    for ev in (out if fold_own else []) + between:
        seq += 1
        st = dod.fold(st, rec(seq, ev, T0 + 11))
    out2, memo = dod_step(st, snap(o2), T0 + 12, memo, claim_unverified_after=1800, seq=seq)
    assert tags(out2) == tags(dod.detect(st, snap(o2), T0 + 12, claim_unverified_after=1800)) == want


def test_detect_memo_claim_due_by_time_alone():
    """The same state (same seq) and no new observation: the claim is flagged when it is due, once."""
    st = fold_all([cls("a1", "DICE_TERMINADO")])                       # claim at T0+1
    o = obs(status="pending")
    out, memo = dod_step(st, snap(o), T0 + 2, None, claim_unverified_after=60, seq=1)
    assert out == []
    out, memo = dod_step(st, snap(o), T0 + 60, memo, claim_unverified_after=60, seq=1)
    assert out == []
    out, memo = dod_step(st, snap(o), T0 + 61, memo, claim_unverified_after=60, seq=1)
    assert tags(out) == [("dod.flagged", "claim-unverified")]
    st = dod.fold(st, rec(2, out[0], T0 + 61))
    out, memo = dod_step(st, snap(o), T0 + 999, memo, claim_unverified_after=60, seq=2)
    assert out == []


def test_detect_memo_failed_source_then_back():
    st = fold_all([cls("a1", "TRABAJANDO")])
    o = obs(sha="c2")
    out, memo = dod_step(st, snap(o, failed={"fleet": "boom"}), T0, None, seq=1)
    assert out == []                                                   # its last state stands
    out, memo = dod_step(st, snap(o), T0 + 1, memo, seq=1)
    assert tags(out) == [("dod.contract_changed", "c2")]               # looked at again once it is back


def test_detect_memo_many_agents_sorted():
    st = fold_all([cls(f"a{i:03d}", "TRABAJANDO") for i in range(200)])
    os_ = [obs(agent=f"a{i:03d}") for i in range(200)]
    _, memo = dod_step(st, snap(*os_), T0, None, seq=200)
    os2 = list(os_)
    os2[150], os2[20] = obs(agent="a150", sha="c9"), obs(agent="a020", status="met")
    out, _ = dod_step(st, snap(*os2), T0 + 1, memo, seq=200)
    assert [(e.agent, tag_of(e)) for e in out] == [("a020", "dod.flagged"), ("a150", "dod.contract_changed")]
    assert tags(out) == tags(dod.detect(st, snap(*os2), T0 + 1))
