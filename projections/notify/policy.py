"""Notification policy and text helpers shared by the notify fold and its planner (pure).

``Policy`` holds the timing and routing knobs; ``redact``/``short`` keep URLs and secrets out of
every line; ``swarm_text`` builds a group's summary line; ``condition`` a new condition; ``NEVER`` is
"no end" in state (JSON has no infinity). Imports nothing of fleetwatch.
"""
from __future__ import annotations

import fnmatch
import re

import msgspec

SEVERITIES = ("info", "warning", "urgent")
SEV_RANK = {s: i for i, s in enumerate(SEVERITIES)}
TEXT_MAX = 80
NEVER = 1e18

_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """Timing and routing knobs (seconds), built from ``Config.notify`` / ``Config.nudge`` by
    ``watcher.runtime.notifier.policy_from_config``."""

    group_wait: float = 10.0
    group_interval: float = 300.0
    repeat_interval: float = 14400.0      # 0 = never repeat
    min_severity: str = "warning"
    tags: dict[str, str] = {}             # severity -> apprise tag ("" = every URL)
    retry: tuple[float, ...] = (10.0, 30.0, 120.0, 600.0)
    flap_high: float = 50.0
    flap_low: float = 25.0
    source_failed_after: float = 60.0
    nudge_enabled: bool = False
    nudge_max: int = 1
    nudge_after: float = 0.0
    nudge_gap: float = 300.0              # at least this between two nudges of one stall
    nudge_needs_target: bool = False      # argv uses {target}
    # the phone loop
    escalate_after: float = 0.0           # 0 = no escalation
    escalate_urls: bool = False           # escalations go to their own destination ("escalate")
    quiet_urgent: bool = True             # urgent items still pushed during quiet hours
    send_resolved: bool = False           # one grouped "all clear" for pushed conditions that cleared
    routes: tuple[dict[str, str], ...] = ()   # [[notify.routes]] matches, in order (first wins)
    # a checker ([dod] run_checks) or a verifier ([dod] verifier) judges claims of done: only its
    # verdict is pushed; without either, a claim is pushed once as "ready for review"
    claims_judged: bool = False


def redact(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` without URLs or any of ``secrets`` (apprise URLs carry tokens)."""
    out = text or ""
    if "://" in out:   # every URL the pattern matches has one (the regex is the costly part)
        out = _URL_RE.sub("<url>", out)
    for s in secrets:
        if s and s in out:
            out = out.replace(s, "<redacted>")
    return out


def short(text: str | None, n: int = TEXT_MAX) -> str:
    """``text`` on one line (whitespace runs as one space), without URLs, at most ``n`` long."""
    # the common line ("busy", "verdict met by v1"): nothing to join, redact or cut (isprintable()
    # is False for every whitespace but " ", so with no "  " and no " " at an end, split/join gives it back)
    if (type(text) is str and len(text) <= n and "://" not in text and text.isprintable() and "  " not in text
            and text[:1] != " " and text[-1:] != " "):
        return text
    t = redact(" ".join(str(text or "").split()))
    return t if len(t) <= n else t[: n - 1] + "…"


TASK_MAX = 80   # a condition's task title, cut (shown escaped)


def about(c: dict, task: object, wait: object) -> None:
    """An agent condition's task title (cut, raw) and what it waits for (``projections.fleet.waiting``),
    kept only when set: a condition without them has no such keys."""
    if task:
        c["task"] = short(str(task), TASK_MAX)
    else:
        c.pop("task", None)
    if wait:
        c["wait"] = wait
    else:
        c.pop("wait", None)


def condition(subject: str, cls: str, sev: str, name: str, text: str, seq: int, t: float,
              oneshot: bool = False) -> dict:
    """A new condition (never sent, not cleared): the fold's ``conds`` entry, the planner's FLAPPING one."""
    return {"subject": subject, "cls": cls, "sev": sev, "name": name, "text": text, "seq": seq, "last_seq": seq,
            "since": t, "changed": t, "rev": 0, "oneshot": oneshot, "cleared": None, "cleared_by": None, "sends": 0,
            "sent_at": None, "sent_rev": -1, "silenced": None}


def retry_delay(attempt: int, policy: Policy) -> float | None:
    """Seconds to wait after failed attempt ``attempt`` (1-based); None = give up (abandon)."""
    return policy.retry[attempt - 1] if 1 <= attempt <= len(policy.retry) else None


def swarm_text(counts: dict[str, int]) -> str:
    """A group's summary line ("2 done · 1 running"); built when a message is, not per event."""
    return short(" · ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no children")


def matching_silence(c: dict, silences: dict, now: float) -> str | None:
    """The id of an active silence matching the condition (subject glob and/or class)."""
    for sid, s in sorted(silences.items()):
        if s["until"] <= now:
            continue
        if s["subject"] and not fnmatch.fnmatchcase(c["subject"], s["subject"]):
            continue
        if s["cls"] and s["cls"] != c["cls"]:
            continue
        return sid
    return None
