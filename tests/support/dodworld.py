"""dod's world for its tests: records on a virtual clock, a state folded from events (checked to
survive a JSON round trip), observations and snapshots of goal.json's DoD fields, the usual
verdicts and flags; ``hinted`` gives a snapshot the watcher's change hint."""
from __future__ import annotations

import msgspec

from events.log import Recorded, iso
from events.types import AgentClassified, DodFlagged, DodVerdict, encode_data, tag_of
from projections.dod import fold as dod
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


def hinted(s: Snapshot, gen: int, dirty) -> Snapshot:
    """``s`` as the watcher's ``gen``-th snapshot, the agents of ``dirty`` its change hint."""
    s.gen, s.dirty = gen, frozenset(dirty)
    return s
