"""The fleet projection and the termination machine.

``classify`` and ``diff`` are the pure core of the watcher: observations of one tick against the
folded state give ``agent.classified`` transitions (edge-triggered: one event per class change,
none while a level persists) and ``source.failed`` / ``source.recovered`` edges.

State (JSON): {"agents": {id: {"class", "since", "state", "phase", "reason", "source", "contract_sha256",
"contract_len", "target", "task", "last_activity", "waiting_for"}}, "sources": {name: {"failed", "error",
"since"}}}; each agent's record is a ``agent_records.Agent`` (a Struct read as that dict).

Within a class, ``agent.updated`` records what else changed (state, phase, task, target; last
activity when it moved by ``ACTIVITY_STEP`` or more; the reason when its ``cause`` changed), so
the state holds the values of the last tick, not of the last class change (CONTRACT: status
agrees with the files within one tick).
"""
# No `from __future__ import annotations` here: this module's typing.NamedTuple would compile each
# of its string field annotations (a ForwardRef each), and a process's first compile() builds
# CPython's AST types; `status` loads it, and five such modules were ~12 M instructions of its
# start (tests/test_cli_start.py: the fast paths compile nothing)

import math
from itertools import compress
from operator import is_not
from typing import Any, NamedTuple, TypedDict

from events.timefmt import iso as _iso
from events.timefmt import parse_iso as _parse_iso
from events.types import AgentClassified, AgentUpdated, SourceFailed, SourceRecovered
from projections.classes import CERRADO, Cls
from projections.agent_records import Agent
from projections.machine import (  # noqa: F401  (the termination machine, read through fleet too)
    AGEING, CLAUDE_GONE, PHASES, RULES, STATES, classify, normalise_phase, silence_limit)
from projections.observations import AgentObs, Snapshot
from projections.tmuxfacts import recorded_tmux, tmux_gone

NAME = "fleet"
TYPES = frozenset(("agent.classified", "agent.updated", "source.failed", "source.recovered"))  # fold reads only these


def initial() -> dict[str, Any]:
    return {"agents": {}, "sources": {}}


# a snapshot decodes its agents into the records the fold makes (projections/agent_records.py)
STATE_TYPE = TypedDict("FleetState", {"agents": dict[str, Agent], "sources": dict[str, Any]})


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    return fold_batch(state, (rec,))


def fold_batch(state: dict[str, Any], recs: Any) -> dict[str, Any]:
    """Each of ``recs`` in order into the state (:func:`fold` is this for one record; the loop
    here saves a call a record in a replay's batches: tests/test_fold_batch.py)."""
    agents, sources = state["agents"], state["sources"]
    for rec in recs:
        ev = rec.event
        type_ = rec.type
        if type_ == "agent.classified":
            target = ev.target
            if not target:   # a tick that saw no target keeps the recorded one
                old = agents.get(ev.agent)   # an Agent read by attribute (its mapping's get: ~4x the cost)
                target = None if old is None else old.target if type(old) is Agent else old.get("target")
            agents[ev.agent] = Agent(ev.to, rec.time, ev.state, ev.phase, ev.reason, ev.source, ev.contract_sha256,
                                     ev.contract_len, target, ev.task, ev.last_activity, ev.waiting_for)
            # prune_due's period is a multiple of PRUNE_EVERY: other seqs skip its call (~1 in 512 makes it)
            if rec.seq % PRUNE_EVERY == 0 and prune_due(rec.seq, agents):
                prune_closed(agents, rec.time, "since")
        elif type_ == "agent.updated":
            old = agents.get(ev.agent)
            if old is not None:  # a new record: the tick memo compares records by identity
                # ev.reason None: a row from before the field; the recorded reason stays
                agents[ev.agent] = Agent(old["class"], old.get("since"), ev.state, ev.phase,
                                         old.get("reason") if ev.reason is None else ev.reason, old.get("source"),
                                         old.get("contract_sha256"), old.get("contract_len"), ev.target, ev.task,
                                         ev.last_activity, ev.waiting_for)
        elif type_ == "source.failed":
            sources[ev.source] = {"failed": True, "error": ev.error, "since": rec.time}
        elif type_ == "source.recovered":
            sources[ev.source] = {"failed": False, "error": "", "since": rec.time}
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
    from events.timefmt import iso, parse_iso

    cutoff = iso(parse_iso(at) - CLOSED_KEEP_S)  # ISO strings of one format compare as times
    # fleet's records are Agents (read by attribute: a third of the scan through the mapping's get), dod's dicts
    closed = [a for a, v in agents.items() if (v.cls if type(v) is Agent else v.get("class")) == CERRADO]
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


def changes(old: dict[str, Any], obs: AgentObs, reason: str | None = None) -> list[str]:
    """Fields of ``old`` the observation ``obs`` (classified with ``reason``) changes within one class.
    A target the tick did not see (None) keeps the recorded one; last activity counts only when it
    moved by ``ACTIVITY_STEP`` or more (or was unknown); the reason only when its ``cause`` differs."""
    out = []
    if _str(obs.state) != old.get("state"):
        out.append("state")
    if _str(normalise_phase(obs.phase)) != old.get("phase"):
        out.append("phase")
    if obs.task != old.get("task"):
        out.append("task")
    if obs.waiting_for != old.get("waiting_for"):
        out.append("waiting_for")
    if obs.target is not None and obs.target != old.get("target"):
        out.append("target")
    if obs.last_activity is not None:
        la = old.get("last_activity")
        try:
            moved = la is None or abs(obs.last_activity - _parse_iso(la)) >= ACTIVITY_STEP
        except (ValueError, TypeError):
            moved = True
        if moved:
            out.append("last_activity")
    if reason is not None and cause(reason) != cause(old.get("reason") or ""):
        out.append("reason")
    return out


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


def updated(old: dict[str, Any], obs: AgentObs, reason: str | None = None) -> AgentUpdated | None:
    """The ``agent.updated`` edge for an agent whose class did not change (``reason``: this
    tick's, recorded with any change), or None."""
    ch = changes(old, obs, reason)
    if not ch:
        return None
    la = _la(obs) if "last_activity" in ch else old.get("last_activity")
    return AgentUpdated(agent=obs.agent, state=_str(obs.state), phase=_str(normalise_phase(obs.phase)),
                        task=obs.task, target=obs.target if obs.target is not None else old.get("target"),
                        last_activity=la, source=obs.source, changed=ch, reason=reason, waiting_for=obs.waiting_for)


class Memo(NamedTuple):
    """What ``step`` carries from one tick to the next (pure: a new Memo is returned each tick).

    ``absent``: consecutive misses per agent (see ``diff``). ``keys``: the snapshot's agent ids
    in order; aligned with them, ``vals`` the observations (None: look again) and ``recs`` the
    folded state records they were compared with; ``place`` maps an id to its place (built when
    first needed, kept while the ids stay). ``due``: per agent whose class can change by
    time alone, the clock interval ``[lo, hi)`` in which it cannot; ``bounds`` a conservative
    (max lo, min hi) over ``due``. An agent whose observation and record are the same (equal)
    as in the memo and whose clock is inside its interval would give the same (no) event again,
    so it is not classified again. ``n_state`` and ``missing``: how many agents the state had
    and which of them the snapshot lacked. ``again``: agents an event was found for (looked at
    next tick whatever the hint says: their event may not have been committed). ``gen``: the
    snapshot's ``gen`` this memo was made from (the change hint ``Snapshot.dirty`` is relative
    to it). ``stall_after``: the policy all this was computed with (another policy starts afresh).
    """

    absent: dict[str, int] = {}
    keys: list[str] = []
    vals: list[Any] = []
    recs: list[Any] = []
    due: dict[str, tuple[float, float]] = {}
    bounds: tuple[float, float] = (float("-inf"), float("inf"))
    n_state: int = -1
    missing: list[str] = []
    stall_after: float | None = None
    busy_silence: tuple[float | None, float | None] = (None, None)
    place: dict[str, int] | None = None
    again: frozenset[str] = frozenset()
    gen: int = -1


_INF = float("inf")


def _window(obs: AgentObs, cls: Cls, stall_after: float, busy_silence: float | None = None,
            busy_silence_tool: float | None = None) -> tuple[float, float]:
    """The clock interval in which ``classify(obs, ·)`` keeps giving ``cls``: only an idle,
    not-done agent with a known last activity changes class by time (at last_activity + stall),
    and a busy one under the busy_silence backstop (at last_activity + its silence limit)."""
    la = obs.last_activity
    if la is None or cls not in (Cls.TRABAJANDO, Cls.ESTANCADO) or obs.state not in ("idle", "busy"):
        return -_INF, _INF
    if obs.state == "busy":
        limit = silence_limit(obs, busy_silence, busy_silence_tool)
        if limit is None:
            return -_INF, _INF
        stall_after = limit
    # the bound is exact in classify's own arithmetic (now - la >= stall_after), rounding included
    t = la + stall_after
    if cls is Cls.TRABAJANDO:
        while t - la >= stall_after:
            t = math.nextafter(t, -_INF)
        return -_INF, t
    while t - la < stall_after:
        t = math.nextafter(t, _INF)
    return t, _INF


def diff(prev: dict[str, Any], snap: Snapshot, now: float, *, stall_after: float,
         absent: dict[str, int] | None = None, busy_silence: float | None = None,
         busy_silence_tool: float | None = None) -> tuple[list[Any], dict[str, int]]:
    """Transitions from the folded state ``prev`` to this tick's ``snap``.

    ``absent`` counts consecutive ticks an agent was not seen; an agent becomes CERRADO on its
    second miss (one resync of grace, so a file replaced by rename is not reported gone). Agents
    whose source failed this tick keep their class. Returns (events, new absent counts).
    Every agent is classified (no memo); ``step`` is the same with the per-tick memo.
    """
    out, memo = step(prev, snap, now, stall_after=stall_after, memo=Memo(absent=dict(absent or {})),
                     busy_silence=busy_silence, busy_silence_tool=busy_silence_tool)
    return out, memo.absent


def step(prev: dict[str, Any], snap: Snapshot, now: float, *, stall_after: float,
         memo: Memo | None = None, busy_silence: float | None = None,
         busy_silence_tool: float | None = None) -> tuple[list[Any], Memo]:
    """``diff`` with a memo (see :class:`Memo`): the same events as ``diff`` given the same
    state, snapshot and clock, but agents whose observation and state record did not change
    since the memo (and whose class cannot change by time yet) are not classified again.
    ``busy_silence``/``busy_silence_tool``: the busy backstop (see ``classify``; None: off).

    Stages: source edges; which agents to look at (``_hinted`` when the snapshot's change hint
    applies to this memo, else ``_compared``: every agent against the memo); the ones the clock
    made due (``_due``); classify those (``_look``); close the missing ones (``_missing``)."""
    memo = memo or Memo()
    silence = (busy_silence, busy_silence_tool)
    if memo.stall_after != stall_after or memo.busy_silence != silence:
        memo = Memo(absent=memo.absent)
    cur = snap.agents
    agents = prev["agents"]
    out = _source_edges(prev, snap)
    seen = _hinted(memo, snap, agents) or _compared(memo, cur, agents)
    keys, vals, recs, index, todo, same_ids = seen
    todo.update(a for a in memo.again if a in cur)  # their event may not have been committed
    due, bounds = _due(memo, cur, now, todo, same_ids)
    again: set[str] = set()
    if todo:
        due = dict(due)
        if index is None:
            index = dict(zip(keys, range(len(keys))))
        bounds = _look(sorted(todo), cur, recs, index, now, out, due, bounds, again,
                       stall_after, busy_silence, busy_silence_tool, snap.tmux_unknown)
    absent, missing = _missing(memo, snap, agents, same_ids, out)
    return out, Memo(absent=absent, keys=keys, vals=vals, recs=recs, due=due, bounds=bounds,
                     n_state=len(agents), missing=missing, stall_after=stall_after, busy_silence=silence,
                     place=index, again=frozenset(again), gen=snap.gen)


def _source_edges(prev: dict[str, Any], snap: Snapshot) -> list[Any]:
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


_Seen = tuple[list[str], list[Any], list[Any], "dict[str, int] | None", set[str], bool]


def _hinted(memo: Memo, snap: Snapshot, agents: dict[str, Any]) -> _Seen | None:
    """The agents to look at from the snapshot's change hint: only the ``dirty`` ones whose
    observation or record is not the memo's. Applies when the memo was made from the previous
    snapshot, the hint names only agents the memo knows and the snapshot still has (no agent
    came or went) and the state has as many agents as then (none pruned); else None. O(dirty),
    plus two list copies in C (the new memo's) once a dirty agent did change: an idle tick's
    empty hint hands the memo's own lists on (never mutated: copied before a change; at 10,000
    agents the copies were ~7 ms of an idle tick, run cache-cold after its sleep)."""
    dirty, index = snap.dirty, memo.place
    if dirty is None or index is None or memo.gen != snap.gen - 1 or len(agents) != memo.n_state \
            or len(snap.agents) != len(memo.keys):
        return None
    cur = snap.agents
    if not all(aid in index and aid in cur for aid in dirty):
        return None
    vals, recs = memo.vals, memo.recs
    todo: set[str] = set()
    for aid in dirty:
        i, o, r = index[aid], cur[aid], agents.get(aid)
        if o is not vals[i] or r is not recs[i]:
            if not todo:  # the first change: copies of the memo's lists from here on
                vals, recs = list(vals), list(recs)
            vals[i], recs[i] = o, r
            todo.add(aid)
    return memo.keys, vals, recs, index, todo, True


def _compared(memo: Memo, cur: dict[str, Any], agents: dict[str, Any]) -> _Seen:
    """The agents to look at, every one compared with the memo (in C: a list compare is
    identity first, then equality; per agent, identity: a new but equal object is merely
    classified again)."""
    keys = list(cur)
    vals: list[AgentObs | None] = list(cur.values())
    recs = list(map(agents.get, keys))
    same_ids = keys == memo.keys
    if same_ids:
        todo = set() if vals == memo.vals else set(compress(keys, map(is_not, vals, memo.vals)))
        if recs != memo.recs:
            todo.update(compress(keys, map(is_not, recs, memo.recs)))
        return memo.keys, vals, recs, memo.place, todo, True
    m_obs = dict(zip(memo.keys, memo.vals))
    m_rec = dict(zip(memo.keys, memo.recs))
    todo = set(compress(keys, map(is_not, map(m_obs.get, keys), vals)))
    todo.update(compress(keys, map(is_not, map(m_rec.get, keys), recs)))
    return keys, vals, recs, None, todo, False


def _due(memo: Memo, cur: dict[str, Any], now: float, todo: set[str],
         same_ids: bool) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
    """Agents whose class may have changed by time alone join ``todo``; returns the windows
    kept and their bounds (looked at one by one only when the clock left the bounds)."""
    due = memo.due
    lo_max, hi_min = memo.bounds
    if not same_ids and due:
        due = {k: v for k, v in due.items() if k in cur}
    if not lo_max <= now < hi_min:
        lo_max, hi_min = -_INF, _INF
        for aid, (lo, hi) in due.items():
            if lo <= now < hi:
                lo_max, hi_min = max(lo_max, lo), min(hi_min, hi)
            else:
                todo.add(aid)
    return due, (lo_max, hi_min)


def _look(todo: list[str], cur: dict[str, Any], recs: list[Any], index: dict[str, int], now: float,
          out: list[Any], due: dict[str, tuple[float, float]], bounds: tuple[float, float],
          again: set[str], stall_after: float, busy_silence: float | None,
          busy_silence_tool: float | None, blind: bool = False) -> tuple[float, float]:
    """Classify the agents of ``todo`` (in id order) against their records: an
    ``agent.classified`` on a class change, else an ``agent.updated`` when something else
    changed; each such agent is looked at again next tick (``again``). Updates ``due`` and
    returns the new bounds. ``blind``: see ``tmuxfacts.recorded_tmux``."""
    lo_max, hi_min = bounds
    for aid in todo:
        obs = cur[aid]
        old = recs[index[aid]]
        if blind and (obs := recorded_tmux(obs, old)) is None:
            again.add(aid)
            continue
        gone = tmux_gone(obs, old)
        if gone:
            cls, reason = Cls.CERRADO, "tmux window gone"
            lo, hi = -_INF, _INF
        else:
            cls, reason = classify(obs, now, stall_after, busy_silence, busy_silence_tool)
            lo, hi = _window(obs, cls, stall_after, busy_silence, busy_silence_tool)
        if old is None and cls is Cls.CERRADO and obs.last_activity is not None \
                and now - obs.last_activity > CLOSED_KEEP_S:
            due.pop(aid, None)  # history, not news: ended before the prune horizon (it would be
            continue            # forgotten again and recorded again, once per prune)
        if old is None or old["class"] != cls:  # a str Enum: compares as its value
            again.add(aid)
            out.append(AgentClassified(
                agent=aid, from_=old["class"] if old else None, to=cls._value_,
                state=obs.state if isinstance(obs.state, str) else None,
                phase=normalise_phase(obs.phase) if isinstance(obs.phase, str) else None,
                reason=reason, source=obs.source, contract_sha256=obs.contract_sha256,
                contract_len=obs.contract_len, task=obs.task, waiting_for=obs.waiting_for,
                target=old.get("target") if gone and old else obs.target, last_activity=_la(obs)))
        elif not gone and (upd := updated(old, obs, reason)) is not None:
            again.add(aid)
            out.append(upd)
        if lo == -_INF and hi == _INF:
            due.pop(aid, None)
        else:
            due[aid] = (lo, hi)
            if lo > lo_max:   # max() and min() without their calls (once per agent of a first tick)
                lo_max = lo
            if hi < hi_min:
                hi_min = hi
    return lo_max, hi_min


def _missing(memo: Memo, snap: Snapshot, agents: dict[str, Any], same_ids: bool,
             out: list[Any]) -> tuple[dict[str, int], list[str]]:
    """Agents of the state the snapshot lacks: CERRADO on the second consecutive miss (one
    resync of grace), never while their source failed. Returns (miss counts, the missing)."""
    cur = snap.agents
    absent = {k: v for k, v in memo.absent.items() if k not in cur} if memo.absent else {}
    if same_ids and len(agents) == memo.n_state:
        missing = memo.missing  # the state only grows: the same ids are missing
    else:
        missing = sorted(agents.keys() - cur.keys())
    for aid in missing:
        old = agents[aid]
        if old["class"] == Cls.CERRADO.value:
            continue
        if old.get("source") in snap.failed:
            continue  # a broken source never closes its agents
        misses = absent.get(aid, 0) + 1
        absent[aid] = misses
        if misses >= 2:
            absent.pop(aid, None)
            out.append(AgentClassified(agent=aid, from_=old["class"], to=Cls.CERRADO.value,
                                       state=old.get("state"), phase=old.get("phase"),
                                       reason="no longer seen by any source", source=old.get("source") or ""))
    return absent, missing
