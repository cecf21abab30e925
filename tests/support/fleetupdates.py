"""Fleet ticks on a real log (the agent.updated tests and the rules' mutants built on them): a
waiting agent's observation with a task, its snapshot, and a tick that judges, appends and folds."""
from __future__ import annotations

from events.log import EventLog
from projections.observations import AgentObs, Snapshot, SourceResult
from tests.support.fleetstep import step
from watcher.runtime.state import Projections

NOW = 1_800_000_000.0
STALL = 900.0


def obs(**kw) -> AgentObs:
    base = dict(agent="a1", source="fleet", state="waiting", phase="haciendo", contract_sha256="c" * 64,
                contract_len=10, last_activity=NOW, task="t1")
    base.update(kw)
    return AgentObs(**base)


def snap(*agents: AgentObs) -> Snapshot:
    return Snapshot(agents={a.agent: a for a in agents}, results=[SourceResult(name="fleet", kind="goals")])


def tick(elog: EventLog, p: Projections, s: Snapshot, now: float, memo=None, stall: float = STALL,
         busy: float | None = None):
    """step (the watcher's fleet judge) with ``stall_after`` ``stall`` (and ``busy_silence`` ``busy``), its events
    appended and folded (as a tick)."""
    evs, memo = step(p.states["fleet"], s, now, stall_after=stall, memo=memo, busy_silence=busy)
    if evs:
        for seq in elog.append(evs, now):
            pass
        for rec in elog.read(p.seq):
            p.fold(rec)
    return evs, memo
