"""What `status` and `summary` say of the DoD, pinned where a mutation run of projections.dod.fold found
nothing checking it (docs/mutation.md): the counts, a claim from the agent's own file, the claim's
age, the contract flag, the summary's lines, what a verdict keeps of its checks, and the detector's
defaults; then the watcher's ticker of dod and the change hint, as fleet's
(tests/projections/fleet/test_rules_mutants_fleet.py)."""
from __future__ import annotations

from events.types import DodContractChanged, DodFlagged, DodVerdict
from projections.dod import fold as dod
from projections.observations import AgentObs, Snapshot
from tests.support.dodworld import SELF, T0, V, cls, fold_all, obs, rec, snap
from tests.support.dodworld import hinted as _hint
from tests.support.fleetstep import dod_step


def test_status_counts_each_status_once_per_agent():
    st = fold_all([cls("a1", "DICE_TERMINADO"), cls("a2", "TRABAJANDO"), cls("a3", "DICE_TERMINADO"),
                   DodVerdict(agent="a3", verdict="met", verifier="v1", source="cli"), cls("a4", "TRABAJANDO")])
    assert dod.status(st, T0 + 100)["counts"] == {"claimed": 1, "pending": 2, "met": 1}


def test_a_met_in_the_agents_own_file_is_a_claim_and_said():
    """goal.json's dod_status met (another verifier named) is the agent's claim: status claimed,
    and the summary says it has no verdict; a failed one there is no claim."""
    met = fold_all([cls("a1", "TRABAJANDO"), V("met", "v9", src="goal.json")])
    assert dod.agent_status(met["agents"]["a1"]) is dod.Status.CLAIMED
    assert dod.summary(met, T0 + 10) == ["a1: DoD met claimed by the agent's file (verifier v9), no verdict"]
    failed = fold_all([cls("a1", "TRABAJANDO"), V("failed", "v9", src="goal.json")])
    assert dod.agent_status(failed["agents"]["a1"]) is dod.Status.PENDING
    assert dod.summary(failed, T0 + 10) == []


def test_claim_age_is_seconds_to_a_tenth():
    st = fold_all([cls("a1", "DICE_TERMINADO")])          # claimed at T0 + 1
    assert dod.status(st, T0 + 1 + 12.345)["agents"]["a1"]["claim_age_s"] == 12.3


def test_contract_changed_is_said_from_the_first_change_only():
    st = fold_all([cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"),
                   DodContractChanged(agent="a2", old_sha256="c1", new_sha256="c2", new_len=3)])
    agents = dod.status(st, T0 + 10)["agents"]
    assert (agents["a1"]["contract_changed"], agents["a2"]["contract_changed"]) == (False, True)
    assert (agents["a1"]["contract_changes"], agents["a2"]["contract_changes"]) == (0, 1)


def test_the_summary_says_a_self_approval_and_leaves_closed_agents_out():
    st = fold_all([cls("a1", "DICE_TERMINADO"), SELF])
    assert dod.summary(st, T0 + 10) == ["a1: DoD self-approved (no independent verifier)"]
    closed = fold_all([cls("a1", "DICE_TERMINADO"), SELF, cls("a1", "CERRADO")])
    assert dod.summary(closed, T0 + 10) == []


def test_a_verdict_keeps_each_checks_id_to_40_and_status_to_12_characters_and_32_checks():
    ev = DodVerdict(agent="a1", verdict="failed", verifier="checker", source="checker",
                    checks=[{"id": "i" * 50, "status": "s" * 20}, {"id": "short", "status": "pass"}])
    st = fold_all([cls("a1", "DICE_TERMINADO"), ev])
    assert dod.status(st, T0 + 10)["agents"]["a1"]["checks"] == [
        {"id": "i" * 40, "status": "s" * 12}, {"id": "short", "status": "pass"}]
    many = DodVerdict(agent="a1", verdict="failed", verifier="checker", source="checker",
                      checks=[{"id": f"c{i}", "status": "fail"} for i in range(40)])
    st = fold_all([cls("a1", "DICE_TERMINADO"), many])
    assert [c["id"] for c in dod.status(st, T0 + 10)["agents"]["a1"]["checks"]] == [f"c{i}" for i in range(32)]


def test_an_agent_without_a_contract_has_a_contract_of_length_0():
    st = fold_all([cls("a1", "TRABAJANDO", sha=None)])
    a = dod.status(st, T0 + 10)["agents"]["a1"]
    assert (a["contract_sha256"], a["contract_len"]) == (None, 0)


def test_a_contract_first_seen_in_its_change_keeps_the_old_digest_as_the_contract():
    """An agent first known through a contract change (no class event yet): the contract it was
    given is the change's old digest, fixed; its current one the new."""
    st = fold_all([DodContractChanged(agent="a1", old_sha256="c0", new_sha256="c2", new_len=3)])
    a = st["agents"]["a1"]
    assert (a["contract_sha256"], a["current_sha256"], a["contract_changes"]) == ("c0", "c2", 1)
    st = fold_all([cls("a1", "TRABAJANDO", sha="c1"), DodContractChanged(agent="a1", old_sha256="c1", new_sha256="c2",
                                                                         new_len=3)])
    assert st["agents"]["a1"]["contract_sha256"] == "c1"


def test_flags_count_one_each_and_a_self_approval_without_detail_is_met():
    st = fold_all([cls("a1", "DICE_TERMINADO"), DodFlagged(agent="a1", flag="self-approved", detail="")])
    a = st["agents"]["a1"]
    assert (a["flags"], a["self_key"]) == (1, "met|")


def test_claims_go_unverified_after_30_minutes_by_default():
    st = fold_all([cls("a1", "DICE_TERMINADO")], t0=T0 - 1)    # claimed at T0
    s = snap(obs(status="pending"))
    assert [e.flag for e in dod.detect(st, s, T0 + 1799)] == []
    assert [e.flag for e in dod.detect(st, s, T0 + 1800)] == ["claim-unverified"]
    evs, _ = dod_step(st, s, T0 + 1800, None)
    assert [e.flag for e in evs] == ["claim-unverified"]


def test_a_failed_source_skips_only_its_own_agents():
    """Source 'other' failed this tick: the agents of the healthy source are still looked at (a1's
    self-approval in its goal.json is found)."""
    st = fold_all([cls("a1", "DICE_TERMINADO")])
    s = Snapshot(agents={"a1": AgentObs(agent="a1", source="fleet", contract_sha256="c1", contract_len=10,
                                        dod_status="met", dod_verifier="a1")},
                 failed={"other": "timed out"})
    assert [e.flag for e in dod.detect(st, s, T0 + 10)] == ["self-approved"]


def test_a_claim_is_cleared_when_the_agent_leaves_dice_terminado():
    st = fold_all([cls("a1", "DICE_TERMINADO"), cls("a1", "TRABAJANDO")])
    a = st["agents"]["a1"]
    assert (a["claim_seq"], a["claim_since"], a["claim_flagged"]) == (0, None, False)
    assert dod.agent_status(a) is dod.Status.PENDING


# ---- the watcher's ticker and the change hint (as fleet's: tests/projections/fleet/test_rules_mutants_fleet.py) ---
class _Ticks:
    """dod's detector (the watcher's DodTicker) tick after tick, its events folded into the state."""

    def __init__(self, *events):
        self.st = fold_all(list(events)) if events else dod.initial()
        self.seq, self.memo = 100, None

    def fold(self, *events):
        for ev in events:
            self.seq += 1
            self.st = dod.fold(self.st, rec(self.seq, ev, T0 + self.seq))

    def tick(self, s, now=T0 + 500.0):
        evs, self.memo = dod_step(self.st, s, now, self.memo, seq=self.seq)
        self.fold(*evs)
        return [(type(e).__name__, e.agent) for e in evs]


SELF_MET = dict(status="met", verifier="a2")   # a2 names itself: a self-approval


def test_dod_a_change_hint_older_than_the_memo_is_not_trusted():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    both = (obs("a1"), obs("a2"))
    assert t.tick(_hint(snap(*both), 1, ())) == []
    changed = _hint(snap(obs("a1"), obs("a2", **SELF_MET)), 3, ())    # a2 changed at gen 2, unseen
    assert t.tick(changed) == [("DodFlagged", "a2")]


def test_dod_a_new_agent_the_hint_does_not_name_is_seen():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    assert t.tick(_hint(snap(obs("a1")), 1, ())) == []
    assert t.tick(_hint(snap(obs("a1"), obs("a2", **SELF_MET)), 2, ())) == [("DodFlagged", "a2")]


def test_dod_a_hint_after_an_agent_left_is_applied():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    a1, a2 = obs("a1"), obs("a2")
    assert t.tick(_hint(snap(a1, a2), 1, ())) == []
    assert t.tick(_hint(snap(a2), 2, ("a1",))) == []
    assert t.tick(_hint(snap(obs("a2", **SELF_MET)), 3, ("a2",))) == [("DodFlagged", "a2")]


def test_dod_a_hint_that_names_half_a_rename_is_not_trusted():
    for named in ("a3", "a1"):
        t = _Ticks(cls("a1", "TRABAJANDO"), cls("a3", "TRABAJANDO"))
        assert t.tick(_hint(snap(obs("a1")), 1, ())) == []
        renamed = _hint(snap(obs("a3", status="met", verifier="a3")), 2, (named,))
        assert t.tick(renamed) == [("DodFlagged", "a3")], named


def test_dod_a_named_agent_whose_file_changed_is_looked_at():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    assert t.tick(_hint(snap(obs("a1"), obs("a2")), 1, ())) == []
    assert t.tick(_hint(snap(obs("a1"), obs("a2")), 2, ())) == []
    assert t.tick(_hint(snap(obs("a1"), obs("a2", **SELF_MET)), 3, ("a2",))) == [("DodFlagged", "a2")]


def test_dod_a_record_another_writer_changed_is_looked_at_again():
    """The same file, no hint: a2's self-approval was recorded, then another writer's verdict from
    the agent's file ended it (a new self-approval is a new one): the file's met is found again."""
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    s = snap(obs("a1"), obs("a2", **SELF_MET))
    assert t.tick(s) == [("DodFlagged", "a2")]
    assert t.tick(s) == []
    t.fold(DodVerdict(agent="a2", verdict="failed", verifier="v1", source="goal.json"))
    assert t.tick(s) == [("DodFlagged", "a2")]


def test_dod_the_claims_follow_the_hint():
    """A claim that begins in a hinted tick is watched: it goes unverified after 30 min."""
    t = _Ticks(cls("a1", "TRABAJANDO"))
    assert t.tick(_hint(snap(obs("a1")), 1, ()), now=T0 + 200) == []
    t.fold(cls("a1", "DICE_TERMINADO"))
    claimed_at = T0 + t.seq
    assert t.tick(_hint(snap(obs("a1")), 2, ("a1",)), now=claimed_at + 10) == []
    assert t.tick(_hint(snap(obs("a1")), 3, ()), now=claimed_at + 1800) == [("DodFlagged", "a1")]


def test_dod_a_tick_with_no_hint_after_a_hinted_one_compares_everything():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    assert t.tick(_hint(snap(obs("a1"), obs("a2")), 1, ())) == []
    s = snap(obs("a1"), obs("a2", **SELF_MET))
    s.gen, s.dirty = 2, None                   # another writer's events: anything may have changed
    assert t.tick(s) == [("DodFlagged", "a2")]


def test_dod_a_file_that_changed_is_found_without_a_hint():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    assert t.tick(snap(obs("a1"), obs("a2"))) == []
    assert t.tick(snap(obs("a1"), obs("a2", **SELF_MET))) == [("DodFlagged", "a2")]


def test_dod_an_agent_the_state_does_not_know_is_looked_at_with_or_without_a_hint():
    """a2 has a goal.json but no DoD record yet: the first tick and a hinted one both look at it."""
    t = _Ticks(cls("a1", "TRABAJANDO"))
    assert t.tick(_hint(snap(obs("a1"), obs("a2")), 1, ())) == []
    assert t.tick(_hint(snap(obs("a1"), obs("a2", **SELF_MET)), 2, ("a2",))) == [("DodFlagged", "a2")]


def test_dod_a_hinted_agent_whose_record_changed_is_looked_at_again():
    """The hint names a2, whose file is the same object but whose record a folded event changed
    (a verdict from its file ends the self-approval): its file's met is a new self-approval."""
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    a1, a2 = obs("a1"), obs("a2", **SELF_MET)
    assert t.tick(_hint(snap(a1, a2), 1, ())) == [("DodFlagged", "a2")]
    assert t.tick(_hint(snap(a1, a2), 2, ())) == []
    t.fold(DodVerdict(agent="a2", verdict="failed", verifier="v1", source="goal.json"))
    assert t.tick(_hint(snap(a1, a2), 3, ("a2",))) == [("DodFlagged", "a2")]


def test_dod_a_hint_is_not_trusted_once_the_state_has_another_agent_count():
    """Another writer's events gave the state a new agent (a9) and changed a2's record; a hint
    naming only a1 is not trusted, and a2's file's met is found again."""
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    a1, a2 = obs("a1"), obs("a2", **SELF_MET)
    assert t.tick(_hint(snap(a1, a2), 1, ())) == [("DodFlagged", "a2")]
    assert t.tick(_hint(snap(a1, a2), 2, ())) == []
    t.fold(DodVerdict(agent="a9", verdict="met", verifier="v1", source="cli"),
           DodVerdict(agent="a2", verdict="failed", verifier="v1", source="goal.json"))
    assert t.tick(_hint(snap(a1, a2), 3, ("a1",))) == [("DodFlagged", "a2")]


def test_dod_a_hint_naming_a_renamed_agent_and_another_is_not_trusted():
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"), cls("a3", "TRABAJANDO"))
    assert t.tick(_hint(snap(obs("a1"), obs("a2")), 1, ())) == []
    renamed = _hint(snap(obs("a2"), obs("a3", status="met", verifier="a3")), 2, ("a2", "a3"))
    assert t.tick(renamed) == [("DodFlagged", "a3")]


def test_dod_a_file_that_changed_is_found_when_other_records_changed_too():
    """Between two ticks another writer's verdict changed a1's record (the state moved on); a2's
    file changed, its record did not: a2's change is found."""
    t = _Ticks(cls("a1", "TRABAJANDO"), cls("a2", "TRABAJANDO"))
    assert t.tick(snap(obs("a1"), obs("a2"))) == []
    t.fold(DodVerdict(agent="a1", verdict="met", verifier="v1", source="cli"))
    assert t.tick(snap(obs("a1"), obs("a2", **SELF_MET))) == [("DodFlagged", "a2")]
