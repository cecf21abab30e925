"""A claim of done reaches the person once (issue 45 item 3), in the pure planner: without a
checker or verifier the claim is pushed as "ready for review" (whatever min_severity) and its
later "unverified claim" is not pushed again; with one, the claim is never pushed, a failed
verdict is (a warning), a met one is not (info).

Found: with the defaults a claim of done was "info", below the push threshold; the first sign on
the phone was CLAIM_UNVERIFIED 30 minutes later."""
from __future__ import annotations

import msgspec

from events.records import Recorded
from events.timefmt import iso
from events.types import AgentClassified, DodFlagged, DodVerdict, NoticeSent
from projections.notify import fold as notify
from projections.notify.plan import Policy, plan

T0 = 1_800_000_000.0


def state(*evs: tuple[float, object]) -> dict:
    st = notify.initial()
    for seq, (t, ev) in enumerate(evs, 1):
        tag = ev.__struct_config__.tag
        notify.fold(st, Recorded(seq=seq, id=f"e{seq}", time=iso(t), type=tag, subject=ev.subject, version=1,
                                 event=ev, data=msgspec.json.encode(ev), hash=b""))
    return st


CLAIM = AgentClassified(agent="a9", from_="TRABAJANDO", to="DICE_TERMINADO", state="idle", phase="hecho",
                        reason="idle, phase hecho: claims done", task="Docs")


def routes(p) -> dict[str, str]:
    return {d.key.partition("|")[2].partition("#")[0]: str.__str__(d.reason) for d in p.decisions if d.stage == "route"}


def test_without_a_checker_the_claim_is_pushed_for_review_once():
    st = state((T0, CLAIM))
    p = plan(st, T0 + 11, Policy())                                          # min_severity warning
    [m] = p.send
    assert m.title == "1 ready for review" and m.lines[0].endswith("ready for review · task: Docs")
    sent = NoticeSent(notice=m.notice, covers=m.covers, title=m.title, severity=m.severity, keys=m.keys)
    flag = DodFlagged(agent="a9", flag="claim-unverified", detail="no verdict 1800s after the claim")
    st = state((T0, CLAIM), (T0 + 12, sent), (T0 + 1800, flag))
    p = plan(st, T0 + 1811, Policy())
    assert p.send == [] and routes(p)["CLAIM_UNVERIFIED"] == "claim-already-pushed"


def test_with_a_checker_only_its_verdict_is_pushed():
    judged = Policy(claims_judged=True)
    p = plan(state((T0, CLAIM)), T0 + 11, judged)
    assert p.send == [] and routes(p)["DICE_TERMINADO"] == "judged-by-checker"
    failed = DodVerdict(agent="a9", verdict="failed", verifier="fleetwatch-checks", source="checks")
    [m] = plan(state((T0, CLAIM), (T0 + 5, failed)), T0 + 16, judged).send
    assert [ln.split(" · ")[0] for ln in m.lines] == ["VERDICT a9"] and m.severity == "warning"
    met = DodVerdict(agent="a9", verdict="met", verifier="fleetwatch-checks", source="checks")
    assert plan(state((T0, CLAIM), (T0 + 5, met)), T0 + 16, judged).send == []   # met: summary and report
