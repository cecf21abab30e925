"""Events made for tests: ``sample(tag)``, one instance of any event type with its required fields
filled; ``EVENTS``, a hypothesis strategy drawing one event of any type the folds read (fleet, dod,
missions, circuits, swarms, sources, runs) over a few agents, missions and runs, so random lists
of them reach every branch of a fold."""
from __future__ import annotations

import msgspec
from hypothesis import strategies as st

from events.types import (EVENT_TYPES, AgentClassified, CircuitChanged, DodContractChanged, DodFlagged, DodVerdict,
                          MissionCompleted, RuleViolated, SourceFailed, SourceRecovered, StepChanged,
                          SwarmChanged, WpChanged)


def sample(tag: str):
    """One instance of the event type ``tag`` with every required field filled."""
    cls = EVENT_TYPES[tag]
    req = {f.encode_name: (7 if isinstance(f.type, msgspec.inspect.IntType) else f"x-{f.name}")
           for f in msgspec.inspect.type_info(cls).fields if f.required}
    return msgspec.convert(req, cls)


AGENTS = st.sampled_from(["a1", "a2", "a3"])
CLASSES = st.sampled_from(["TRABAJANDO", "RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO", "CERRADO"])
SHA = st.sampled_from([None, "s1", "s2"])
EVENTS = st.one_of(
    st.builds(lambda a, c, s: AgentClassified(agent=a, to=c, state="idle", phase="hecho", source="fleet",
                                              contract_sha256=s, contract_len=3), AGENTS, CLASSES, SHA),
    st.builds(lambda a, v, w: DodVerdict(agent=a, verdict=v, verifier=w), AGENTS,
              st.sampled_from(["met", "failed", "unevaluable"]), st.sampled_from(["v1", "v2", "a1"])),
    st.builds(lambda a, s: DodContractChanged(agent=a, old_sha256="s1", new_sha256=s), AGENTS, SHA),
    st.builds(lambda a, f: DodFlagged(agent=a, flag=f, detail="met|"), AGENTS,
              st.sampled_from(["self-approved", "claim-unverified"])),
    st.builds(lambda m, w, s: WpChanged(mission=m, wp=w, to=s, deps=["w1"], source="missions"),
              st.sampled_from(["m1", "m2"]), st.sampled_from(["w1", "w2"]),
              st.sampled_from(["READY", "DONE", "APPROVAL_REQUIRED", None])),
    st.builds(lambda m: MissionCompleted(mission=m, wps=2), st.sampled_from(["m1", "m2"])),
    st.builds(lambda s: CircuitChanged(scope="m1", to=s, source="circuits"), st.sampled_from(["OPEN", "CLOSED", None])),
    st.builds(lambda g, c, s: SwarmChanged(group=g, child=c, to=s, source="sw"), st.sampled_from(["g1", "g2"]),
              st.sampled_from(["c1", "c2"]), st.sampled_from(["queued", "running", "done", None])),
    st.builds(lambda ok: SourceFailed(source="fleet", error="x") if ok else SourceRecovered(source="fleet"),
              st.booleans()),
    st.builds(lambda s, to: StepChanged(run="r1", step=s, to=to), st.sampled_from(["facts", "audit", "apply"]),
              st.sampled_from(["begin", "done", "fail"])),
    st.builds(lambda r: RuleViolated(run="r1", rule=r, detail="d"), st.sampled_from(["no-redo", "deploy-gate"])),
)
