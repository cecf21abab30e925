"""Messages of the notify pipeline (pure): destinations, grouping labels and the text of a push.

- :func:`dest` is the routing stage's answer: the first ``[[notify.routes]]`` whose ``match``
  (severity, class, subject glob; every given key must hold) fits the condition gives
  ``"route:<i>"``; otherwise the top-level URLs with the severity's apprise tag (``""`` = all).
- :func:`message` builds ONE push from a batch: the title counts items per group (the group
  names are the class labels of ``projections.classes``, as in `fleetwatch summary`), the body is
  one line per item in urgency order, with what an agent waits for and its task title. Every
  agent-controlled string (ids, reasons, task titles, tool names) goes through
  ``projections.text.safe``, so a value is one line of inert text and no line can be forged.
- :func:`notice_id` is deterministic (same conditions, same send counts -> same id), so a
  restart re-plans the same notice; escalations and all-clear messages get their own ids.
"""
from __future__ import annotations

import fnmatch
import hashlib

import msgspec

from projections.classes import DICE_TERMINADO, INFO, RECLAMA, TABLE
from projections.notify.policy import SEV_RANK, Policy
from projections.text import age, safe
from projections.fleet.waiting import words

TASK_CUT = 60   # a task title in a push line

MAX_LINES = 40
# body order and title labels: the classes with a severity in urgency order (their push labels:
# a claim of done is pushed only when nothing else judges it, projections.notify.plan.route, for
# the person to review), then the rest; the conditions that also need the human go with RECLAMA
REVIEW = INFO[DICE_TERMINADO].push_label
WITH_CLASS = {RECLAMA: ("APPROVAL_REQUIRED", "ESCALATED", "BLOCKED", "UNEVALUABLE")}
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    (i.push_label, (i.cls.value, *WITH_CLASS.get(i.cls.value, ()))) for i in TABLE if i.severity]
# the other classes' labels where the class name in lower case, "_" as " ", does not do
LABELS = {"SELF_APPROVED": "self-approved", "CLAIM_UNVERIFIED": "unverified claim", "SOURCE_FAILED": "source down",
          "NOTICE_ABANDONED": "undelivered", "MISSION_COMPLETED": "mission done", "WP_VIOLATED": "orchestrator rule broken",
          "WP_FLAGGED": "retry limit", "SWARM_CAP": "swarm over cap", "FANOUT": "fan-out"}
APPRISE_TYPE = {"urgent": "failure", "warning": "warning", "info": "info"}


class Message(msgspec.Struct, frozen=True, kw_only=True):
    notice: str            # deterministic: hash of the covered conditions and their send counts
    covers: list[int]      # seqs of the events covered
    keys: list[str]        # condition ids "cid@rev" ("cid@esc" escalation, "cid@resolved" all clear)
    title: str
    lines: list[str]
    severity: str
    tag: str               # apprise tag ("" = every URL)
    attempt: int = 1
    kind: str = "notice"   # notice | escalate | resolved
    route: str = ""        # "" = the top-level urls; "route:<i>"; "escalate" = escalate_urls
    priority: bool = False  # ask the services for their highest priority
    after: float = 0.0     # escalate: how long it went unanswered (escalate_after)

    @property
    def body(self) -> str:
        return "\n".join(self.lines)

    @property
    def notify_type(self) -> str:
        return APPRISE_TYPE.get(self.severity, "info")

    @property
    def conditions(self) -> list[str]:
        return [k.rpartition("@")[0] for k in self.keys]


class Decision(msgspec.Struct, frozen=True):
    key: str
    stage: str
    reason: str


class Item(msgspec.Struct, kw_only=True):
    cid: str
    c: dict
    due: float
    attempt: int = 1
    retry: bool = False


def route_match(c: dict, match: dict[str, str]) -> bool:
    """Every key given in ``match`` holds for the condition (subject is a glob)."""
    for k, v in match.items():
        if k == "severity" and c["sev"] != v:
            return False
        if k == "class" and c["cls"] != v.upper():
            return False
        if k == "subject" and not (fnmatch.fnmatchcase(c["subject"], v)
                                   or fnmatch.fnmatchcase(c["subject"].partition(":")[2], v)):
            return False
    return bool(match)


def dest(c: dict, policy: Policy) -> str:
    """The destination key: ``route:<i>`` for the first matching route, else the severity's tag."""
    for i, m in enumerate(policy.routes):
        if route_match(c, m):
            return f"route:{i}"
    return policy.tags.get(c["sev"], "")


def bucket(cls: str) -> tuple[int, str]:
    for i, (label, classes) in enumerate(BUCKETS):
        if cls in classes:
            return i, label
    return len(BUCKETS), LABELS.get(cls, cls.lower().replace("_", " "))


def notice_id(items: list[Item], kind: str = "notice") -> str:
    raw = "|".join(sorted(f"{it.cid}.{it.c['sends']}.{it.c['rev']}" for it in items))
    if kind != "notice":
        raw = f"{kind}|{raw}"
    return "n" + hashlib.sha1(raw.encode()).hexdigest()[:15]


def covers(items: list[Item]) -> list[int]:
    """The seqs of the events a notice about ``items`` covers."""
    return sorted({s for it in items for s in (it.c["seq"], it.c["last_seq"])})


def item_line(c: dict, now: float) -> str:
    """``CLASS name · age · what (what it waits for, when known) · task: title``, every
    agent-controlled part escaped and cut."""
    what = REVIEW if c["cls"] == DICE_TERMINADO else words(c.get("wait")) or c["text"]
    text = f" · {safe(what, 200)}" if what else ""
    task = f" · task: {safe(c['task'], TASK_CUT)}" if c.get("task") else ""
    return f"{c['cls']} {safe(c['name'], 80)} · {age(now - c['since'])}{text}{task}"


def message(items: list[Item], now: float, policy: Policy, *, kind: str = "notice", key: str | None = None,
            prefix: str = "") -> Message:
    """One message: title counts per group, body lines grouped in urgency order. ``key``: the
    destination (default: that of the most severe item); ``prefix`` heads the title."""
    buckets = {cls: bucket(cls) for cls in {it.c["cls"] for it in items}}
    keyed = sorted(items, key=lambda it: (buckets[it.c["cls"]][0], -SEV_RANK.get(it.c["sev"], 0),
                                          buckets[it.c["cls"]][1], it.c["since"], it.c["name"]))
    counts: dict[str, int] = {}
    lines: list[str] = []
    for it in keyed:
        label = buckets[it.c["cls"]][1]
        counts[label] = counts.get(label, 0) + 1
        lines.append(item_line(it.c, now))
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 1] + [f"… and {len(lines) - MAX_LINES + 1} more (fleetwatch summary)"]
    title = prefix + " · ".join(f"{n} {label}" for label, n in counts.items())
    top = max(items, key=lambda it: SEV_RANK.get(it.c["sev"], 0))
    sev = top.c["sev"]
    d = dest(top.c, policy) if key is None else key
    suffix = {"escalate": "esc", "resolved": "resolved"}.get(kind)
    keys = sorted(f"{it.cid}@{suffix if suffix else it.c['rev']}" for it in items)
    route = d if d.startswith("route:") or d == "escalate" else ""
    return Message(notice=notice_id(items, kind), covers=covers(items), keys=keys, title=title, lines=lines,
                   severity=sev, tag="" if route else d, attempt=max(it.attempt for it in items), kind=kind,
                   route=route, priority=sev == "urgent" or kind == "escalate",
                   after=policy.escalate_after if kind == "escalate" else 0.0)
