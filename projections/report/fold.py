"""The report projection: DoD throughput and the human's load, folded from the log (pure).

What it counts, per UTC day (``days[YYYY-MM-DD]``) and in total:
- DoD: verdicts met / failed / unevaluable; claims (an agent entering DICE_TERMINADO);
  false-done (a claim whose next verdict is ``failed``; ``caught_by_checks`` when that verdict came
  from fleetwatch's own checker); claims never verified (a claim that
  ends — the agent leaves DICE_TERMINADO — or is still open with no verdict); claim → verdict
  time; self-approvals refused (``dod.flagged`` ``self-approved``).
- The human's load: pushes (``notice.sent``) per day and per hour of day (UTC), items per push
  (``covers``), RECLAMA episodes (an agent's stay in RECLAMA: count, agent-seconds, durations —
  "time to answer" is the same interval, RECLAMA → the next class), acknowledgements,
  escalations.
- Stalls: ESTANCADO episodes, their length, the nudges in them and the class that followed.
- Per agent: seconds in each class, DoD outcomes. Runs: steps done/failed, rule violations by
  rule, retries (a step begun again), abandoned runs. Missions: WPs done, approvals (a WP's stay
  in APPROVAL_REQUIRED), circuit opens, WP rule violations.
- The watcher: uptime (``watcher.started`` → ``watcher.stopped``, or the last event), restarts
  (a start after a start with no stop in between: the previous run died), source failures and
  their length (``source.failed`` → ``source.recovered``).

Intervals are cut at UTC midnight so agent-hours land on the day they were spent. Time comes
from ``rec.time`` only. Durations are kept as lists per kind (for exact percentiles); the
watcher's copy keeps ``KEEP_DAYS`` days of per-day figures and the newest ``MAX_SAMPLES`` to
2×``MAX_SAMPLES`` durations per kind, so its snapshot stays bounded; ``fleetwatch report`` folds
the range it is asked for from ``initial(bounded=False)``: exact figures.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import date
from functools import partial
from typing import Any

from events.timefmt import log_time
from projections.classes import CERRADO, DICE_TERMINADO, ESTANCADO, RECLAMA

NAME = "report"
READS_ID = False   # fold never reads rec.id
STATE_TYPE = None  # a snapshot decodes as plain JSON
KEEP_DAYS = 60
MAX_SAMPLES = 20000
KINDS = ("reclama", "stall", "claim_verdict", "approval", "source_failed")
DAY_FIELDS = ("met", "failed", "unevaluable", "claims", "false_done", "caught_by_checks", "unverified", "pushes", "items",
              "reclama", "reclama_s", "stalls", "stall_s", "nudges", "acks", "escalations",
              "steps_done", "steps_failed", "violations", "wps_done", "uptime_s", "restarts",
              "source_failures")
DAY_S = 86400.0


def initial(bounded: bool = True) -> dict[str, Any]:
    """A fresh state. ``bounded`` (the watcher's copy): at most ``KEEP_DAYS`` days and about
    ``MAX_SAMPLES`` durations per kind; ``fleetwatch report`` folds its range unbounded (exact)."""
    return {"keep_days": KEEP_DAYS if bounded else None, "max_samples": MAX_SAMPLES if bounded else None,
            "first": None, "last": None, "days": {}, "hours": [0] * 24, "agents": {}, "per_agent": {},
            "samples": {k: [] for k in KINDS}, "stall_next": {}, "self_refused": 0,
            "rules": {}, "wp_rules": {}, "retries": 0, "abandoned": 0, "approvals": 0,
            "circuit_opens": 0, "wp_open": {}, "up_since": None, "uptime_s": 0.0, "starts": 0,
            "restarts": 0, "src_down": {}, "src_failures": {}, "last_before": None, "stopped_at": None}


_EPOCH_DAY = date(1970, 1, 1).toordinal()


def day_name(day: int) -> str:
    """``YYYY-MM-DD`` of UTC day number ``day`` (days since the epoch)."""
    d = date.fromordinal(day + _EPOCH_DAY)
    return d.isoformat() if d.year >= 1000 else d.strftime("%Y-%m-%d")   # (strftime pads no year < 1000)


TIME = log_time   # how fold reads ``rec.time`` (a caller may pass a cache of it as ``times``)


def day_key(t: float) -> str:
    return day_name(int(t // DAY_S))


def event_day(time: str, t: float) -> str:
    """:func:`day_key` of an event's ``t`` read from its log ``time``: the first ten characters
    when ``time`` has the shape ``events.timefmt.iso`` writes (``YYYY-MM-DD…Z``, a year from 1000:
    the very date ``t`` was parsed from), else computed from ``t`` (a date per event saved)."""
    if len(time) == 24 and time[23] == "Z" and time[4] == "-" and time[7] == "-" and time[0] != "0":
        return time[:10]
    return day_key(t)


def add(st: dict, day: str, field: str, n: float = 1) -> None:
    """Add ``n`` to ``field`` of ``days[day]`` (handlers pass their event's :func:`event_day`)."""
    d = st["days"].get(day)
    if d is None:
        d = st["days"][day] = dict.fromkeys(DAY_FIELDS, 0)
        if st["keep_days"] is not None and len(st["days"]) > st["keep_days"]:   # drop the oldest day
            del st["days"][min(st["days"])]
    d[field] += n


def _spread(st: dict, start: float, end: float, field: str, end_day: str | None = None) -> None:
    """Add the seconds of [start, end) to ``field`` of each UTC day they fall on (``end_day``:
    the day of ``end`` when known, for the piece on that day)."""
    t = start
    while t < end:
        midnight = (t // DAY_S + 1) * DAY_S
        if end < midnight and end_day is not None:   # the last piece, on end's own day
            add(st, end_day, field, end - t)
            return
        cut = min(end, midnight)
        add(st, day_key(t), field, cut - t)
        t = cut


def _sample(st: dict, kind: str, value: float) -> None:
    s = st["samples"][kind]
    s.append(round(value, 3))
    cap = st["max_samples"]
    if cap is not None and len(s) > 2 * cap:   # amortised O(1): keep the newest ``cap``
        del s[:-cap]


def _agent_stats(st: dict, agent: str) -> dict:
    a = st["per_agent"].get(agent)
    if a is None:
        a = st["per_agent"][agent] = {"time": {}, "met": 0, "failed": 0, "unevaluable": 0, "claims": 0}
    return a


# ---- folds per event type ------------------------------------------------------------------------
def _classified(st: dict, ev: Any, t: float, day: str) -> None:
    agent, to = ev.agent, ev.to
    agents = st["agents"]
    a = agents.get(agent)
    if a is not None:
        close_class(st, agent, a, t, to, day)
    if to == CERRADO:
        agents.pop(agent, None)
        if st["keep_days"] is not None:   # the watcher's bounded copy forgets closed agents' figures
            st["per_agent"].pop(agent, None)
        return
    if a is None:
        a = agents[agent] = {"cls": to, "since": t, "claim": None, "nudges": 0}
    else:   # the next stay (its claim, if still open, carries over)
        a["cls"], a["since"], a["nudges"] = to, t, 0
    if to == DICE_TERMINADO:
        a["claim"] = t
        add(st, day, "claims")
        _agent_stats(st, agent)["claims"] += 1
    elif to == RECLAMA:
        add(st, day, "reclama")
    elif to == ESTANCADO:
        add(st, day, "stalls")


def close_class(st: dict, agent: str, a: dict, t: float, to: str, day: str | None = None) -> None:
    """The agent leaves ``a["cls"]`` at ``t`` for ``to``: book the interval (``day``: the UTC day
    of ``t`` when known, :func:`event_day`)."""
    cls, since = a["cls"], a["since"]
    dur = max(0.0, t - since)   # 0.0 for -0.0 and NaN too
    times = _agent_stats(st, agent)["time"]
    times[cls] = times.get(cls, 0.0) + dur
    if cls == RECLAMA:
        _spread(st, since, t, "reclama_s", day)
        _sample(st, "reclama", dur)
    elif cls == ESTANCADO:
        _spread(st, since, t, "stall_s", day)
        _sample(st, "stall", dur)
        key = ("nudged:" if a["nudges"] else "not_nudged:") + to
        st["stall_next"][key] = st["stall_next"].get(key, 0) + 1
    elif cls == DICE_TERMINADO and a["claim"] is not None and to != DICE_TERMINADO:
        add(st, day or day_key(t), "unverified")      # the claim ended without a verdict
        a["claim"] = None


def _nudged(st: dict, ev: Any, t: float, day: str) -> None:
    add(st, day, "nudges")
    a = st["agents"].get(ev.agent)
    if a is not None and a["cls"] == ESTANCADO:
        a["nudges"] += 1


def _verdict(st: dict, ev: Any, t: float, day: str) -> None:
    v = ev.verdict if ev.verdict in ("met", "failed", "unevaluable") else None
    if v is None:
        return
    add(st, day, v)
    _agent_stats(st, ev.agent)[v] += 1
    a = st["agents"].get(ev.agent)
    if a is not None and a["claim"] is not None:
        _sample(st, "claim_verdict", max(0.0, t - a["claim"]))
        if v == "failed":
            add(st, day, "false_done")
            if ev.verifier == "fleetwatch-checks":   # the no-LLM checker caught it
                add(st, day, "caught_by_checks")
        a["claim"] = None


def _flagged(st: dict, ev: Any, t: float, day: str) -> None:
    if ev.flag == "self-approved":
        st["self_refused"] += 1


def _sent(st: dict, ev: Any, t: float, day: str) -> None:
    add(st, day, "pushes")
    add(st, day, "items", len(ev.covers))
    st["hours"][int(t % DAY_S // 3600)] += 1


def _step(st: dict, ev: Any, t: float, day: str) -> None:
    if ev.to == "done":
        add(st, day, "steps_done")
    elif ev.to == "fail":
        add(st, day, "steps_failed")
    elif ev.to == "begin" and ev.attempt > 1:
        st["retries"] += 1


def _rule(table: str, st: dict, ev: Any, t: float, day: str) -> None:
    add(st, day, "violations")
    st[table][ev.rule] = st[table].get(ev.rule, 0) + 1


def _wp(st: dict, ev: Any, t: float, day: str) -> None:
    key = f"{ev.mission}/{ev.wp}"
    opened = st["wp_open"].pop(key, None)
    if opened is not None:
        _sample(st, "approval", max(0.0, t - opened))
    if ev.to == "APPROVAL_REQUIRED":
        st["approvals"] += 1
        st["wp_open"][key] = t
    elif ev.to == "DONE" and ev.from_ != "DONE":
        add(st, day, "wps_done")


def _circuit(st: dict, ev: Any, t: float, day: str) -> None:
    if ev.to == "OPEN" and ev.from_ != "OPEN":
        st["circuit_opens"] += 1


def _started(st: dict, ev: Any, t: float, day: str) -> None:
    st["starts"] += 1
    if st["up_since"] is not None:        # the previous run never recorded its stop: it died
        st["restarts"] += 1
        add(st, day, "restarts")
        # it died after the last event it recorded (of the types read here): book up to that
        book_uptime(st, st["up_since"], st["last_before"] if st["last_before"] is not None else t)
    st["up_since"] = t


def _stopped(st: dict, ev: Any, t: float, day: str) -> None:
    if st["up_since"] is not None:
        book_uptime(st, st["up_since"], t, day)
        st["up_since"] = None
    st["stopped_at"] = t


def book_uptime(st: dict, start: float, end: float, end_day: str | None = None) -> None:
    st["uptime_s"] += max(0.0, end - start)
    _spread(st, start, end, "uptime_s", end_day)


def _source_failed(st: dict, ev: Any, t: float, day: str) -> None:
    if ev.source not in st["src_down"]:
        st["src_down"][ev.source] = t
        st["src_failures"][ev.source] = st["src_failures"].get(ev.source, 0) + 1
        add(st, day, "source_failures")


def _source_recovered(st: dict, ev: Any, t: float, day: str) -> None:
    down = st["src_down"].pop(ev.source, None)
    if down is not None:
        _sample(st, "source_failed", max(0.0, t - down))


def _counter(field: str) -> Callable[[dict, Any, float, str], None]:
    """A handler that counts its event in ``days[...][field]``."""
    return lambda st, ev, t, day: add(st, day, field)


def _abandoned(st: dict, ev: Any, t: float, day: str) -> None:
    st["abandoned"] += 1


# event type -> handler(state, event, time, its UTC day); every handler books one event
_HANDLERS: dict[str, Callable[[dict, Any, float, str], None]] = {
    "agent.classified": _classified, "agent.nudged": _nudged, "dod.verdict": _verdict,
    "dod.flagged": _flagged, "notice.sent": _sent, "notice.acked": _counter("acks"),
    "notice.escalated": _counter("escalations"), "step.changed": _step,
    "rule.violated": partial(_rule, "rules"), "wp.violated": partial(_rule, "wp_rules"),
    "run.abandoned": _abandoned, "wp.changed": _wp, "circuit.changed": _circuit,
    "watcher.started": _started, "watcher.stopped": _stopped,
    "source.failed": _source_failed, "source.recovered": _source_recovered,
}
TYPES = frozenset(_HANDLERS)   # fold is a no-op for every other type


def fold(state: dict[str, Any], rec: Any, times: Callable[[str], float] = TIME) -> dict[str, Any]:
    """One event into the report's figures: the span it covers (first and last event time), then
    its type's handler; types outside ``TYPES`` leave the state as it is. ``times`` as in notify."""
    h = _HANDLERS.get(rec.type)
    if h is None:
        return state
    time = rec.time
    t = times(time)
    if state["first"] is None:
        state["first"] = t
    state["last_before"] = state["last"]
    state["last"] = t
    h(state, rec.event, t, event_day(time, t))
    return state
