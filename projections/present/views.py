"""What `status`, `summary` and the board show, computed from the folded states (pure).

``status_doc`` is the `status --json` document; ``summary_groups`` the grouped summary. Both read
only projection states (never sources), so `status`, `summary`, the board and `rebuild` agree.
Class order, labels and colours come from ``projections.classes`` (the one class table).

Invariants
- Values here are raw (as recorded): escaping is the renderer's job (``projections.text.safe``),
  so ``--json`` stays exact and valid JSON.
- Agents sort by class rank (``classes.rank``), then id. The summary groups are upper case and in
  one fixed order: the four attention classes, APPROVALS, VIOLATIONS, SOURCES, RUNS, SWARMS,
  DONE (claims of done whose DoD is met: news, not a need).
- DICE_TERMINADO lists only agents whose DoD is not already met (a met DoD needs nobody: DONE).
- Within a class the unhandled come before the handled (acked, snoozed, silenced: ``handling``);
  every row and line says how it was handled and, for RECLAMA, what the agent waits for
  (``projections.fleet.waiting``) and its task title. ``fleet_sections`` is what the phone's fleet page
  and the board show: the same rows and the same "needs you" rule as the summary.
"""
from __future__ import annotations

from typing import Any

from events.timefmt import iso
from projections import classes
from projections.base import registry
from projections.notify.policy import NEVER, matching_silence
from projections.text import age as fmt_age
from projections.fleet.waiting import clean as waiting_clean
from projections.fleet.waiting import words as waiting_words
from projections.present.hub import time_of

ATTENTION = classes.ATTENTION
GROUPS = (*ATTENTION, "APPROVALS", "VIOLATIONS", "SOURCES", "RUNS", "SWARMS", "DONE")


def since_s(iso_s: str | None, now: float) -> float | None:
    """Seconds from an ISO time to ``now`` (None when absent or unreadable)."""
    t = time_of(iso_s)
    return None if t is None else now - t


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _mods() -> dict[str, Any]:
    return registry(("dod", "runs", "missions", "swarms", "plans"))  # the ones read here (fleet, notify: by shape)


# ---- handled: how a person dealt with an agent's open condition ----------------------------
# The mark of each way (the board's column, the phone's badge); "how" values of ``handled``.
HANDLED_MARK = {"ack": "✓", "snooze": "z", "silence": "s"}


def handling(notify: Any, now: float) -> dict[str, dict[str, Any]]:
    """agent id -> ``handled`` of its open condition, for the agents a person handled: acked
    (until it clears: ``until`` None), snoozed (``until``), or matched by an active silence
    (``until``, ``silence``: its id). ``by``: who acked ("web:phone", "cli:<user>") or the
    silence ("silence <id>"). An ack in force wins over a silence. Read by shape from the notify
    state (``conds``, ``silences``; a reader's narrow view of it does as well)."""
    if not isinstance(notify, dict):
        return {}
    silences = active_silences(notify, now)
    out: dict[str, dict[str, Any]] = {}
    for c in (notify.get("conds") or {}).values():
        subj = c["subject"]
        if c["cleared"] is None and subj.startswith("agent:"):   # the agent's one uncleared condition
            h = handled(c, silences, now)
            if h is not None:
                out[subj[6:]] = h
    return out


def active_silences(notify: Any, now: float) -> dict[str, Any]:
    return {k: v for k, v in (notify.get("silences") or {}).items() if (v.get("until") or 0) > now}


def handled(c: Any, silences: dict[str, Any], now: float) -> dict[str, Any] | None:
    """How one open condition (any subject) was handled, or None (``silences``: the active ones)."""
    acked = c.get("acked")
    if acked is not None and acked > now:
        return {"how": "ack" if acked >= NEVER else "snooze", "until": None if acked >= NEVER else iso(acked),
                "by": c.get("acked_by") or "", "at": _iso(c.get("acked_at"))}
    sid = matching_silence(c, silences, now) if silences else None
    if sid is None:
        return None
    return {"how": "silence", "until": iso(silences[sid]["until"]), "by": f"silence {sid}", "silence": sid,
            "at": _iso(silences[sid].get("at"))}


def _iso(t: Any) -> str | None:
    return iso(t) if isinstance(t, (int, float)) and t < NEVER else None


def handled_words(h: dict[str, Any] | None, now: float) -> str:
    """"acked by web:phone", "snoozed 52m (cli:ana)", "silenced 23h (silence ab12)" ("" for None)."""
    if not h:
        return ""
    left = since_s(h.get("until"), now)
    left_s = fmt_age(-left) if left is not None else ""
    by = h.get("by") or ""
    if h["how"] == "ack":
        return f"acked by {by}" if by else "acked"
    if h["how"] == "snooze":
        return f"snoozed {left_s}" + (f" ({by})" if by else "")
    return f"silenced {left_s} ({by})"


def waiting_for(a: Any) -> dict[str, Any] | None:
    """What a RECLAMA agent waits for (``projections.fleet.waiting``): the hook's metadata as
    recorded, else what its phase says; None for every other class."""
    if a["class"] != classes.RECLAMA:
        return None
    return a.get("waiting_for") or waiting_clean(None, a.get("phase"))


def agent_rows(states: dict[str, Any], now: float, dod_agents: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per known agent, most urgent first (by class, then the unhandled before the
    handled, then id); ``handled`` and ``waiting_for`` as `status --json` gives them. (Per agent
    and start-up bound: `status` builds one per agent before its first byte; the ages of the times
    agents share are computed once.)"""
    fleet = states.get("fleet") or {"agents": {}}
    ages: dict[str, float | None] = {}

    def age_s(t: Any) -> float | None:
        if type(t) is not str:
            return _r(since_s(t, now))
        if t not in ages:
            ages[t] = _r(since_s(t, now))
        return ages[t]

    rows = []
    none: dict[str, Any] = {}
    handled = handling(states.get("notify"), now)
    for aid, a in fleet["agents"].items():
        d = dod_agents.get(aid, none)
        get = a.get
        rows.append({
            "handled": handled.get(aid), "waiting_for": waiting_for(a),
            "agent": aid, "class": a["class"], "since": a["since"], "age_s": age_s(a["since"]),
            "state": get("state"), "phase": get("phase"), "task": get("task"), "target": get("target"),
            "last_activity": get("last_activity"), "activity_age_s": age_s(get("last_activity")),
            "reason": get("reason", ""), "source": get("source", ""),
            "dod_status": d.get("status", "pending"),
            "dod": {"verdict": d.get("verdict"), "verifier": d.get("verifier"), "verdict_at": d.get("verdict_at"),
                    "claim_age_s": d.get("claim_age_s"), "contract_changed": d.get("contract_changed"),
                    "contract_changes": d.get("contract_changes"), "checks": d.get("checks")} if d else None})
    rank, last = classes.RANK, len(classes.TABLE)
    rows.sort(key=lambda x: (rank.get(x["class"], last), x["handled"] is not None, x["agent"]))
    return rows


def agents_view(states: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """``agent_rows`` with the DoD read from the dod state (what the phone's fleet page shows)."""
    dod_agents = _mods()["dod"].status(states["dod"], now)["agents"] if "dod" in states else {}
    return agent_rows(states, now, dod_agents)


def needs_you(row: dict[str, Any]) -> bool:
    """An attention class, but for a claim of done whose DoD is met (as the summary leaves out)."""
    return row["class"] in ATTENTION and not (row["class"] == classes.DICE_TERMINADO and row["dod_status"] == "met")


def fleet_sections(rows: list[dict[str, Any]]) -> list[tuple[str, bool, list[dict[str, Any]]]]:
    """(class, needs you, rows) of ``agent_rows``: first the classes that need you (their rows
    unhandled first), then the rest by class; a met claim of done goes to the rest under
    ``DICE_TERMINADO``; CERRADO agents are left out."""
    need: dict[str, list[dict[str, Any]]] = {}
    rest: dict[str, list[dict[str, Any]]] = {}
    for r in rows:   # already in class rank order, the unhandled first
        if r["class"] != classes.CERRADO:
            (need if needs_you(r) else rest).setdefault(r["class"], []).append(r)
    return [(c, True, v) for c, v in need.items()] + [(c, False, v) for c, v in rest.items()]


def status_doc(states: dict[str, Any], head: int, now: float, *, max_concurrent: int = 0,
               max_children: int = 0) -> dict[str, Any]:
    """The `status --json` document."""
    mods = _mods()
    fleet = states.get("fleet") or {"agents": {}, "sources": {}}
    dod_st = mods["dod"].status(states["dod"], now)
    agents = agent_rows(states, now, dod_st["agents"])
    # plans: id -> tasks by state, what waits on what; loop: launched agents, verdicts acted on,
    # launch -> verified met (projections/plans/fold.py)
    loop = mods["plans"].status(states["plans"], now) if "plans" in states else \
        {"plans": {}, "launched": {}, "acted": {}, "launch_to_met_s": {}}
    counts = {c: 0 for c in classes.ORDER}
    for a in agents:
        counts[a["class"]] = counts.get(a["class"], 0) + 1
    return {
        "head": head, "generated_at": iso(now), "agents": agents, "classes": counts,
        "dod": dod_st.get("counts", {}),
        "sources": [{"source": k, **v} for k, v in sorted(fleet.get("sources", {}).items())],
        "runs": mods["runs"].status(states["runs"], now)["runs"],
        "missions": mods["missions"].status(states["missions"], now),
        "swarms": mods["swarms"].status(states["swarms"], now, max_concurrent, max_children),
        "notify": notify_health(states.get("notify"), now),
        "plans": loop.pop("plans"), "loop": loop,
    }


def notify_health(st: Any, now: float) -> dict[str, Any]:
    """Last push, pending retries (failed deliveries) and active silences, read by shape from the
    notify state (``last`` {severity: t}, ``retry`` {cond: [attempt, at]}, ``silences`` {id: {until}})."""
    out: dict[str, Any] = {"last_sent": None, "last_sent_age_s": None, "failures": 0, "silences": 0}
    if not isinstance(st, dict):
        return out
    last = [t for t in (st.get("last") or {}).values() if isinstance(t, (int, float))]
    if last:
        out["last_sent"], out["last_sent_age_s"] = iso(max(last)), _r(now - max(last))
    out["failures"] = len(st.get("retry") or {})
    out["silences"] = sum(1 for v in (st.get("silences") or {}).values()
                          if isinstance(v, dict) and (v.get("until") or 0) > now)
    return out


TASK_CUT = 60   # a task title in a summary line (the line is escaped when printed)


def _agent_line(cls: str, aid: str, a: Any, age: str, dod: str, h: dict[str, Any] | None = None,
                now: float = 0.0) -> str:
    """One summary line: what the agent needs (what it waits for, when known), its task title,
    and how it was handled ("· acked by web:phone")."""
    if cls == classes.RECLAMA:
        what = waiting_words(waiting_for(a)) or a.get("reason") or f"{a.get('state') or '-'}/{a.get('phase') or '-'}"
        line = f"{aid}: {what} for {age}"
    elif cls == classes.DICE_TERMINADO:
        line = f"{aid}: claims done {age} ago, DoD {dod}"
    elif cls == classes.ESTANCADO:
        line = f"{aid}: stalled for {age} ({a.get('phase') or '-'})"
    else:
        line = f"{aid}: {a.get('reason') or 'mal lanzado'}"
    return line + _task(a) + (f" · {handled_words(h, now)}" if h else "")


def _task(a: Any) -> str:
    """" · task: <title>", the title cut raw for a summary line (the printer escapes the whole
    line); "" for an agent without one."""
    task = a.get("task")
    return f" · task: {task if len(task) <= TASK_CUT else task[:TASK_CUT - 1] + '…'}" if task else ""


def summary_groups(states: dict[str, Any], now: float, *, max_concurrent: int = 0,
                   max_children: int = 0) -> list[tuple[str, list[str]]]:
    """[(GROUP, lines)] in the fixed order ``GROUPS`` (then any other group a projection adds,
    upper-cased, sorted). Empty groups are left out."""
    mods = _mods()
    fleet = states.get("fleet") or {"agents": {}, "sources": {}}
    dod_agents = mods["dod"].status(states["dod"], now)["agents"]
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    by_class: dict[str, list[tuple[bool, str, str]]] = {}
    handled = handling(states.get("notify"), now)
    for aid, a in fleet["agents"].items():   # within a class: the unhandled first, then oldest first
        by_class.setdefault(a["class"], []).append((aid in handled, a["since"] or "", aid))
    for cls in ATTENTION:
        for _, since, aid in sorted(by_class.get(cls, [])):
            dod, a = dod_agents.get(aid, {}).get("status", "pending"), fleet["agents"][aid]
            if cls == classes.DICE_TERMINADO and dod == "met":   # needs nobody
                groups["DONE"].append(f"{aid}: DoD met by {dod_agents[aid].get('verifier') or '?'}{_task(a)}")
                continue
            groups[cls].append(_agent_line(cls, aid, a, fmt_age(since_s(since, now)), dod, handled.get(aid), now))
    extra: list[tuple[str, str]] = []
    for name in ("dod", "missions", "plans"):
        extra += [(g, str(line)) for g, line in mods[name].items(states[name], now)]
    # runs gives lines, not groups: each is a run needing a human
    extra += [("VIOLATIONS", str(line)) for line in mods["runs"].summary(states["runs"], now)]
    extra += mods["swarms"].items(states["swarms"], now, max_concurrent, max_children)
    for g, line in extra:
        groups.setdefault(g.upper(), []).append(line)
    for src, s in sorted(fleet.get("sources", {}).items()):
        if s.get("failed"):
            groups["SOURCES"].append(f"{src}: failed for {fmt_age(since_s(s.get('since'), now))}: {s.get('error', '')}")
    order = list(GROUPS) + sorted(g for g in groups if g not in GROUPS)
    return [(g, groups[g]) for g in order if groups[g]]
