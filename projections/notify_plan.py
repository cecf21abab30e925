"""The notification pipeline: pure stages over the notify state, wired in :func:`plan`.

Per condition: route → inhibit → silence → flap hold → dedupe/repeat, each a small function
returning a named reason; the survivors are grouped per destination (apprise tag) into ONE
message each when their group is due. Delivery is the caller's edge (``watcher.runtime.notifier``);
``notice.*`` events it records come back through the fold.

Timing (CONTRACT.md "Writers and notification timing"):
- an urgent item is sent at most ``group_wait`` after it became due, with everything else due
  by then; ``group_interval`` never holds it back;
- non-urgent items wait ``group_wait`` and at least ``group_interval`` after the destination's
  last push; a retry goes at its ``retry_at``;
- a condition that cleared before its push is never pushed; a pushed one is re-sent only after
  ``repeat_interval`` (0 = never); swarm summaries update at most once per ``group_interval``.
"""
from __future__ import annotations

import fnmatch
import hashlib
import logging
from enum import Enum
from typing import Any

import msgspec

from events.timefmt import iso
from events.types import NoticeSilenced
from projections.notify_policy import SEV_RANK, Policy, swarm_text
from projections.notify_flap import flap_state
from projections.text import age

log = logging.getLogger("fleetwatch.notify")

INF = float("inf")
EPS = 0.001  # event times are stored to the millisecond (rounded): never wait on the rounding
MAX_LINES = 40
# body order and title labels: RECLAMA > DICE_TERMINADO > ESTANCADO > MAL_LANZADO > the rest
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    ("need you", ("RECLAMA", "APPROVAL_REQUIRED")), ("say done", ("DICE_TERMINADO",)),
    ("stalled", ("ESTANCADO",)), ("mislaunched", ("MAL_LANZADO",))]
LABELS = {"RULE_VIOLATED": "rule violated", "CONTRACT_CHANGED": "contract changed",
          "SELF_APPROVED": "self-approved", "CLAIM_UNVERIFIED": "unverified claim",
          "SOURCE_FAILED": "source down", "STEP_OVERDUE": "step overdue", "RUN_ABANDONED": "run abandoned",
          "NOTICE_ABANDONED": "undelivered", "VERDICT": "verdict", "MISSION_COMPLETED": "mission done",
          "SWARM": "swarm", "FLAPPING": "flapping"}
APPRISE_TYPE = {"urgent": "failure", "warning": "warning", "info": "info"}


class RouteReason(str, Enum):
    ROUTED = "routed"
    BELOW_MIN_SEVERITY = "below-min-severity"


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
    PASS = "pass"
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


class Message(msgspec.Struct, frozen=True, kw_only=True):
    notice: str            # deterministic: hash of the covered conditions and their send counts
    covers: list[int]      # seqs of the events covered
    keys: list[str]        # condition ids "cid@rev"
    title: str
    lines: list[str]
    severity: str
    tag: str               # apprise tag ("" = every URL)
    attempt: int = 1

    @property
    def body(self) -> str:
        return "\n".join(self.lines)

    @property
    def notify_type(self) -> str:
        return APPRISE_TYPE.get(self.severity, "info")


class Decision(msgspec.Struct, frozen=True):
    key: str
    stage: str
    reason: str


class Plan(msgspec.Struct, kw_only=True):
    send: list[Message] = []
    record: list[Any] = []            # events to append (NoticeSilenced)
    next_wake: float | None = None
    decisions: list[Decision] = []


class Item(msgspec.Struct, kw_only=True):
    cid: str
    c: dict
    due: float
    attempt: int = 1
    retry: bool = False


# ---- stages --------------------------------------------------------------------------------
def route(c: dict, policy: Policy) -> RouteReason:
    if SEV_RANK.get(c["sev"], 0) < SEV_RANK.get(policy.min_severity, 1):  # noqa: SIM103
        return RouteReason.BELOW_MIN_SEVERITY
    return RouteReason.ROUTED


def inhibit(c: dict) -> InhibitReason:
    if c["cleared"] is None:
        return InhibitReason.PASS
    if c["sent_rev"] >= 0:
        return InhibitReason.RESOLVED
    return InhibitReason.CLOSED if c["cleared_by"] == "CERRADO" else InhibitReason.CLEARED


def matching_silence(c: dict, silences: dict, now: float) -> str | None:
    """The id of an active silence matching the condition (subject glob and/or class)."""
    if not silences:
        return None
    for sid in sorted(silences):
        s = silences[sid]
        if s["until"] <= now:
            continue
        if s["subject"] and not fnmatch.fnmatchcase(c["subject"], s["subject"]):
            continue
        if s["cls"] and s["cls"] != c["cls"]:
            continue
        return sid
    return None


def silence(c: dict, silences: dict, now: float) -> tuple[SilenceReason, str | None]:
    sid = matching_silence(c, silences, now)
    if sid is None:
        return SilenceReason.PASS, None
    if c.get("silenced") == sid:
        return SilenceReason.SILENCED_RECORDED, sid
    return SilenceReason.SILENCED, sid


def flap_hold(c: dict, flapping: set[str]) -> FlapReason:
    return FlapReason.HELD if c["subject"] in flapping and c["cls"] != "FLAPPING" else FlapReason.PASS


def base_due(c: dict, policy: Policy) -> float:
    if c["cls"] == "SOURCE_FAILED":
        return c["since"] + policy.source_failed_after
    return c["since"]


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
        due = base_due(c, policy)
        return (DedupeReason.NOT_YET_DUE if now < due else DedupeReason.NEW), due, 1
    if c["rev"] > c["sent_rev"]:
        due = max(c["changed"], (c["sent_at"] or 0.0) + policy.group_interval)
        return (DedupeReason.UPDATE_WAIT if now < due else DedupeReason.UPDATE_DUE), due, 1
    if c["oneshot"] or policy.repeat_interval <= 0:
        return DedupeReason.ALREADY_SENT, None, 1
    due = (c["sent_at"] or 0.0) + policy.repeat_interval
    return (DedupeReason.ALREADY_SENT if now < due else DedupeReason.REPEAT_DUE), due, 1


def dest(sev: str, policy: Policy) -> str:
    return policy.tags.get(sev, "")


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
    """Per destination: flush all due items together once the earliest of them is ready."""
    batches: list[list[Item]] = []
    wakes: list[float] = []
    decisions: list[Decision] = []
    by: dict[str, list[Item]] = {}
    for it in items:
        by.setdefault(dest(it.c["sev"], policy), []).append(it)
    for d in sorted(by):
        its = by[d]
        last_dest = max([last.get(s, -INF) for s in SEV_RANK if dest(s, policy) == d] or [-INF])
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


# ---- text ----------------------------------------------------------------------------------


def _bucket(cls: str) -> tuple[int, str]:
    for i, (label, classes) in enumerate(BUCKETS):
        if cls in classes:
            return i, label
    return len(BUCKETS), LABELS.get(cls, cls.lower().replace("_", " "))


def notice_id(items: list[Item]) -> str:
    raw = "|".join(sorted(f"{it.cid}.{it.c['sends']}.{it.c['rev']}" for it in items))
    return "n" + hashlib.sha1(raw.encode()).hexdigest()[:15]


def message(items: list[Item], now: float, policy: Policy) -> Message:
    """One message: title counts per bucket, body lines grouped in bucket order."""
    buckets = {cls: _bucket(cls) for cls in {it.c["cls"] for it in items}}
    keyed = sorted(items, key=lambda it: (buckets[it.c["cls"]][0], -SEV_RANK.get(it.c["sev"], 0),
                                          buckets[it.c["cls"]][1], it.c["since"], it.c["name"]))
    counts: dict[str, int] = {}
    lines: list[str] = []
    for it in keyed:
        label = buckets[it.c["cls"]][1]
        counts[label] = counts.get(label, 0) + 1
        c = it.c
        text = f" · {c['text']}" if c["text"] else ""
        lines.append(f"{c['cls']} {c['name']} · {age(now - c['since'])}{text}")
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 1] + [f"… and {len(lines) - MAX_LINES + 1} more (fleetwatch summary)"]
    title = " · ".join(f"{n} {label}" for label, n in counts.items())
    sev = max((it.c["sev"] for it in items), key=lambda s: SEV_RANK.get(s, 0))
    covers = sorted({s for it in items for s in (it.c["seq"], it.c["last_seq"])})
    return Message(notice=notice_id(items), covers=covers, keys=sorted(f"{it.cid}@{it.c['rev']}" for it in items),
                   title=title, lines=lines, severity=sev, tag=dest(sev, policy),
                   attempt=max(it.attempt for it in items))


# ---- the pipeline --------------------------------------------------------------------------
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
            pct = hist[-1][3]
            out[cid] = {"subject": subj, "cls": "FLAPPING", "sev": "warning", "name": subj.partition(":")[2],
                        "text": f"{pct:.0f}% state change; notices held until it settles",
                        "seq": start[2], "last_seq": hist[-1][2], "since": start[1], "changed": start[1],
                        "rev": 0, "oneshot": True, "cleared": None, "cleared_by": None, "sends": 0,
                        "sent_at": None, "sent_rev": -1, "silenced": None}
    return flapping, out


def plan(state: dict[str, Any], now: float, policy: Policy,
         inflight: frozenset[str] | set[str] = frozenset()) -> Plan:
    """The whole decision for ``now``: messages to send, events to record, when to call again.

    ``inflight``: condition ids of notices handed to the deliverer and not yet folded back."""
    now += EPS
    decisions: list[Decision] = []
    record: list[Any] = []
    wakes: list[float] = []
    items: list[Item] = []
    flapping, flaps = flap_conds(state, now, policy)
    conds = list(state["conds"].items()) + list(flaps.items())
    silences = state["silences"]
    for cid, c in conds:
        r = route(c, policy)
        if r is not RouteReason.ROUTED:
            decisions.append(Decision(cid, "route", r))
            continue
        i = inhibit(c)
        if i is not InhibitReason.PASS:
            decisions.append(Decision(cid, "inhibit", i))
            continue
        s, sid = silence(c, silences, now)
        if s is not SilenceReason.PASS:
            decisions.append(Decision(cid, "silence", s))
            wakes.append(silences[sid]["until"])
            if s is SilenceReason.SILENCED and cid not in flaps:
                it = Item(cid=cid, c=c, due=now)
                record.append(NoticeSilenced(notice=notice_id([it]), covers=sorted({c["seq"], c["last_seq"]}),
                                             silence=sid or "", keys=[f"{cid}@{c['rev']}"]))
            continue
        f = flap_hold(c, flapping)
        if f is not FlapReason.PASS:
            decisions.append(Decision(cid, "flap", f))
            continue
        d, due, attempt = dedupe(cid, c, now, policy, inflight, state["retry"])
        decisions.append(Decision(cid, "dedupe", d))
        if d in (DedupeReason.NEW, DedupeReason.RETRY_DUE, DedupeReason.UPDATE_DUE, DedupeReason.REPEAT_DUE):
            if c["cls"] == "SWARM":  # its line is built from the group's counts now
                c = {**c, "text": swarm_text(state["swarms"].get(c["name"], {}))}
            items.append(Item(cid=cid, c=c, due=due, attempt=attempt, retry=d is DedupeReason.RETRY_DUE))
        elif due is not None:
            wakes.append(due)
    batches, gwakes, gdec = group(items, now, policy, state["last"])
    decisions += gdec
    if flapping:  # a quiet flapping subject settles by time: look again when changes age out
        wakes.append(now + 60.0)
    send = [message(b, now, policy) for b in batches]
    if log.isEnabledFor(logging.DEBUG):
        for d in decisions:
            log.debug("notify %s %s: %s", d.stage, d.key, str.__str__(d.reason))
    future = [w for w in wakes + gwakes if w > now]
    return Plan(send=send, record=record, next_wake=min(future) if future else None, decisions=decisions)


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
    if ag["cls"] != "ESTANCADO":
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
    fake = {"subject": f"agent:{agent}", "cls": "ESTANCADO"}
    if matching_silence(fake, state["silences"], now) is not None:
        return NudgeReason.SILENCED, None
    due = ag["since"] + policy.nudge_after if not ag["nudges"] else \
        (ag["nudged_at"] or ag["since"]) + max(policy.nudge_after, policy.nudge_gap)
    if now < due:
        return NudgeReason.NOT_YET, due
    return NudgeReason.NUDGE, None


def nudges(state: dict, now: float, policy: Policy, targets: dict[str, str | None],
           inflight: set | frozenset = frozenset()) -> tuple[list[NudgeAction], float | None]:
    """Nudges due now (ESTANCADO, DoD not met, never a waiting/RECLAMA agent, at most
    ``nudge_max`` per stall) and the next time one could become due."""
    out: list[NudgeAction] = []
    wakes: list[float] = []
    if not policy.nudge_enabled:
        return out, None
    for agent in sorted(state["agents"]):
        ag = state["agents"][agent]
        r, wake = nudge_decision(agent, ag, state, now, policy, targets.get(agent), set(inflight))
        log.debug("nudge %s: %s", agent, r.value)
        if r is NudgeReason.NUDGE:
            out.append(NudgeAction(agent=agent, attempt=ag["nudges"] + 1, stall_seq=ag["seq"],
                                   target=targets.get(agent)))
        elif wake is not None:
            wakes.append(wake)
    return out, (min(wakes) if wakes else None)


__all__ = ["Plan", "Message", "Decision", "NudgeAction", "plan", "nudges", "route", "inhibit", "silence",
           "flap_hold", "dedupe", "group", "message", "iso"]
