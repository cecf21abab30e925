"""Acknowledgement, escalation and "all clear" (pure stages of the notify pipeline).

- :func:`ack_stage`: an acknowledged condition (``notice.acked``) is quiet: no repeat, no
  escalation, for as long as the ack lasts (until the condition clears, or ``until`` for a
  snooze / ``ack --for``). When a snooze ends and the condition is still open, one reminder is
  due at its end. An ack belongs to one condition, so it ends when the agent's class changes.
- :func:`escalations`: an urgent condition that was pushed, never acked, not cleared and not
  silenced ``escalate_after`` after its event is pushed again, marked "unanswered for …", once
  per condition (``notice.escalated``), to ``escalate_urls`` or, with none, to its own
  destination at the top priority. Failed attempts back off like notices (``retry`` entries
  ``cid@esc``); an escalation held by quiet hours goes when they end (urgent only when
  ``quiet_urgent`` is false).
- :func:`resolved`: with ``send_resolved``, pushed conditions that cleared go out as one
  grouped "all clear" per destination (``group_wait`` after the clearing, never during quiet
  hours), once each (keys ``cid@resolved``).

Invariant: every stage returns a named reason; none reads a clock (``now`` is a parameter).
"""
from __future__ import annotations

from enum import Enum

import msgspec

from projections.classes import CERRADO, TRABAJANDO
from projections.notify.msg import Decision, Item, Message, dest, message
from projections.notify.policy import NEVER, Policy, matching_silence
from projections.text import age


class AckReason(str, Enum):
    PASS = "pass"
    ACKED = "acked"                       # no repeat, no escalation
    SNOOZED = "snoozed"                   # acked until a time: a reminder is due then


class EscalateReason(str, Enum):
    ESCALATE = "escalate"
    OFF = "off"
    NOT_URGENT = "not-urgent"
    NOT_PUSHED = "not-pushed-yet"
    CLEARED = "cleared"
    ACKED = "acked"
    DONE = "already-escalated"
    SILENCED = "silenced"
    IN_FLIGHT = "in-flight"
    NOT_YET = "not-yet"
    RETRY_WAIT = "retry-wait"
    QUIET = "quiet"


class ResolvedReason(str, Enum):
    SEND = "send"
    NOT_PUSHED = "not-pushed"
    DONE = "already-sent"
    WAIT = "group-wait"
    QUIET = "quiet"
    IN_FLIGHT = "in-flight"


def ack_stage(c: dict, now: float) -> tuple[AckReason, float | None]:
    """(reason, when the ack ends if it is a snooze)."""
    until = c.get("acked")
    if until is None or now >= until:
        return AckReason.PASS, None
    return (AckReason.ACKED, None) if until >= NEVER else (AckReason.SNOOZED, until)


def snooze_due(c: dict) -> float | None:
    """A snooze that ended after the last push: the reminder is due at its end."""
    until = c.get("acked")
    if until is None or until >= NEVER or c["sent_rev"] < 0 or c["cleared"] is not None:
        return None
    return until if until > (c["sent_at"] or 0.0) else None


def escalate_decision(cid: str, c: dict, now: float, policy: Policy, inflight, retry: dict,
                      silences: dict, quiet_end: float | None) -> tuple[EscalateReason, float | None]:
    """Why (not) to escalate this condition now; the second value is when to look again."""
    if policy.escalate_after <= 0:
        return EscalateReason.OFF, None
    if c["sev"] != "urgent" or c["oneshot"]:
        return EscalateReason.NOT_URGENT, None
    if c["cleared"] is not None:
        return EscalateReason.CLEARED, None
    if c.get("escalated") is not None:
        return EscalateReason.DONE, None
    if c.get("acked_at") is not None:
        return EscalateReason.ACKED, None
    if c["sent_rev"] < 0:
        return EscalateReason.NOT_PUSHED, None
    if matching_silence(c, silences, now) is not None:
        return EscalateReason.SILENCED, None
    if cid in inflight:
        return EscalateReason.IN_FLIGHT, None
    # its first push waited for quiet hours to end (notice.held): unanswered counts from their
    # end, or it would escalate the moment it is first pushed
    held = c.get("held")
    due = (max(c["since"], held) if held is not None and c["sends"] <= 1 else c["since"]) + policy.escalate_after
    if now < due:
        return EscalateReason.NOT_YET, due
    r = retry.get(cid + "@esc")
    if r is not None and now < r[1]:
        return EscalateReason.RETRY_WAIT, r[1]
    if quiet_end is not None and not policy.quiet_urgent:
        return EscalateReason.QUIET, quiet_end
    return EscalateReason.ESCALATE, None


def escalations(state: dict, now: float, policy: Policy, inflight, quiet_end: float | None = None
                ) -> tuple[list[Message], list[float], list[Decision]]:
    """Escalation messages due now (one per destination), wake times, decisions."""
    if policy.escalate_after <= 0:
        return [], [], []
    items: dict[str, list[Item]] = {}
    wakes: list[float] = []
    decisions: list[Decision] = []
    retry = state["retry"]
    for cid, c in state["conds"].items():
        if c["sev"] != "urgent" or c["oneshot"]:
            continue
        r, wake = escalate_decision(cid, c, now, policy, inflight, retry, state["silences"], quiet_end)
        decisions.append(Decision(cid, "escalate", r))
        if wake is not None:
            wakes.append(wake)
        if r is EscalateReason.ESCALATE:
            attempt = (retry[cid + "@esc"][0] + 1) if cid + "@esc" in retry else 1
            key = "escalate" if policy.escalate_urls else dest(c, policy)
            items.setdefault(key, []).append(Item(cid=cid, c=c, due=now, attempt=attempt))
    out = [message(its, now, policy, kind="escalate", key=k, prefix=f"unanswered for {age(policy.escalate_after)}: ")
           for k, its in sorted(items.items())]
    return out, wakes, decisions


def resolved(state: dict, now: float, policy: Policy, quiet_end: float | None = None, inflight=frozenset()
             ) -> tuple[list[Message], list[float], list[Decision]]:
    """"All clear" messages due now (one per destination), wake times, decisions. A failed
    attempt waits for its retry time (``retry`` entry ``cid@resolved``)."""
    if not policy.send_resolved:
        return [], [], []
    items: dict[str, list[Item]] = {}
    wakes: list[float] = []
    decisions: list[Decision] = []
    for cid, c in state["conds"].items():
        if c["cleared"] is None or c["oneshot"]:
            continue
        r = state["retry"].get(cid + "@resolved")   # a failed attempt: not before its retry time
        due = c["cleared"] + policy.group_wait if r is None else max(c["cleared"] + policy.group_wait, r[1])
        why = (ResolvedReason.NOT_PUSHED if c["sent_rev"] < 0 or c["cls"] in ("SWARM", "FLAPPING")
               else ResolvedReason.DONE if c.get("resolved") is not None
               else ResolvedReason.QUIET if quiet_end is not None
               else ResolvedReason.IN_FLIGHT if cid in inflight
               else ResolvedReason.WAIT if now < due else ResolvedReason.SEND)
        decisions.append(Decision(cid, "resolved", why))
        if why is ResolvedReason.WAIT:
            wakes.append(due)
        if why is not ResolvedReason.SEND:
            continue
        by = c["cleared_by"] or "cleared"
        text = "closed" if by == CERRADO else "back to work" if by == TRABAJANDO else f"now {by}"
        line = {**c, "text": text, "since": c["cleared"]}
        items.setdefault(dest(c, policy), []).append(Item(cid=cid, c=line, due=due, attempt=r[0] + 1 if r else 1))
    out = [msgspec.structs.replace(message(its, now, policy, kind="resolved", key=k), severity="info", priority=False,
                                   title=f"all clear: {len(its)} resolved") for k, its in sorted(items.items())]
    return out, wakes, decisions
