"""The fleet projection: its fold, and its per-agent judge (the room's contract: its ``__init__``).

Observations of one tick against the folded state give ``agent.classified`` transitions
(edge-triggered: one event per class change, none while a level persists) and
``source.failed`` / ``source.recovered`` edges.

State (JSON): {"agents": {id: {"class", "since", "state", "phase", "reason", "source", "contract_sha256",
"contract_len", "target", "task", "last_activity", "waiting_for"}}, "sources": {name: {"failed", "error",
"since"}}}; each agent's record is a plain dict of those keys (a snapshot's record may lack the keys
added after it was written: readers ``get`` every key but ``class`` and ``since``).

Within a class, ``agent.updated`` records what else changed (state, phase, task, waiting_for,
target; last activity when it moved by ``ACTIVITY_STEP`` or more, or was unknown; the reason when
its ``cause`` changed), so the state holds the values of the last tick, not of the last class
change (docs/contract.md: status agrees with the files within one tick).
"""
# No `from __future__ import annotations` here: this module has a typing.NamedTuple (projections/__init__)

import math
from typing import Any, NamedTuple, TypedDict

from events.timefmt import iso as _iso
from events.timefmt import parse_iso as _parse_iso
from events.types import AgentClassified, AgentUpdated, SourceFailed, SourceRecovered
from projections.classes import CERRADO, Cls
from projections.fleet.machine import AGEING, classify, normalise_phase, silence_limit
from projections.observations import AgentObs, Snapshot
from projections.fleet.tmux import recorded_tmux, tmux_gone

NAME = "fleet"
TIME = None        # fold reads rec.time itself (projections.base.Projection)
READS_ID = False   # fold never reads rec.id
TYPES = frozenset(("agent.classified", "agent.updated", "source.failed", "source.recovered"))  # fold reads only these


def initial() -> dict[str, Any]:
    return {"agents": {}, "sources": {}}


STATE_TYPE = TypedDict("FleetState", {"agents": dict[str, dict[str, Any]], "sources": dict[str, Any]})


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    """One event into the state (a no-op for types outside ``TYPES``)."""
    ev = rec.event
    type_ = rec.type
    if type_ == "agent.classified":
        agents = state["agents"]
        # a tick that saw no target keeps the recorded one
        target = ev.target or (agents.get(ev.agent) or {}).get("target")
        agents[ev.agent] = {"class": ev.to, "since": rec.time, "state": ev.state, "phase": ev.phase,
                            "reason": ev.reason, "source": ev.source, "contract_sha256": ev.contract_sha256,
                            "contract_len": ev.contract_len, "target": target, "task": ev.task,
                            "last_activity": ev.last_activity, "waiting_for": ev.waiting_for}
        # prune_due's period is a multiple of PRUNE_EVERY: other seqs skip its call (~1 in 512 makes it)
        if rec.seq % PRUNE_EVERY == 0 and prune_due(rec.seq, agents):
            prune_closed(agents, rec.time, "since")
    elif type_ == "agent.updated":
        agents = state["agents"]
        old = agents.get(ev.agent)
        if old is not None:  # a new record: the scheduler compares fleet records by identity
            # ev.reason None: a row from before the field; the recorded reason stays
            agents[ev.agent] = {"class": old["class"], "since": old.get("since"), "state": ev.state,
                                "phase": ev.phase, "reason": old.get("reason") if ev.reason is None else ev.reason,
                                "source": old.get("source"), "contract_sha256": old.get("contract_sha256"),
                                "contract_len": old.get("contract_len"), "target": ev.target, "task": ev.task,
                                "last_activity": ev.last_activity, "waiting_for": ev.waiting_for}
    elif type_ == "source.failed":
        state["sources"][ev.source] = {"failed": True, "error": ev.error, "since": rec.time}
    elif type_ == "source.recovered":
        state["sources"][ev.source] = {"failed": False, "error": "", "since": rec.time}
    return state


PRUNE_EVERY = 512                 # seqs: prune on agent.classified events whose seq is a multiple
CLOSED_KEEP_S = 7 * 86400         # a CERRADO agent is forgotten this long after it closed


def prune_due(seq: int, agents: dict[str, Any]) -> bool:
    """Whether the fold at ``seq`` scans ``agents`` for agents to forget: on seqs that are a
    multiple of PRUNE_EVERY, or of the power of two at or above the agent count when that is
    larger. A scan of N agents then comes at most once per N seqs (amortized O(1) per event: a
    first tick of 50,000 agents scans ~100,000 records, not 2.5 million), and the state never
    grows past about twice its live size. Deterministic: seq and state only."""
    n = len(agents)
    every = PRUNE_EVERY if n <= PRUNE_EVERY else 1 << (n - 1).bit_length()
    return seq % every == 0


def prune_closed(agents: dict[str, dict[str, Any]], at: str, since_key: str) -> None:
    """Forget agents CERRADO for over CLOSED_KEEP_S before ``at`` (an event's time), so state and
    snapshots stay bounded while agents come and go. Deterministic: driven by event seq and time
    only. An agent that comes back later is seen for the first time again."""
    cutoff = _iso(_parse_iso(at) - CLOSED_KEEP_S)  # ISO strings of one format compare as times
    closed = [a for a, v in agents.items() if v.get("class") == CERRADO]
    for aid in [a for a in closed if (agents[a].get(since_key) or "") < cutoff]:
        del agents[aid]


ACTIVITY_STEP = 300.0  # s: last activity alone is recorded when it moved this much (not every hook)


def cause(reason: str) -> str:
    """What a reason says, without the measurements that change while the cause stays: an
    ESTANCADO reason's age ("busy, silent for 7m") and a too-large file's size ("too large (N
    bytes > LIMIT)"). A new cause is recorded (one ``agent.updated``), a new measurement is not
    (the age would be an event per tick). Everything else in a reason is cause."""
    for prefix in AGEING:
        if reason.startswith(prefix):
            return prefix
    if reason.startswith("too large (") and " bytes > " in reason:
        return "too large (> " + reason.partition(" bytes > ")[2]
    return reason


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _la(obs: AgentObs) -> str | None:
    la = obs.last_activity
    if la is None or not math.isfinite(la):
        return None
    try:
        return _iso(la)
    except (ValueError, OverflowError, OSError):
        return None


def updated(old: dict[str, Any], obs: AgentObs, reason: str) -> AgentUpdated | None:
    """The ``agent.updated`` edge for an agent whose class did not change (``reason``: this tick's,
    recorded with any change), or None. What counts as a change: the module's docstring; a target
    the tick did not see (None) keeps the recorded one."""
    seen: dict[str, Any] = {"state": _str(obs.state), "phase": _str(normalise_phase(obs.phase)), "task": obs.task,
                            "waiting_for": obs.waiting_for}
    ch = [k for k, v in seen.items() if v != old.get(k)]
    if obs.target is not None and obs.target != old.get("target"):
        ch.append("target")
    la = old.get("last_activity")
    if obs.last_activity is not None:
        try:
            moved = la is None or abs(obs.last_activity - _parse_iso(la)) >= ACTIVITY_STEP
        except (ValueError, TypeError):
            moved = True
        if moved:
            ch.append("last_activity")
            la = _la(obs)
    if cause(reason) != cause(old.get("reason") or ""):
        ch.append("reason")
    if not ch:
        return None
    return AgentUpdated(agent=obs.agent, state=seen["state"], phase=seen["phase"], task=obs.task,
                        target=obs.target if obs.target is not None else old.get("target"),
                        last_activity=la, source=obs.source, changed=ch, reason=reason, waiting_for=obs.waiting_for)


class Limits(NamedTuple):
    """The policy a judge classifies with (``[classify]``): ``stall_after``, and the busy backstop
    ``busy_silence``/``busy_silence_tool`` (None: off; see ``machine.classify``)."""

    stall_after: float
    busy_silence: float | None = None
    busy_silence_tool: float | None = None


_INF = float("inf")
NEXT_TICK = -_INF   # a judge's due time meaning "look at this agent again on the next tick"


def _due(obs: AgentObs, cls: Cls, stall_after: float, busy_silence: float | None = None,
         busy_silence_tool: float | None = None) -> float:
    """The last clock time at which ``classify(obs, ·)`` still gives ``cls`` (``inf``: time alone
    never changes it): only a TRABAJANDO agent with a known last activity changes class by time,
    an idle one at last_activity + stall, a busy one under the busy_silence backstop at
    last_activity + its silence limit."""
    la = obs.last_activity
    if la is None or cls is not Cls.TRABAJANDO or obs.state not in ("idle", "busy"):
        return _INF
    if obs.state == "busy":
        limit = silence_limit(obs, busy_silence, busy_silence_tool)
        if limit is None:
            return _INF
        stall_after = limit
    # the bound is exact in classify's own arithmetic (now - la >= stall_after), rounding included
    t = la + stall_after
    while t - la >= stall_after:
        t = math.nextafter(t, -_INF)
    return t


def detect(prev: dict[str, Any], snap: Snapshot, now: float, limits: Limits,
           absent: dict[str, int] | None = None) -> tuple[list[Any], dict[str, int]]:
    """Transitions from the folded state ``prev`` to this tick's ``snap``, every agent judged:
    the source edges, each agent's :func:`judge` in id order, then :func:`missing`. Returns
    (events, new miss counts): what the runtime's scheduler must give too (the room's contract)."""
    out = source_edges(prev, snap)
    agents, cur, blind = prev["agents"], snap.agents, snap.tmux_unknown
    for aid in sorted(cur):
        ev, _due = judge(aid, cur[aid], agents.get(aid), now, limits, blind)
        if ev is not None:
            out.append(ev)
    return out, missing(prev, snap, absent or {}, out)


def source_edges(prev: dict[str, Any], snap: Snapshot) -> list[Any]:
    """source.failed / source.recovered: edges only."""
    out: list[Any] = []
    for res in snap.results:
        known = prev["sources"].get(res.name)
        was_failed = bool(known and known["failed"])
        if not res.ok and not was_failed:
            out.append(SourceFailed(source=res.name, error=res.error or "failed",
                                    error_class=res.error_class, exit_code=res.exit_code))
        elif res.ok and was_failed:
            out.append(SourceRecovered(source=res.name, error=known["error"] if known else ""))
    return out


def judge(aid: str, obs: AgentObs, old: Any, now: float, limits: Limits,
          blind: bool = False) -> tuple[Any, float]:
    """One agent's observation against its folded record ``old`` (None: never seen) at ``now``:
    (the ``agent.classified`` of a class change, else the ``agent.updated`` of another change,
    else None; the clock time from which judging it again may give something with neither its
    observation nor its record changed: ``inf`` never, ``NEXT_TICK`` the next tick). ``blind``:
    see ``tmuxfacts.recorded_tmux``."""
    if blind:
        known = recorded_tmux(obs, old)
        if known is None:
            return None, NEXT_TICK
        obs = known
    gone = tmux_gone(obs, old)
    if gone:
        cls, reason = Cls.CERRADO, "tmux window gone"
        due = _INF
    else:
        cls, reason = classify(obs, now, *limits)
        due = _due(obs, cls, *limits)
    if old is None and cls is Cls.CERRADO and obs.last_activity is not None \
            and now - obs.last_activity > CLOSED_KEEP_S:
        return None, _INF  # history, not news: ended before the prune horizon (it would be
        #                    forgotten again and recorded again, once per prune)
    if old is None or old["class"] != cls:  # a str Enum: compares as its value
        return AgentClassified(
            agent=aid, from_=old["class"] if old else None, to=cls._value_,
            state=obs.state if isinstance(obs.state, str) else None,
            phase=normalise_phase(obs.phase) if isinstance(obs.phase, str) else None,
            reason=reason, source=obs.source, contract_sha256=obs.contract_sha256,
            contract_len=obs.contract_len, task=obs.task, waiting_for=obs.waiting_for,
            target=old.get("target") if gone and old else obs.target, last_activity=_la(obs)), NEXT_TICK
    if not gone and (upd := updated(old, obs, reason)) is not None:
        return upd, NEXT_TICK
    return None, due


def missing(prev: dict[str, Any], snap: Snapshot, absent: dict[str, int], out: list[Any],
            gone: list[str] | None = None) -> dict[str, int]:
    """Agents of the state the snapshot lacks (``gone``: their ids in order, when the caller
    knows them): CERRADO on the second consecutive miss (one resync of grace, so a file replaced
    by rename is not reported gone), never while their source failed; their events are added to
    ``out``. Returns the new miss counts."""
    agents, cur = prev["agents"], snap.agents
    absent = {k: v for k, v in absent.items() if k not in cur} if absent else {}
    for aid in sorted(agents.keys() - cur.keys()) if gone is None else gone:
        old = agents[aid]
        if old["class"] == CERRADO or old.get("source") in snap.failed:
            continue  # closed already; or a broken source, which never closes its agents
        absent[aid] = absent.get(aid, 0) + 1
        if absent[aid] >= 2:
            del absent[aid]
            out.append(AgentClassified(agent=aid, from_=old["class"], to=CERRADO,
                                       state=old.get("state"), phase=old.get("phase"),
                                       reason="no longer seen by any source", source=old.get("source") or ""))
    return absent
