"""DoD projection: table-driven folds and detects (pure, virtual clock)."""
from __future__ import annotations

import msgspec
import pytest

from events.log import Recorded, iso
from events.types import AgentClassified, DodContractChanged, DodFlagged, DodVerdict, encode_data, tag_of
from projections import dod
from projections.base import encode_state
from projections.observations import AgentObs, Snapshot

T0 = 1_800_000_000.0


def rec(seq: int, ev, t: float = T0) -> Recorded:
    return Recorded(seq, f"id{seq}", iso(t), tag_of(ev), ev.subject, seq, ev, encode_data(ev), b"")


def fold_all(events, t0: float = T0, step: float = 1.0):
    st = dod.initial()
    for i, ev in enumerate(events, 1):
        st = dod.fold(st, rec(i, ev, t0 + i * step))
    # every state survives a JSON round trip unchanged
    assert encode_state(msgspec.json.decode(encode_state(st))) == encode_state(st)
    return st


def cls(agent: str, to: str, sha: str | None = "c1") -> AgentClassified:
    return AgentClassified(agent=agent, to=to, contract_sha256=sha, contract_len=10 if sha else 0)


def obs(agent="a1", sha="c1", status="pending", verifier=None, **kw) -> AgentObs:
    return AgentObs(agent=agent, source="fleet", contract_sha256=sha, contract_len=10, dod_status=status,
                    dod_verifier=verifier, **kw)


def snap(*agents: AgentObs, failed=None) -> Snapshot:
    return Snapshot(agents={a.agent: a for a in agents}, failed=failed or {})


V = lambda verdict, verifier="v1", src="cli": DodVerdict(agent="a1", verdict=verdict, verifier=verifier, source=src)  # noqa: E731
SELF = DodFlagged(agent="a1", flag="self-approved", detail="met|")
CLAIM_FLAG = DodFlagged(agent="a1", flag="claim-unverified")

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
