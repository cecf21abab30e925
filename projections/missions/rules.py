"""The bounded orchestrator's rules, checked from outside on one tick's work-package changes (pure).

``check`` gets this tick's WP changes ``(mission, wp, old record | None, new record)`` with the
view after them (every WP's state, every circuit's state) and returns ``wp.violated`` and
``wp.flagged`` events. Every rule but the cap is a transition, so it is seen once: after the
change is folded, old equals new. The cap is a level, reported once per episode (the mission
remembers ``cap_over`` until its active count is back at or under the cap).

| rule | broken when |
|---|---|
| ``circuit-open-mutation`` | a WP starts RUNNING while its mission's circuit is OPEN |
| ``done-redone`` | a DONE WP leaves DONE (RUNNING, READY … again) |
| ``deps-not-done`` | a WP is RUNNING while one of its deps is not DONE |
| ``critical-needs-approval`` | a CRITICAL-risk WP starts RUNNING never seen in APPROVAL_REQUIRED |
| ``attempts-decreased`` | ``attempts`` goes down (the retry count is reset, hiding retries) |
| ``children-active-cap`` | more than ``max_children_active`` WPs of a mission RUNNING/CHECKING |
| ``completed-reopened`` | a completed mission gets a WP that is not DONE |

Flags (warnings, once per crossing): ``retries`` (attempts > 3), ``same-error`` (the same error
signature more than 2 times). A WP first seen RUNNING is not held to the approval or circuit
rules (its start was not seen); it is held to ``deps-not-done`` (a level anyone can see).
"""
from __future__ import annotations

import enum
from typing import Any

from events.types import WpFlagged, WpViolated

DONE, RUNNING, APPROVAL = "DONE", "RUNNING", "APPROVAL_REQUIRED"
ACTIVE = ("RUNNING", "CHECKING")
MAX_ATTEMPTS = 3
MAX_SAME_SIG = 2


class WpRule(str, enum.Enum):
    """Rule names are part of the contract: never rename."""

    CIRCUIT_OPEN_MUTATION = "circuit-open-mutation"      # a WP went RUNNING while its mission's circuit is OPEN
    DONE_REDONE = "done-redone"                          # a DONE WP went to another state again
    DEPS_NOT_DONE = "deps-not-done"                      # a WP RUNNING before its deps are DONE
    CRITICAL_NEEDS_APPROVAL = "critical-needs-approval"  # a critical-risk WP ran without approval
    ATTEMPTS_DECREASED = "attempts-decreased"            # a WP's attempts counter went down
    CHILDREN_ACTIVE_CAP = "children-active-cap"          # more WPs active in a mission than the cap
    COMPLETED_REOPENED = "completed-reopened"            # a WP of a completed mission is no longer DONE


class WpFlag(str, enum.Enum):
    RETRIES = "retries"          # attempts > 3
    SAME_ERROR = "same-error"    # same error signature > 2 times


def deps_not_done(mid: str, deps: list[str], view: dict[str, dict[str, str]], done: set[str]) -> list[str]:
    """The deps of a WP of mission ``mid`` that are not DONE. A dep names a WP of the same mission
    when there is one (WPs are keyed by (mission, wp): two missions may both have a ``wp1``);
    else a WP of any mission (``done``: every DONE WP id, for ids unique across missions, as in
    fixtures/missions.sql; tests/projections/missions/test_missions_dep_scope.py)."""
    own = view.get(mid, {})
    return [d for d in deps if (own[d] != DONE if d in own else d not in done)]


def active_count(wps: dict[str, Any]) -> int:
    """WPs RUNNING or CHECKING (``wps``: wp -> record with ``state``, or wp -> state)."""
    return sum(1 for w in wps.values() if (w if isinstance(w, str) else w["state"]) in ACTIVE)


def _v(mid: str, wid: str, rule: WpRule, detail: str, **kw: int) -> WpViolated:
    return WpViolated(mission=mid, wp=wid, rule=rule.value, detail=detail[:200], **kw)


def check(state: dict[str, Any], changes: list[tuple[str, str, dict | None, dict]], view: dict[str, dict[str, str]],
          circuits: dict[str, str], max_children_active: int = 3) -> list[Any]:
    """wp.violated / wp.flagged events for this tick's WP changes (deterministic order)."""
    out: list[Any] = []
    done = {w for wps in view.values() for w, s in wps.items() if s == DONE}
    reopened: set[str] = set()
    entered: dict[str, str] = {}
    for mid, wid, old, new in changes:
        st = new["state"]
        was = old["state"] if old else None
        starts = st == RUNNING and was != RUNNING
        if starts and old is not None and circuits.get(mid, "CLOSED") == "OPEN":
            out.append(_v(mid, wid, WpRule.CIRCUIT_OPEN_MUTATION, f"{wid} went {was} -> RUNNING while circuit {mid} is OPEN"))
        if was == DONE and st != DONE:
            out.append(_v(mid, wid, WpRule.DONE_REDONE, f"{wid} was DONE and went {st} again"))
        if starts:
            missing = deps_not_done(mid, new["deps"], view, done)
            if missing:
                out.append(_v(mid, wid, WpRule.DEPS_NOT_DONE, f"{wid} is RUNNING while deps not DONE: "
                              + ", ".join(missing[:5]) + (f" (+{len(missing) - 5})" if len(missing) > 5 else "")))
            risk = str(new.get("risk") or "").strip().upper()
            if risk == "CRITICAL" and old is not None and not old.get("approved") and was != APPROVAL:
                out.append(_v(mid, wid, WpRule.CRITICAL_NEEDS_APPROVAL,
                              f"CRITICAL-risk {wid} went {was} -> RUNNING without passing APPROVAL_REQUIRED"))
        if old is not None and new["attempts"] < old["attempts"]:
            out.append(_v(mid, wid, WpRule.ATTEMPTS_DECREASED,
                          f"{wid} attempts went down {old['attempts']} -> {new['attempts']} (retries hidden)"))
        m = state["missions"].get(mid)
        if st != DONE and m is not None and m["completed"] and mid not in reopened:
            reopened.add(mid)
            out.append(_v(mid, wid, WpRule.COMPLETED_REOPENED, f"mission {mid} was completed; {wid} is {st}"))
        if st in ACTIVE and was not in ACTIVE:
            entered[mid] = wid
        out += _flags(mid, wid, old, new)
    if max_children_active > 0:
        for mid in sorted(view):
            n = active_count(view[mid])
            m = state["missions"].get(mid)
            if n > max_children_active and not (m or {}).get("cap_over"):
                wid = entered.get(mid) or max(w for w, s in view[mid].items() if s in ACTIVE)
                out.append(_v(mid, wid, WpRule.CHILDREN_ACTIVE_CAP, f"{n} work packages active in {mid} "
                              f"(at most {max_children_active})", count=n, limit=max_children_active))
    return out


def _flags(mid: str, wid: str, old: dict | None, new: dict) -> list[Any]:
    out = []
    if new["attempts"] > MAX_ATTEMPTS and (old is None or old["attempts"] <= MAX_ATTEMPTS):
        out.append(WpFlagged(mission=mid, wp=wid, flag=WpFlag.RETRIES.value,
                             detail=f"{new['attempts']} attempts (over {MAX_ATTEMPTS})"))
    if new["same_sig_count"] > MAX_SAME_SIG and (old is None or old["same_sig_count"] <= MAX_SAME_SIG):
        sig = str(new.get("last_error_sig") or "")[:80]
        out.append(WpFlagged(mission=mid, wp=wid, flag=WpFlag.SAME_ERROR.value,
                             detail=f"same error {new['same_sig_count']}x (over {MAX_SAME_SIG}): {sig}"))
    return out
