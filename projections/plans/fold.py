"""The closed loop's projection: launched agents, plans, and verdicts waiting to be acted on.

State
- ``agents``: per launched agent (``agent.launched``) its pin of record (contract digest, cwd,
  target, socket), its plan task, its class (``agent.classified``) and its latest verdict after
  the launch (``dod.verdict``: an independent verifier's, never the agent's own file's).
- ``todo``: agent -> the verdict not acted on yet (any agent, launched or not); a ``dod.acted``
  for that verdict's seq removes it, a newer verdict replaces it, CERRADO drops it.
- ``closing``: agent -> [seq of the verdict a ``close`` was recorded for, CERRADO since] until
  the agent is back in another class after its CERRADO, or launched again (the watcher names
  that CERRADO "verified met", and closes again after a restart while it is not CERRADO).
- ``plans``: per plan (``plan.recorded``) its tasks (id, title, deps, digest), ``max_parallel``,
  which agent each launched task is (``agent.launched`` with the plan) and ``stopped``.
- ``acted``: counts of actions by kind; ``done``: launch-to-met durations (the last ``KEEP``).

Invariants
- A task is launched at most once: ``launched`` is derived from the log (an ``agent.launched``
  naming the plan and task), so a restart never launches it again.
- ``judge`` launches a task only when every dep's agent has a ``met`` verdict, never more than
  ``max_parallel`` of a plan live (launched, not met, not CERRADO), and nothing of a plan whose
  task was judged failed or unevaluable, or ended (CERRADO) with no met verdict (``stop``: one
  ``plan.stopped``, pushed).
"""
from __future__ import annotations

from typing import Any

import msgspec

from events.timefmt import parse_iso
from projections.classes import CERRADO, RECLAMA
from projections.identity import same_identity

NAME = "plans"
TIME = None        # fold reads rec.time itself (projections.base.Projection)
READS_ID = False   # fold never reads rec.id
STATE_TYPE = None  # a snapshot decodes as plain JSON
KEEP = 200           # launch-to-met durations kept for status and report
MAX_TASKS = 200      # tasks in one plan
MAX_AGENTS = 5000    # launched agents kept; past it the oldest CERRADO of no plan still running are forgotten


def initial() -> dict[str, Any]:
    return {"agents": {}, "todo": {}, "closing": {}, "plans": {}, "acted": {}, "done": []}


def _launched(st: dict[str, Any], ev: Any, rec: Any) -> None:
    st["agents"][ev.agent] = {
        "task": ev.task, "contract_sha256": ev.contract_sha256, "cwd": ev.cwd, "target": ev.target,
        "socket": ev.socket, "plan": ev.plan, "task_id": ev.task_id, "at": rec.time, "seq": rec.seq, "pin": ev.pin, "by": ev.by,
        "class": None, "verdict": None}
    if len(st["agents"]) > MAX_AGENTS:
        _forget(st)
    st["todo"].pop(ev.agent, None)      # a new life: an old verdict is not this one's
    st["closing"].pop(ev.agent, None)
    p = st["plans"].get(ev.plan) if ev.plan else None
    if p is not None and ev.task_id:
        p["launched"][ev.task_id] = ev.agent


def _forget(st: dict[str, Any]) -> None:
    """The oldest CERRADO launched agents of no plan still running, down to MAX_AGENTS * 9 / 10."""
    running = {p for p, v in st["plans"].items() if v["stopped"] is None}
    old = sorted((a["seq"], aid) for aid, a in st["agents"].items()
                 if a["class"] == CERRADO and a["plan"] not in running)
    for _, aid in old[:len(st["agents"]) - MAX_AGENTS * 9 // 10]:
        del st["agents"][aid]


def _verdict(st: dict[str, Any], ev: Any, rec: Any) -> None:
    if ev.source == "goal.json" or same_identity(ev.verifier, ev.agent):
        return  # the agent's own file, or self-approval: never a verdict to act on
    failed = [str(c.get("id", "?"))[:40] for c in (ev.checks or [])[:32]
              if isinstance(c, dict) and c.get("status") == "fail"]
    v = {"seq": rec.seq, "verdict": ev.verdict, "verifier": ev.verifier, "at": rec.time,
         "failed": failed, "evidence": (ev.evidence or "")[:300]}
    st["todo"][ev.agent] = v
    a = st["agents"].get(ev.agent)
    if a is not None:
        a["verdict"] = {k: v[k] for k in ("seq", "verdict", "verifier", "at")}
        if ev.verdict == "met" and a.get("at"):
            st["done"].append([ev.agent, a["plan"], round(parse_iso(rec.time) - parse_iso(a["at"]), 3)])
            del st["done"][:-KEEP]


def _acted(st: dict[str, Any], ev: Any, rec: Any) -> None:
    t = st["todo"].get(ev.agent)
    if t is not None and t["seq"] == ev.verdict_seq:
        del st["todo"][ev.agent]
    st["acted"][ev.action] = st["acted"].get(ev.action, 0) + 1
    if ev.action == "close":
        st["closing"][ev.agent] = [ev.verdict_seq, False]
    a = st["agents"].get(ev.agent)
    if a is not None:
        a["acted"] = {"action": ev.action, "verdict_seq": ev.verdict_seq, "at": rec.time}


def _classified(st: dict[str, Any], ev: Any, rec: Any) -> None:
    a = st["agents"].get(ev.agent)
    if a is not None:
        a["class"] = ev.to
    c = st["closing"].get(ev.agent)
    if ev.to == CERRADO:
        st["todo"].pop(ev.agent, None)
        if c is not None:
            c[1] = True
    elif c is not None and c[1]:
        del st["closing"][ev.agent]          # back after its CERRADO (revived): no longer closing


def _plan(st: dict[str, Any], ev: Any, rec: Any) -> None:
    old = st["plans"].get(ev.plan)
    st["plans"][ev.plan] = {
        "max_parallel": ev.max_parallel, "sha256": ev.sha256, "seq": rec.seq, "at": rec.time,
        "tasks": [{"id": str(t.get("id", "")), "title": str(t.get("title", ""))[:200],
                   "deps": [str(d) for d in t.get("deps") or []],
                   "contract_sha256": str(t.get("contract_sha256", ""))} for t in ev.tasks[:MAX_TASKS]],
        "launched": dict(old["launched"]) if old else {}, "stopped": old["stopped"] if old else None}


def _stopped(st: dict[str, Any], ev: Any, rec: Any) -> None:
    p = st["plans"].get(ev.plan)
    if p is not None and p["stopped"] is None:
        p["stopped"] = {"task": ev.task, "agent": ev.agent, "verdict": ev.verdict, "reason": ev.reason[:300],
                        "at": rec.time}


_HANDLERS = {"agent.launched": _launched, "dod.verdict": _verdict, "dod.acted": _acted,
             "agent.classified": _classified, "plan.recorded": _plan, "plan.stopped": _stopped}
TYPES = frozenset(_HANDLERS)   # fold is a no-op for every other type


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    """One event into the state (a no-op for types outside ``TYPES``)."""
    h = _HANDLERS.get(rec.type)
    if h is not None:
        h(state, rec.event, rec)
    return state


# ---- judgement (pure) --------------------------------------------------------------------
def task_states(st: dict[str, Any], plan: str) -> dict[str, dict[str, Any]]:
    """Each task of ``plan``: {state, agent, waits_on (deps not met yet)} in plan order."""
    p = st["plans"][plan]
    agents = st["agents"]
    status: dict[str, str] = {}
    for t in p["tasks"]:
        aid = p["launched"].get(t["id"])
        a = (agents.get(aid) or {}) if aid else {}
        v, cls = (a.get("verdict") or {}).get("verdict"), a.get("class")
        if aid is None:
            status[t["id"]] = "pending"
        elif v in ("met", "failed", "unevaluable"):
            status[t["id"]] = v
        else:   # launched: in no class yet
            status[t["id"]] = "closed" if cls == CERRADO else "running" if cls else "launched"
    out: dict[str, dict[str, Any]] = {}
    for t in p["tasks"]:
        s = status[t["id"]]
        waits = [d for d in t["deps"] if status.get(d) != "met"]
        if s == "pending":
            s = "waiting" if waits else ("stopped" if p["stopped"] else "ready")
        out[t["id"]] = {"state": s, "agent": p["launched"].get(t["id"]), "waits_on": waits if s == "waiting" else [],
                        "title": t["title"]}
    return out


def live(tasks: dict[str, dict[str, Any]]) -> int:
    """Tasks of a plan launched and not finished (no met verdict, not CERRADO)."""
    return sum(1 for t in tasks.values() if t["state"] in ("running", "launched", "failed", "unevaluable"))


def judge(st: dict[str, Any], inflight: frozenset[tuple[str, str]] = frozenset()) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, str]]]:
    """(tasks to launch now as (plan, task id), plans to stop as (plan, task, agent, verdict)).
    ``inflight``: launches decided but not yet folded (they count as live and are not repeated)."""
    launch: list[tuple[str, str]] = []
    stop: list[tuple[str, str, str, str]] = []
    for name, p in sorted(st["plans"].items()):
        if p["stopped"] is not None:
            continue
        tasks = task_states(st, name)
        bad = next(((tid, t) for tid, t in tasks.items() if t["state"] in ("failed", "unevaluable", "closed")), None)
        if bad is not None:
            stop.append((name, bad[0], bad[1]["agent"] or "", bad[1]["state"]))
            continue
        room = p["max_parallel"] - live(tasks) - sum(1 for pl, _ in inflight if pl == name)
        for tid, t in tasks.items():
            if room <= 0:
                break
            if t["state"] == "ready" and (name, tid) not in inflight:
                launch.append((name, tid))
                room -= 1
    return launch, stop


def due_actions(st: dict[str, Any], classes: Any, on_met: str, on_failed: str,
                inflight: frozenset[str] = frozenset()) -> list[tuple[str, str, dict[str, Any]]]:
    """(agent, action, verdict) for every verdict waiting to be acted on that the policy acts on:
    met + close -> ``close``; failed + nudge -> ``nudge`` (not while the agent is RECLAMA: it waits
    for a human; acted once it is not); unevaluable -> ``escalate`` (never closed). ``classes``:
    agent -> its class now (the fleet's). Agents CERRADO, or in ``inflight``, are skipped."""
    out = []
    for aid, v in sorted(st["todo"].items()):
        if aid in inflight or (cls := classes(aid)) == CERRADO:
            continue
        if v["verdict"] == "met" and on_met != "keep":
            out.append((aid, "close", v))
        elif v["verdict"] == "failed" and on_failed == "nudge" and cls != RECLAMA:
            out.append((aid, "nudge", v))
        elif v["verdict"] == "unevaluable":
            out.append((aid, "escalate", v))
    return out


def status(state: dict[str, Any], now: float) -> dict[str, Any]:
    """Plans (tasks by state, what waits on what), launched agents, actions and launch-to-met times."""
    plans = {}
    for name, p in sorted(state["plans"].items()):
        tasks = task_states(state, name)
        by: dict[str, list[str]] = {}
        for tid, t in tasks.items():
            by.setdefault(t["state"], []).append(tid)
        plans[name] = {"max_parallel": p["max_parallel"], "live": live(tasks), "stopped": p["stopped"],
                       "by_state": by, "tasks": [{"id": tid, **t} for tid, t in tasks.items()]}
    done = [d[2] for d in state["done"]]
    return {"plans": plans,
            "launched": {a: {"plan": r["plan"], "task_id": r["task_id"], "class": r["class"],
                             "verdict": (r["verdict"] or {}).get("verdict"), "acted": (r.get("acted") or {}).get("action"),
                             "launched_at": r["at"], "cwd": r["cwd"], "target": r["target"]}
                         for a, r in sorted(state["agents"].items())},
            "acted": dict(state["acted"]),
            "launch_to_met_s": {"count": len(done), "median": sorted(done)[len(done) // 2] if done else None,
                                "max": max(done) if done else None}}


def items(state: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """(group, line) for the summary: each stopped plan (it needs a human)."""
    return [("violations", f"plan {name}: stopped at task {p['stopped']['task']} ({p['stopped']['verdict']})")
            for name, p in sorted(state["plans"].items()) if p["stopped"]]


GONE = ("session ended", "tmux window gone", "no longer seen by any source", "tmux pane dead", "claude exited")


def amend(state: dict[str, Any], events: list[Any]) -> list[Any]:
    """The fleet's CERRADO of an agent a ``close`` was recorded for is named "verified met"; an
    update that would only rename it after the way it went (the window gone, the session ended)
    is left out (the fleet looks again each tick and finds the same: nothing is recorded)."""
    closing = state["closing"]
    if not closing:
        return events
    out = []
    for e in events:
        kind = type(e).__name__
        if getattr(e, "agent", None) in closing:
            if kind == "AgentClassified" and e.to == CERRADO:
                e = msgspec.structs.replace(e, reason="verified met")
            elif kind == "AgentUpdated" and e.changed == ["reason"] and str(e.reason).startswith(GONE):
                continue
        out.append(e)
    return out


def figures(state: dict[str, Any]) -> dict[str, Any]:
    """The report's closed-loop figures: agents launched, launch -> verified met (seconds), verdicts
    acted on by action."""
    done = sorted(d[2] for d in state["done"])
    return {"launched": len(state["agents"]), "acted": dict(state["acted"]),
            "launch_to_met": {"count": len(done), "p50_s": done[len(done) // 2] if done else None,
                              "max_s": done[-1] if done else None}}
