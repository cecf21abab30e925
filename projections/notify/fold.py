"""The notify projection's fold (pure): the events of ``TYPES`` into the state below.

State (JSON, string keys, bounded):
- ``conds``: condition id -> condition. A condition id is ``"<subject>|<CLASS>#<seq>"`` (one
  instance: a RECLAMA that clears and comes back is a new condition). Fields: subject, cls, sev,
  name, text, seq, last_seq, since, changed, rev, oneshot, cleared, cleared_by, sends, sent_at,
  sent_rev (-1 = never sent), silenced; set by the phone loop when it happens: notice (the last
  notice that pushed it), acked (until; NEVER = until it clears), acked_at, acked_by, escalated, held
  (end of the quiet hours that held it), resolved (its "all clear" was sent); task, wait (``about``).
- ``agents``: agent -> {cls, since, seq, state, cond, nudges, nudged_at} (CERRADO removes it).
- ``dod``: agent -> last verdict (a changed contract makes it pending again).
- ``classes``: subject -> its last 41 classes as a flat ``[class, time, seq, ...]`` (flap
  detection at plan time, see ``projections.notify.flap``).
- ``flap_sent``: subject -> the flapping condition id already pushed for this episode.
- ``retry``: condition id -> ``[attempts, retry_at]`` after ``notice.failed``.
- ``silences``: id -> {subject, cls, until, reason}; ``last``: severity -> time of the last push;
  ``recent``: notice id -> {attempt, status, at} (lets the notifier release in-flight notices);
  ``index``: "source:<name>" / "wp:<mission>/<wp>" / "swarm:<group>" -> active condition id;
  ``swarms``: group -> {status: count} (aggregated, never one entry per child message); a SWARM
  condition's ``text`` is empty: plan builds its line from these counts (:func:`swarm_text`).
- ``exp_cleared`` / ``exp_day``: ``[time, condition id]`` queues in push order (so in time order
  while the clock goes forward): when a condition may become prunable, cleared (+5 min) or
  one-shot / pushed swarm summary (+1 day); re-checked when consumed. ``prune_at``: the earliest
  queue head. ``sweep_at``: next sweep of the small tables (silences, retry, recent).

Cost: fold reads only ``TYPES`` and does O(1) work per event whatever the history (no scan of
``conds``; the flap percent is computed at plan time; ``rec.time`` read through ``times``, which a
caller folding many events passes as its cache of ``TIME``: one parse per distinct time).
Invariants: time only from ``rec.time``; a ``notice.sent`` marks its conditions sent (so a
restart never re-sends and ``repeat_interval`` holds across restarts); resolved and old
entries are pruned deterministically (by event time), so snapshots stay small over weeks.
At most one uncleared condition per agent subject (``agents[a].cond``): every classification
clears the previous one.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict, cast

from events.timefmt import parse_iso
from projections.classes import CERRADO, SEVERITY
from projections.notify.flap import HIST_KEEP
from projections.notify import rules
from projections.notify.policy import NEVER, Policy, about, condition, redact, retry_delay, short  # noqa: F401

NAME = "notify"
READS_ID = False   # fold never reads rec.id
MAX_CONDS = 2000
MAX_RECENT = 300
MAX_EXPIRY = 4 * MAX_CONDS   # an expiry queue is rebuilt from ``conds`` beyond this (stale entries)
SWEEP_S = 60.0               # the small tables are swept at most once per this (event time)
_HIST_LEN = 3 * HIST_KEEP   # a subject's flat class history: HIST_KEEP [class, time, seq] entries
CLEARED_KEEP_S = 300.0   # cleared conditions stay visible (inhibit reasons, status) this long
ONESHOT_KEEP_S = 86400.0


_D = dict[str, Any]
STATE_TYPE = TypedDict("State", {"conds": _D, "agents": _D, "dod": _D, "classes": _D,
                                 "flap_sent": _D, "retry": _D, "silences": _D, "last": _D, "recent": _D, "index": _D, "swarms": _D,
                                 "exp_cleared": list, "exp_day": list, "prune_at": float, "sweep_at": float})


def initial() -> dict[str, Any]:
    return {"conds": {}, "agents": {}, "dod": {}, "classes": {}, "flap_sent": {}, "retry": {},
            "silences": {}, "last": {}, "recent": {}, "index": {}, "swarms": {}, "exp_cleared": [], "exp_day": [],
            "prune_at": NEVER, "sweep_at": 0.0}


def _new(state: dict, subject: str, cls: str, sev: str, seq: int, t: float, name: str, text: str,
         oneshot: bool = False) -> str:
    cid = f"{subject}|{cls}#{seq}"
    state["conds"][cid] = condition(subject, cls, sev, name, short(text), seq, t, oneshot)
    if oneshot:
        _expire(state, "exp_day", t + ONESHOT_KEEP_S, cid)
    if len(state["conds"]) > MAX_CONDS and (state["exp_cleared"] or state["exp_day"] or t >= state["sweep_at"]):
        prune(state, t)  # over the cap, only what the expiry queues hold can go: empty, and no sweep due, is a no-op
    return cid


def _clear(state: dict, cid: str | None, t: float, by: str) -> None:
    c = state["conds"].get(cid) if cid else None
    if c is not None and c["cleared"] is None:
        c["cleared"], c["cleared_by"] = t, by
        state["retry"].pop(cid, None)
        _expire(state, "exp_cleared", t + CLEARED_KEEP_S, cast(str, cid))  # c found: cid is set


def _open(st: dict, k: str, cls: str, seq: int, t: float, name: str, text: str) -> None:
    """The warning ``cls`` for ``k`` (an ``index`` key: one open condition per key) unless one is open."""
    c = st["conds"].get(st["index"].get(k) or "")
    if c is None or c["cleared"] is not None:
        st["index"][k] = _new(st, k, cls, "warning", seq, t, name, text)


def _oneshot(spec: Callable[[Any], tuple[str, str, str, str, str] | None]) -> Callable[..., None]:
    """The handler of an event that opens one one-shot condition: ``spec(ev)`` is its (subject, class,
    severity, name, text), or None for none."""

    def handler(st: dict, ev: Any, seq: int, t: float) -> None:
        c = spec(ev)
        if c is not None:
            subject, cls, sev, name, text = c
            _new(st, subject, cls, sev, seq, t, name, text, oneshot=True)
    return handler


def _split_key(key: str) -> tuple[str, int | None]:
    cid, sep, rev = key.rpartition("@")
    if not sep:
        return key, None
    try:
        return cid, int(rev)
    except ValueError:
        return key, None


TIME = parse_iso   # how fold reads ``rec.time`` (a caller may pass a cache of it as ``times``)


def fold(state: dict[str, Any], rec: Any, times: Callable[[str], float] = TIME) -> dict[str, Any]:
    """One event into the notify state: its type's handler, then the prune of what can no longer
    be pushed once the earliest expiry came due (a no-op for types outside ``TYPES``)."""
    h = _HANDLERS.get(rec.type)
    if h is not None:
        t = times(rec.time)
        h(state, rec.event, rec.seq, t)
        if t > state["prune_at"]:
            prune(state, t)
    return state


# ---- handlers ------------------------------------------------------------------------------
def _agent_classified(st: dict, ev: Any, seq: int, t: float) -> None:
    a, to = ev.agent, ev.to
    subj = "agent:" + a
    agents = st["agents"]
    ag = agents.get(a)
    if ag is not None:  # its condition is the subject's only uncleared one (see the invariant)
        _clear(st, ag["cond"], t, to)
    if to == CERRADO:
        agents.pop(a, None)
        st["dod"].pop(a, None)
        st["flap_sent"].pop(subj, None)
        st["classes"].pop(subj, None)
        return
    h = st["classes"].setdefault(subj, [])
    h += (to, t, seq)
    if len(h) > _HIST_LEN:
        del h[:3]
    sev = SEVERITY.get(to)
    cond = None
    if sev is not None:
        st_, ph = ev.state, ev.phase
        detail = ev.reason or (f"{st_}/{ph}" if st_ and ph else st_ or ph or "")
        cond = _new(st, subj, to, sev, seq, t, a, detail)
        about(st["conds"][cond], ev.task, ev.waiting_for)
    agents[a] = {"cls": to, "since": t, "seq": seq, "state": ev.state, "cond": cond, "nudges": 0, "nudged_at": None}


def _agent_nudged(st: dict, ev: Any, seq: int, t: float) -> None:
    ag = st["agents"].get(ev.agent)
    if ag is not None and (not ev.stall_seq or ev.stall_seq == ag["seq"]):
        ag["nudges"] = max(ag["nudges"], ev.attempt)
        ag["nudged_at"] = t


def _dod_contract(st: dict, ev: Any, seq: int, t: float) -> None:
    st["dod"].pop(ev.agent, None)
    _new(st, f"dod:{ev.agent}", "CONTRACT_CHANGED", "urgent", seq, t, ev.agent, "DoD contract changed",
         oneshot=True)


# events that open one one-shot condition: type -> (subject, class, severity, name, text) or None
ONESHOT: dict[str, Callable[[Any], tuple[str, str, str, str, str] | None]] = {
    "dod.flagged": lambda ev: (f"dod:{ev.agent}", ev.flag.upper().replace("-", "_")[:40] or "FLAGGED",
                               "urgent" if ev.flag == "self-approved" else "warning", ev.agent, ev.flag),
    "rule.violated": lambda ev: (f"run:{ev.run}", "RULE_VIOLATED", "urgent", ev.run,
                                 f"{ev.rule} at {ev.step}" if ev.step else f"{ev.rule}"),
    "step.overdue": lambda ev: (f"run:{ev.run}", "STEP_OVERDUE", "warning", ev.run, f"step {ev.step} overdue"),
    "run.abandoned": lambda ev: (f"run:{ev.run}", "RUN_ABANDONED", "warning", ev.run,
                                 f"abandoned after {ev.failures} failures"),
    "mission.completed": lambda ev: (f"mission:{ev.mission}", "MISSION_COMPLETED", "info", ev.mission,
                                     f"completed ({ev.wps} work packages)"),
    # the hub's (watcher/hub/): each says something that happened, not a level, so no event clears it
    "host.gap": lambda ev: (f"host:{ev.host}", "HOST_GAP", "warning", ev.host,
                            f"seqs {ev.first}..{ev.last} never reached the hub"),
    "host.refused": lambda ev: (f"host:{ev.host}", "HOST_REFUSED", "urgent", ev.host,
                                f"refused: its messages speak for {ev.names or 'another host'} ({ev.why})"),
    "hub.consumer_taken": lambda ev: ("hub", "HUB_CONSUMER_TAKEN", "urgent", "hub",
                                      f"not consuming: consumer {ev.consumer} belongs to another hub"),
}


def _source_failed(st: dict, ev: Any, seq: int, t: float) -> None:
    _open(st, f"source:{ev.source}", "SOURCE_FAILED", seq, t, ev.source, ev.error or "failed")


def _source_recovered(st: dict, ev: Any, seq: int, t: float) -> None:
    _clear(st, st["index"].pop(f"source:{ev.source}", None), t, "RECOVERED")


def _swarm(st: dict, ev: Any, seq: int, t: float) -> None:
    g = ev.group
    counts = st["swarms"].setdefault(g, {})
    fr, to = ev.from_, ev.to
    if fr is not None and counts.get(fr, 0) > 0:
        counts[fr] -= 1
        if not counts[fr]:
            del counts[fr]
    if to is not None:
        counts[to] = counts.get(to, 0) + 1
    k = "swarm:" + g
    sev = "warning" if counts.get("failed") or counts.get("timeout") else "info"
    c = st["conds"].get(st["index"].get(k) or "")
    if c is None or c["cleared"] is not None:
        st["index"][k] = _new(st, k, "SWARM", sev, seq, t, g, "")
    else:
        c["sev"], c["last_seq"], c["changed"] = sev, seq, t
        c["rev"] += 1
    if not counts:
        _clear(st, st["index"].pop(k), t, "EMPTY")
        st["swarms"].pop(g, None)


def _mark(st: dict, ev: Any, t: float, status: str) -> list[tuple[str, int | None]]:
    st["recent"][ev.notice] = {"attempt": ev.attempt, "status": status, "at": t}
    if len(st["recent"]) > MAX_RECENT + 64:
        _trim_recent(st, t)
    return [_split_key(k) for k in ev.keys]


def _delivered(st: dict, ev: Any, t: float, status: str) -> None:
    for cid, rev in _mark(st, ev, t, status):
        st["retry"].pop(cid, None)
        base, _, kind = cid.rpartition("@")
        if kind in ("resolved", "esc"):  # an all-clear / a given-up escalation (escalate.py)
            c = st["conds"].get(base)
            if c is not None:
                c["resolved" if kind == "resolved" else "escalated"] = t
            continue
        subj, _, rest = cid.rpartition("|")
        if rest.startswith("FLAPPING#"):
            st["flap_sent"][subj] = [cid, t]
        c = st["conds"].get(cid)
        if c is None:
            continue
        c["sends"] += 1
        c["sent_at"] = t
        c["notice"] = ev.notice
        c["sent_rev"] = c["rev"] if rev is None else rev
        if c["oneshot"] and c["sent_rev"] >= c["rev"]:
            del st["conds"][cid]
        elif c["cls"] == "SWARM" and c["sent_rev"] >= c["rev"]:
            _expire(st, "exp_day", c["changed"] + ONESHOT_KEEP_S, cid)


def _notice_sent(st: dict, ev: Any, seq: int, t: float) -> None:
    _delivered(st, ev, t, "sent")
    if ev.severity:
        st["last"][ev.severity] = t


def _notice_failed(st: dict, ev: Any, seq: int, t: float) -> None:
    retry_at = parse_iso(ev.retry_at) if ev.retry_at else t + 60.0
    for cid, _ in _mark(st, ev, t, "failed"):
        st["retry"][cid] = [ev.attempt, retry_at]
    if len(st["retry"]) > MAX_CONDS:
        sweep(st, t)


def _notice_abandoned(st: dict, ev: Any, seq: int, t: float) -> None:
    _delivered(st, ev, t, "abandoned")  # not re-planned before repeat_interval
    if not any("|NOTICE_ABANDONED#" in k for k in ev.keys):
        _new(st, f"notice:{ev.notice}", "NOTICE_ABANDONED", "warning", seq, t, ev.notice,
             f"undelivered after {ev.attempt} attempts: {_what(ev.keys)}", oneshot=True)


def _what(keys: list[str]) -> str:
    """What a notice was about, from its keys (``subject|CLASS#seq@rev``): "a1 RECLAMA, …"."""
    out = []
    for k in sorted(keys):
        subj, _, rest = _split_key(k)[0].rpartition("|")   # an id may hold "|"
        out.append(f"{subj.partition(':')[2] or subj} {rest.partition('#')[0]}".strip())
    return ", ".join(out)


def _set(st: dict, keys: list[str], **fields: Any) -> None:
    """``fields`` set on every condition of ``keys`` (ids, ``cid@rev`` too) still in the state."""
    for k in keys:
        c = st["conds"].get(_split_key(k)[0])
        if c is not None:
            c.update(fields)


def _notice_silenced(st: dict, ev: Any, seq: int, t: float) -> None:
    _set(st, ev.keys, silenced=ev.silence)


def _notice_acked(st: dict, ev: Any, seq: int, t: float) -> None:
    until = parse_iso(ev.until) if ev.until else NEVER
    _set(st, ev.conditions, acked=until, acked_at=t, acked_by=f"{ev.via}:{ev.by}" if ev.by else ev.via)


def _notice_escalated(st: dict, ev: Any, seq: int, t: float) -> None:
    st["recent"][ev.notice] = {"attempt": ev.attempt, "status": "escalated", "at": t}
    for k in ev.conditions:
        st["retry"].pop(_split_key(k)[0] + "@esc", None)
    _set(st, ev.conditions, escalated=t)


def _notice_held(st: dict, ev: Any, seq: int, t: float) -> None:
    _set(st, ev.keys, held=parse_iso(ev.until) if ev.until else t)


def _silence_added(st: dict, ev: Any, seq: int, t: float) -> None:
    until = parse_iso(ev.until) if ev.until else t
    st["silences"][ev.silence] = {"subject": ev.subject_match, "cls": ev.class_match, "until": until,
                                  "reason": short(ev.reason), "at": t}
    sweep(st, t)


def _silence_removed(st: dict, ev: Any, seq: int, t: float) -> None:
    st["silences"].pop(ev.silence, None)


def _host_silent(st: dict, ev: Any, seq: int, t: float) -> None:
    """At the hub: a host stopped forwarding (watcher/hub/); one condition until it resumes."""
    _open(st, f"host:{ev.host}", "HOST_SILENT", seq, t, ev.host, f"no event or heartbeat for {int(ev.after)}s")


def _host_resumed(st: dict, ev: Any, seq: int, t: float) -> None:
    _clear(st, st["index"].pop(f"host:{ev.host}", None), t, "RESUMED")


_HANDLERS = {
    "agent.classified": _agent_classified, "agent.nudged": _agent_nudged,
    "dod.contract_changed": _dod_contract, "source.failed": _source_failed, "source.recovered": _source_recovered,
    "host.silent": _host_silent, "host.resumed": _host_resumed, "swarm.changed": _swarm,
    "notice.sent": _notice_sent, "notice.failed": _notice_failed, "notice.abandoned": _notice_abandoned,
    "notice.silenced": _notice_silenced, "silence.added": _silence_added, "silence.removed": _silence_removed,
    "notice.acked": _notice_acked, "notice.escalated": _notice_escalated, "notice.held": _notice_held,
}
_HANDLERS.update(rules.handlers(_new, _clear))  # missions, swarms, DoD, fleet rule events (rules.py)
_HANDLERS.update({k: _oneshot(spec) for k, spec in {**ONESHOT, **rules.ONESHOT}.items()})
TYPES = frozenset(_HANDLERS)   # fold is a no-op for every other type


def _expire(st: dict, queue: str, at: float, cid: str) -> None:
    """``cid`` may become prunable after ``at`` (re-checked by :func:`prunable` when consumed)."""
    q = st[queue]
    q.append([at, cid])
    if at < st["prune_at"]:
        st["prune_at"] = at
    if len(q) > MAX_EXPIRY:
        _requeue(st)


def _requeue(st: dict) -> None:
    """Both expiry queues rebuilt from ``conds`` in time order (drops stale entries)."""
    cl, day = [], []
    for cid, c in st["conds"].items():
        if c["cleared"] is not None:
            cl.append([c["cleared"] + CLEARED_KEEP_S, cid])
        if c["oneshot"]:
            day.append([c["since"] + ONESHOT_KEEP_S, cid])
        elif c["cls"] == "SWARM" and c["sent_rev"] >= c["rev"]:
            day.append([c["changed"] + ONESHOT_KEEP_S, cid])
    st["exp_cleared"], st["exp_day"] = sorted(cl), sorted(day)
    _prune_at(st)


def _prune_at(st: dict) -> None:
    st["prune_at"] = min([q[0][0] for q in (st["exp_cleared"], st["exp_day"]) if q] or [NEVER])


def prunable(c: dict, t: float) -> bool:
    """Can never be pushed again at ``t``: cleared over 5 minutes ago, an unsent one-shot over a
    day old, or a swarm summary already pushed and idle for a day."""
    return ((c["cleared"] is not None and c["cleared"] + CLEARED_KEEP_S < t)
            or (c["oneshot"] and c["since"] + ONESHOT_KEEP_S < t)
            or (c["cls"] == "SWARM" and c["sent_rev"] >= c["rev"] and c["changed"] + ONESHOT_KEEP_S < t))


def _drop(st: dict, cid: str) -> None:
    """Delete a condition and what points at it (retry entry, index entry, swarm counts)."""
    c = st["conds"].pop(cid)
    st["retry"].pop(cid, None)
    cls = c["cls"]
    k = ("wp:" + c["name"]) if cls in rules.INDEXED else c["subject"] \
        if cls in ("SWARM", "SOURCE_FAILED") else None
    if k is not None and st["index"].get(k) == cid:
        del st["index"][k]
        if cls == "SWARM":
            st["swarms"].pop(c["name"], None)


def _consume(st: dict, q: list, t: float, more: Callable[[list], bool]) -> None:
    """Entries taken off the front of the expiry queue ``q`` while ``more(entry)``; each one's
    condition dropped if still there and :func:`prunable` at ``t``."""
    i = 0
    while i < len(q) and more(q[i]):
        c = st["conds"].get(q[i][1])
        if c is not None and prunable(c, t):
            _drop(st, q[i][1])
        i += 1
    del q[:i]


def prune(st: dict[str, Any], t: float) -> None:
    """Drop what can never be pushed again (:func:`prunable`), found from the fronts of the
    expiry queues: O(expired), not O(conds). Over MAX_CONDS, drop down to 3/4 of the cap (a
    burst prunes rarely) the oldest cleared ones, then the oldest one-shots and pushed swarm
    summaries. An active condition (an agent still in RECLAMA, a source still failed) is never
    dropped, pushed or not: it is a level the human has not dealt with, and its number is bounded
    by the fleet (one per subject and class), not by MAX_CONDS. Also runs the :func:`sweep` when
    due."""
    conds = st["conds"]
    for name in ("exp_cleared", "exp_day"):
        _consume(st, st[name], t, lambda e: e[0] < t)
    if len(conds) > MAX_CONDS:
        keep = MAX_CONDS * 3 // 4
        for name in ("exp_cleared", "exp_day"):   # prunable at infinity: whatever a queue may hold
            _consume(st, st[name], float("inf"), lambda e: len(conds) > keep)
    _prune_at(st)
    if t >= st["sweep_at"]:
        sweep(st, t)


def sweep(st: dict[str, Any], t: float) -> None:
    """At most once per SWEEP_S of event time: retry entries of conditions gone (and whose
    subject has no history), silences expired over a day ago, old notice records."""
    st["sweep_at"] = t + SWEEP_S
    live = st["conds"]
    for k in [k for k in st["retry"] if k not in live and k.rpartition("|")[0] not in st["classes"]]:
        del st["retry"][k]
    for sid in [s for s, v in st["silences"].items() if v["until"] < t - ONESHOT_KEEP_S]:
        del st["silences"][sid]
    _trim_recent(st, t)


def _trim_recent(st: dict, t: float) -> None:
    rec = st["recent"]
    for at, k in sorted((v["at"], k) for k, v in rec.items()):
        if at < t - ONESHOT_KEEP_S or len(rec) > MAX_RECENT:
            del rec[k]
