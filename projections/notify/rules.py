"""Notify conditions for the rule events of missions, swarms, DoD and the fleet (pure fold handlers).

``handlers(new, clear)`` returns the handlers ``projections.notify.fold`` folds these event types with
(it passes its own ``_new``/``_clear``, so this module imports nothing of notify's); ``ONESHOT`` the
one-shot conditions, as ``projections.notify.fold.ONESHOT``. Severities:
- urgent: ``wp.violated`` (one-shot); a WP in APPROVAL_REQUIRED, ESCALATED or BLOCKED (needs a
  human; one condition per WP until it leaves that state); ``dod.verdict`` ``unevaluable`` from a
  verifier ("needs a human: <evidence>"). A ``failed`` verdict is a warning, ``met`` info.
- warning, once per episode (the producing projection emits one event per episode; each is a
  one-shot condition): ``wp.flagged`` (retries / same error), ``circuit.changed`` to OPEN,
  ``swarm.capped``, ``fleet.fanout``.
A verdict from the agent's own goal.json is shown "claimed by the agent's file" and never counts
as the DoD's verdict (so it never mutes the agent's "claims done"); a self-verdict is ignored.
"""
from __future__ import annotations

from typing import Any, Callable

from projections.identity import same_identity
from projections.notify.policy import about
from projections.swarms.fold import breach

NEEDS_HUMAN = {"APPROVAL_REQUIRED": "work package needs approval",
               "ESCALATED": "work package escalated: needs a human",
               "BLOCKED": "work package blocked: needs a human"}
INDEXED = tuple(NEEDS_HUMAN)   # condition classes indexed by "wp:<mission>/<wp>"
FILE_PROVENANCE = "claimed by the agent's file"

ONESHOT: dict[str, Callable[[Any], tuple[str, str, str, str, str] | None]] = {
    "wp.violated": lambda ev: (f"mission:{ev.mission}", "WP_VIOLATED", "urgent", f"{ev.mission}/{ev.wp}",
                               f"{ev.rule}: {ev.detail}"),
    "wp.flagged": lambda ev: (f"mission:{ev.mission}", "WP_FLAGGED", "warning", f"{ev.mission}/{ev.wp}",
                              f"{ev.flag}: {ev.detail}"),
    "circuit.changed": lambda ev: (f"circuit:{ev.scope}", "CIRCUIT_OPEN", "warning", ev.scope,
                                   "circuit OPEN: its work packages must not start")
    if ev.to == "OPEN" and ev.from_ != "OPEN" else None,
    "swarm.capped": lambda ev: (f"swarm:{ev.group}", "SWARM_CAP", "warning", ev.group,
                                breach(ev.cap, ev.count, ev.limit)),
    "fleet.fanout": lambda ev: ("fleet", "FANOUT", "warning", "fleet", f"{ev.count} new agents within {int(ev.window)}s"),
    "plan.stopped": lambda ev: (f"plan:{ev.plan}", "PLAN_STOPPED", "urgent", ev.plan,
                                f"plan stopped at task {ev.task} ({ev.verdict}): needs a human"),
}


def handlers(new: Callable[..., str], clear: Callable[..., None]) -> dict[str, Callable[..., None]]:
    """Fold handlers by event type, built on notify's condition helpers."""

    def wp(st: dict, ev: Any, seq: int, t: float) -> None:
        k = f"wp:{ev.mission}/{ev.wp}"
        cid = st["index"].get(k)
        c = st["conds"].get(cid) if cid else None
        if ev.to in NEEDS_HUMAN:
            if c is not None and c["cls"] == ev.to and c["cleared"] is None:
                return  # the same need, still open
            if cid is not None:
                clear(st, st["index"].pop(k), t, str(ev.to))
            st["index"][k] = new(st, f"mission:{ev.mission}", ev.to, "urgent", seq, t, f"{ev.mission}/{ev.wp}",
                                 NEEDS_HUMAN[ev.to])
        elif cid is not None:
            clear(st, st["index"].pop(k), t, str(ev.to))

    def dod_verdict(st: dict, ev: Any, seq: int, t: float) -> None:
        if same_identity(ev.verifier, ev.agent):
            return  # self-approval is never a verdict
        if ev.source == "goal.json":
            new(st, f"dod:{ev.agent}", "VERDICT", "info", seq, t, ev.agent,
                f"{ev.verdict} by {ev.verifier}, {FILE_PROVENANCE}", oneshot=True)
            return
        if ev.verdict != "unevaluable" or st["dod"].get(ev.agent) not in ("met", "failed"):
            st["dod"][ev.agent] = ev.verdict   # a non-answer never replaces a verdict
        if ev.verdict == "unevaluable":
            new(st, f"dod:{ev.agent}", "UNEVALUABLE", "urgent", seq, t, ev.agent,
                f"needs a human: {ev.evidence or 'no evidence given'}", oneshot=True)
        else:   # failed is pushed (warning); met is for the summary and the report (info)
            new(st, f"dod:{ev.agent}", "VERDICT", "warning" if ev.verdict == "failed" else "info", seq, t, ev.agent,
                f"verdict {ev.verdict} by {ev.verifier}", oneshot=True)

    def agent_updated(st: dict, ev: Any, seq: int, t: float) -> None:
        """A new task title or wait within the class updates the agent's open condition (what
        the next push and the phone page say); it pushes nothing by itself."""
        if "task" not in ev.changed and "waiting_for" not in ev.changed:
            return
        ag = st["agents"].get(ev.agent)
        c = st["conds"].get(ag["cond"] or "") if ag is not None else None
        if c is not None and c["cleared"] is None:
            about(c, ev.task, ev.waiting_for)

    return {"agent.updated": agent_updated, "wp.changed": wp, "dod.verdict": dod_verdict}
