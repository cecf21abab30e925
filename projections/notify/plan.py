"""The notification pipeline: pure stages over the notify state, wired in :func:`plan`.

Per condition: route → inhibit → silence → flap hold → ack → dedupe/repeat → quiet hours, each a
:data:`Stage` of one signature returning a named reason, wired in the one list :data:`STAGES`
(a new stage is one function and one line there); the survivors are grouped per destination (apprise tag) into ONE
message each when their group is due. Delivery is the caller's edge (``watcher.runtime.notifier``);
``notice.*`` events it records come back through the fold.

Timing (docs/contract.md "Writers and notification timing"):
- an urgent item is sent at most ``group_wait`` after it became due, with everything else due
  by then; ``group_interval`` never holds it back;
- non-urgent items wait ``group_wait`` and at least ``group_interval`` after the destination's
  last push; a retry goes at its ``retry_at``;
- a condition that cleared before its push is never pushed; a pushed one is re-sent only after
  ``repeat_interval`` (0 = never); swarm summaries update at most once per ``group_interval``.
"""
from __future__ import annotations

import logging
from enum import Enum
from itertools import chain
from collections.abc import Callable
from typing import Any, Protocol, cast

import msgspec

from events.timefmt import iso
from events.types import NoticeHeld, NoticeSilenced
from projections.classes import CERRADO, DICE_TERMINADO, ESTANCADO
from projections.notify.escalate import AckReason, ack_stage, escalations, resolved, snooze_due
from projections.notify.flap import flap_state
from projections.notify.msg import Decision, Item, Message, covers, dest, message, notice_id
from projections.notify.policy import SEV_RANK, Policy, condition, matching_silence, swarm_text
from projections.notify.quiet import QuietReason

log = logging.getLogger("fleetwatch.notify")

INF = float("inf")
EPS = 0.001  # event times are stored to the millisecond (rounded): never wait on the rounding


class RouteReason(str, Enum):
    ROUTED = "routed"
    BELOW_MIN_SEVERITY = "below-min-severity"
    DOD_MET = "dod-already-met"           # a "claims done" whose DoD a verifier already met
    JUDGED = "judged-by-checker"          # a claim of done a checker or verifier judges: its verdict is pushed
    CLAIM_PUSHED = "claim-already-pushed"  # an unverified claim whose "ready for review" was pushed


class InhibitReason(str, Enum):
    PASS = "pass"
    CLEARED = "cleared-before-push"       # never pushed: resolved in time
    CLOSED = "agent-closed"               # CERRADO drops the agent's pending notices
    RESOLVED = "resolved"                 # pushed earlier, now resolved: nothing more to say


class SilenceReason(str, Enum):
    PASS = "pass"
    SILENCED = "silenced"                 # recorded now (notice.silenced)
    SILENCED_RECORDED = "silenced-already-recorded"


class FlapReason(str, Enum):
    HELD = "held-while-flapping"


class DedupeReason(str, Enum):
    NEW = "new"
    NOT_YET_DUE = "not-yet-due"           # e.g. source.failed shorter than source_failed_after
    IN_FLIGHT = "in-flight"
    RETRY_WAIT = "retry-wait"
    RETRY_DUE = "retry-due"
    UPDATE_DUE = "update-due"             # swarm summary changed since its push
    UPDATE_WAIT = "update-wait"
    ALREADY_SENT = "already-sent"
    REPEAT_DUE = "repeat-due"


class GroupReason(str, Enum):
    SEND = "send"
    RIDE_ALONG = "ride-along"             # due, sent with the group another item made due
    WAIT_GROUP = "group-wait"
    WAIT_INTERVAL = "group-interval"


class NudgeReason(str, Enum):
    NUDGE = "nudge"
    DISABLED = "disabled"
    NOT_STALLED = "not-stalled"
    WAITING = "waiting-for-human"
    DOD_MET = "dod-met"
    MAX_REACHED = "max-per-stall"
    NOT_YET = "not-yet"
    NO_TARGET = "no-target"
    SILENCED = "silenced"
    IN_FLIGHT = "in-flight"


# the dedupe answers that make a condition's push due now
DUE_NOW = (DedupeReason.NEW, DedupeReason.RETRY_DUE, DedupeReason.UPDATE_DUE, DedupeReason.REPEAT_DUE)


class Plan(msgspec.Struct, kw_only=True):
    send: list[Message] = []
    record: list[Any] = []            # events to append (NoticeSilenced, NoticeHeld)
    next_wake: float | None = None
    decisions: list[Decision] = []


# ---- stages --------------------------------------------------------------------------------
def route(c: dict, policy: Policy, state: dict | None = None) -> RouteReason:
    """A claim of done reaches the person once: judged by a checker or verifier, only their
    verdict is pushed (never the claim); otherwise the claim itself, as "ready for review",
    whatever ``min_severity``, and its later "unverified claim" is not pushed again."""
    cls = c["cls"]
    if cls == DICE_TERMINADO:
        if state is not None and state["dod"].get(c["name"]) == "met":
            return RouteReason.DOD_MET
        return RouteReason.JUDGED if policy.claims_judged else RouteReason.ROUTED
    if cls == "CLAIM_UNVERIFIED" and not policy.claims_judged and state is not None and _claim_pushed(state, c):
        return RouteReason.CLAIM_PUSHED
    if SEV_RANK.get(c["sev"], 0) < SEV_RANK.get(policy.min_severity, 1):
        return RouteReason.BELOW_MIN_SEVERITY
    return RouteReason.ROUTED


def _claim_pushed(state: dict, c: dict) -> bool:
    """The agent's open condition is its claim of done, already pushed."""
    ag = state["agents"].get(c["name"])
    cur = state["conds"].get(ag["cond"] or "") if ag is not None else None
    return cur is not None and cur["cls"] == DICE_TERMINADO and cur["sent_rev"] >= 0


def inhibit(c: dict) -> InhibitReason:
    if c["cleared"] is None:
        return InhibitReason.PASS
    if c["sent_rev"] >= 0:
        return InhibitReason.RESOLVED
    return InhibitReason.CLOSED if c["cleared_by"] == CERRADO else InhibitReason.CLEARED


def silence(c: dict, silences: dict, now: float) -> tuple[SilenceReason, str | None]:
    sid = matching_silence(c, silences, now)
    if sid is None:
        return SilenceReason.PASS, None
    return (SilenceReason.SILENCED_RECORDED if c.get("silenced") == sid else SilenceReason.SILENCED), sid


def dedupe(cid: str, c: dict, now: float, policy: Policy, inflight: frozenset[str] | set[str],
           retry: dict) -> tuple[DedupeReason, float | None, int]:
    """(reason, due time or wake time, attempt)."""
    if cid in inflight:
        return DedupeReason.IN_FLIGHT, None, 1
    r = retry.get(cid)
    if r is not None:
        attempts, at = r
        return (DedupeReason.RETRY_WAIT if now < at else DedupeReason.RETRY_DUE), at, attempts + 1
    if c["sent_rev"] < 0:
        due = c["since"] + policy.source_failed_after if c["cls"] == "SOURCE_FAILED" else c["since"]
        return (DedupeReason.NOT_YET_DUE if now < due else DedupeReason.NEW), due, 1
    if c["rev"] > c["sent_rev"]:
        due = max(c["changed"], (c["sent_at"] or 0.0) + policy.group_interval)
        return (DedupeReason.UPDATE_WAIT if now < due else DedupeReason.UPDATE_DUE), due, 1
    snoozed = snooze_due(c)
    if snoozed is not None:  # a snooze ended: one reminder at its end
        return (DedupeReason.ALREADY_SENT if now < snoozed else DedupeReason.REPEAT_DUE), snoozed, 1
    if c["oneshot"] or policy.repeat_interval <= 0:
        return DedupeReason.ALREADY_SENT, None, 1
    due = (c["sent_at"] or 0.0) + policy.repeat_interval
    return (DedupeReason.ALREADY_SENT if now < due else DedupeReason.REPEAT_DUE), due, 1


def ready_at(it: Item, policy: Policy, last_dest: float) -> tuple[float, GroupReason]:
    """When this item alone would flush its group."""
    if it.retry:
        return it.due, GroupReason.WAIT_GROUP
    if it.c["sev"] == "urgent":
        return it.due + policy.group_wait, GroupReason.WAIT_GROUP
    a, b = it.due + policy.group_wait, last_dest + policy.group_interval
    return (a, GroupReason.WAIT_GROUP) if a >= b else (b, GroupReason.WAIT_INTERVAL)


def group(items: list[Item], now: float, policy: Policy, last: dict[str, float]
          ) -> tuple[list[list[Item]], list[float], list[Decision]]:
    """Per destination and attempt: flush all due items together once the earliest of them is
    ready. A notice has one retry budget (its attempt is its items' one attempt), so a retry
    groups only with items on the same attempt: a condition that came meanwhile goes out on its
    own first attempt, never riding along on another's third (and abandoned with it)."""
    batches: list[list[Item]] = []
    wakes: list[float] = []
    decisions: list[Decision] = []
    by: dict[tuple[str, int], list[Item]] = {}
    for it in items:
        by.setdefault((dest(it.c, policy), it.attempt), []).append(it)
    for (d, _), its in sorted(by.items()):
        sevs = [s for s in SEV_RANK if d.startswith("route:") or policy.tags.get(s, "") == d]
        last_dest = max([last.get(s, -INF) for s in sevs] or [-INF])
        ready = {it.cid: ready_at(it, policy, last_dest) for it in its}
        flush = min(r[0] for r in ready.values())
        if now < flush:
            wakes.append(flush)
            decisions += [Decision(it.cid, "group", ready[it.cid][1]) for it in its]
            continue
        batches.append(its)
        decisions += [Decision(it.cid, "group", GroupReason.SEND if ready[it.cid][0] <= now
                               else GroupReason.RIDE_ALONG) for it in its]
    return batches, wakes, decisions


# ---- the pipeline: every stage of one signature, wired in STAGES ---------------------------
class _Run:
    """One plan's inputs, what its stages add (events to record, wake times, items held by quiet
    hours) and the dedupe stage's answer for the condition going through (``due``, ``attempt``,
    ``retry``: read once every stage passed it)."""

    __slots__ = ("state", "now", "policy", "inflight", "quiet_end", "flapping", "flaps", "record", "wakes", "held",
                 "due", "attempt", "retry")

    def __init__(self, state: dict, now: float, policy: Policy, inflight: frozenset[str] | set[str],
                 quiet_end: float | None) -> None:
        self.state, self.now, self.policy, self.inflight, self.quiet_end = state, now, policy, inflight, quiet_end
        self.flapping, self.flaps = flap_conds(state, now, policy)
        self.record: list[Any] = []
        self.wakes: list[float] = []
        self.held: list[Item] = []
        self.due: float | None = None
        self.attempt, self.retry = 1, False


# A stage: (condition id, condition, the plan's run) -> (the named reason it decided, recorded as
# the condition's Decision, or None; whether the condition goes on to the next stage).
Stage = Callable[[str, dict, _Run], "tuple[str | None, bool]"]
_ON = (None, True)


def _route_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    r = route(c, run.policy, run.state)
    return _ON if r is RouteReason.ROUTED else (r, False)


def _inhibit_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    i = inhibit(c)
    return _ON if i is InhibitReason.PASS else (i, False)


def _silence_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    s, sid = silence(c, run.state["silences"], run.now)
    if s is SilenceReason.PASS:
        return _ON
    run.wakes.append(run.state["silences"][sid]["until"])
    if s is SilenceReason.SILENCED and cid not in run.flaps:
        it = Item(cid=cid, c=c, due=run.now)
        run.record.append(NoticeSilenced(notice=notice_id([it]), covers=covers([it]),
                                         silence=sid or "", keys=[f"{cid}@{c['rev']}"]))
    return s, False


def _flap_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    return (FlapReason.HELD, False) if c["subject"] in run.flapping and c["cls"] != "FLAPPING" else _ON


def _ack_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    a, until = ack_stage(c, run.now)
    if a is AckReason.PASS:
        return _ON
    if until is not None:
        run.wakes.append(until)
    return a, False


def _dedupe_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    d, due, attempt = dedupe(cid, c, run.now, run.policy, run.inflight, run.state["retry"])
    if d in DUE_NOW:
        run.due, run.attempt, run.retry = due, attempt, d is DedupeReason.RETRY_DUE
        return d, True
    if due is not None:
        run.wakes.append(due)
    return d, False


def _quiet_stage(cid: str, c: dict, run: _Run) -> tuple[str | None, bool]:
    """In quiet hours every due item is held until they end, an urgent one only without ``quiet_urgent``."""
    if run.quiet_end is None or (c["sev"] == "urgent" and run.policy.quiet_urgent):
        return _ON
    run.wakes.append(run.quiet_end or run.now)
    if c.get("held") == run.quiet_end:
        return QuietReason.HELD_RECORDED, False
    if cid not in run.flaps:
        run.held.append(Item(cid=cid, c=c, due=run.now))
    return QuietReason.HELD, False


# every condition goes through these in order until one stops it; what passes them all is due now
STAGES: tuple[tuple[str, Stage], ...] = (
    ("route", _route_stage), ("inhibit", _inhibit_stage), ("silence", _silence_stage), ("flap", _flap_stage),
    ("ack", _ack_stage), ("dedupe", _dedupe_stage), ("quiet", _quiet_stage))


# ---- the plan ------------------------------------------------------------------------------
def flap_conds(state: dict, now: float, policy: Policy) -> tuple[set[str], dict[str, dict]]:
    """Subjects flapping at ``now`` and a synthetic FLAPPING condition for each one not yet
    notified in this episode."""
    flapping: set[str] = set()
    out: dict[str, dict] = {}
    sent = state["flap_sent"]
    for subj, flat in state["classes"].items():
        start, hist, notified = flap_state(flat, sent.get(subj), now, policy)
        if start is None:
            continue
        flapping.add(subj)
        if not notified:
            cid = f"{subj}|FLAPPING#{start[2]}"
            text = f"{hist[-1][3]:.0f}% state change; notices held until it settles"
            out[cid] = condition(subj, "FLAPPING", "warning", subj.partition(":")[2], text, start[2], start[1], True)
            out[cid]["last_seq"] = hist[-1][2]
    return flapping, out


def plan(state: dict[str, Any], now: float, policy: Policy,
         inflight: frozenset[str] | set[str] = frozenset(), quiet_end: float | None = None) -> Plan:
    """The whole decision for ``now``: messages to send, events to record, when to call again.

    ``inflight``: condition ids of notices handed to the deliverer and not yet folded back.
    ``quiet_end``: when the current quiet hours end (None: not in quiet hours), from
    ``projections.notify.quiet.quiet_until`` at the edge. ``now`` must not step back between
    calls for the timing promises to hold (the notifier feeds a monotonic-anchored clock)."""
    now += EPS
    decisions: list[Decision] = []
    items: list[Item] = []
    run = _Run(state, now, policy, inflight, quiet_end)
    for cid, c in chain(state["conds"].items(), run.flaps.items()):   # (plan never changes the state)
        for name, step in STAGES:
            reason, go_on = step(cid, c, run)
            if reason is not None:
                decisions.append(Decision(cid, name, reason))
            if not go_on:
                break
        else:   # through every stage: due now
            if c["cls"] == "SWARM":  # its line is built from the group's counts now
                c = {**c, "text": swarm_text(state["swarms"].get(c["name"], {}))}
            items.append(Item(cid=cid, c=c, due=cast(float, run.due), attempt=run.attempt, retry=run.retry))
    batches, gwakes, gdec = group(items, now, policy, state["last"])
    decisions += gdec
    if run.flapping:  # a quiet flapping subject settles by time: look again when changes age out
        run.wakes.append(now + 60.0)
    send = [message(b, now, policy, prefix=_held_prefix(b)) for b in batches]
    if run.held:
        run.record.append(NoticeHeld(notice=notice_id(run.held, "held"), covers=covers(run.held),
                                     keys=sorted(f"{it.cid}@{it.c['rev']}" for it in run.held), reason="quiet",
                                     until=iso(quiet_end or now)))
    for stage in (escalations(state, now, policy, inflight, quiet_end),
                  resolved(state, now, policy, quiet_end, inflight)):
        send += stage[0]
        run.wakes += stage[1]
        decisions += stage[2]
    if log.isEnabledFor(logging.DEBUG):
        for dec in decisions:
            log.debug("notify %s %s: %s", dec.stage, dec.key, str.__str__(dec.reason))
    future = [w for w in run.wakes + gwakes if w > now]
    return Plan(send=send, record=run.record, next_wake=min(future) if future else None, decisions=decisions)


def _held_prefix(batch: list[Item]) -> str:
    """Held by quiet hours and not pushed since (a later repeat is not "after quiet hours")."""
    return "after quiet hours: " if any(it.c.get("held") is not None and (it.c["sent_at"] or 0.0) < it.c["held"]
                                        for it in batch) else ""


# ---- nudges --------------------------------------------------------------------------------
class NudgeAction(msgspec.Struct, frozen=True):
    agent: str
    attempt: int
    stall_seq: int
    target: str | None = None


def nudge_decision(agent: str, ag: dict, state: dict, now: float, policy: Policy,
                   target: str | None, inflight: set) -> tuple[NudgeReason, float | None]:
    """Why (not) to nudge this agent now; the second value is when to look again."""
    if not policy.nudge_enabled:
        return NudgeReason.DISABLED, None
    if ag["cls"] != ESTANCADO:
        return NudgeReason.NOT_STALLED, None
    if ag.get("state") == "waiting":
        return NudgeReason.WAITING, None
    if state["dod"].get(agent) == "met":
        return NudgeReason.DOD_MET, None
    if ag["nudges"] >= policy.nudge_max:
        return NudgeReason.MAX_REACHED, None
    if (agent, ag["seq"], ag["nudges"] + 1) in inflight:
        return NudgeReason.IN_FLIGHT, None
    if policy.nudge_needs_target and not target:
        return NudgeReason.NO_TARGET, None
    fake = {"subject": f"agent:{agent}", "cls": ESTANCADO}
    if matching_silence(fake, state["silences"], now) is not None:
        return NudgeReason.SILENCED, None
    due = ag["since"] + policy.nudge_after if not ag["nudges"] else \
        (ag["nudged_at"] or ag["since"]) + max(policy.nudge_after, policy.nudge_gap)
    if now < due:
        return NudgeReason.NOT_YET, due
    return NudgeReason.NUDGE, None


class Targets(Protocol):
    """agent -> its tmux target (None: none known): a dict, or the runtime's view of the fleet
    projection that looks up only the agents asked for."""

    def get(self, agent: str, /) -> str | None: ...


def nudges(state: dict, now: float, policy: Policy, targets: Targets,
           inflight: set | frozenset = frozenset()) -> tuple[list[NudgeAction], float | None]:
    """Nudges due now (ESTANCADO, DoD not met, never a waiting/RECLAMA agent, at most
    ``nudge_max`` per stall) and the next time one could become due."""
    out: list[NudgeAction] = []
    wakes: list[float] = []
    if not policy.nudge_enabled:
        return out, None
    for agent, ag in sorted(state["agents"].items()):
        r, wake = nudge_decision(agent, ag, state, now, policy, targets.get(agent), set(inflight))
        log.debug("nudge %s: %s", agent, r.value)
        if r is NudgeReason.NUDGE:
            out.append(NudgeAction(agent=agent, attempt=ag["nudges"] + 1, stall_seq=ag["seq"],
                                   target=targets.get(agent)))
        elif wake is not None:
            wakes.append(wake)
    return out, (min(wakes) if wakes else None)

