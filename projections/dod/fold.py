"""DoD projection: who is done for real (what it keeps: the room's contract, ``projections.dod``).

Invariants
- The contract digest is fixed by the first ``agent.classified`` carrying one; every later
  difference between the observed digest and the last known one is exactly one
  ``dod.contract_changed`` event (edge-triggered, never repeated while the level persists).
- A verdict whose verifier is the agent itself is never a verdict (the CLI refuses it; goal.json
  gives ``dod.flagged`` ``self-approved`` instead). "Itself" is by identity, not spelling
  (``projections.identity``: NFKC, casefold, no whitespace/format characters, no ``agent:``
  prefix, Cyrillic/Greek homoglyphs as the Latin letter they imitate).
- A verdict read from the agent's own goal.json (``dod_status``/``dod_verifier``) is a claim
  with the provenance "claimed by the agent's file": kept apart (``claimed``), never the DoD's
  verdict, so it never closes a DoD on its own (a ``met`` there counts as a claim).
- ``unevaluable`` escalates (notify: urgent, "needs a human: <evidence>") and never closes:
  only another verdict replaces it; it never replaces a met or failed from a person or a
  verifier (``judged``: kept apart as ``unevaluable``).
- ``claim-unverified`` is flagged at most once per claim (a claim = one DICE_TERMINADO period).
- Status precedence: unevaluable; else the most recent of verdict / self-approval / claim
  (by seq; ties: verdict > self-approval > claim); else pending.
"""
import enum
from operator import itemgetter
from typing import Any

from events.timefmt import parse_iso
from events.types import AgentClassified, DodContractChanged, DodFlagged, DodVerdict
from projections.classes import CERRADO, DICE_TERMINADO
from projections.fleet import fold as fleet
from projections.fleet.fold import PRUNE_EVERY
from projections.identity import same_identity
from projections.text import age as fmt_age

NAME = "dod"
TIME = None        # fold reads rec.time itself (projections.base.Projection)
READS_ID = False   # fold never reads rec.id
STATE_TYPE = None  # a snapshot decodes as plain JSON

VERDICTS = ("met", "failed", "unevaluable")
FILE_PROVENANCE = "claimed by the agent's file"
CHECKER = "fleetwatch-checks"   # dod_checks.VERIFIER: the checker's verdicts do not count as judged


class Status:
    """An agent's DoD status (``status``, ``summary``, the board), most recent first by seq: plain strings."""

    PENDING = "pending"              # no claim, no verdict
    CLAIMED = "claimed"              # DICE_TERMINADO, or its own file says met: no verdict yet
    MET = "met"                      # an independent verifier's verdict
    FAILED = "failed"                # an independent verifier's verdict
    UNEVALUABLE = "unevaluable"      # a verifier could not judge it: needs a human, never closes
    SELF_APPROVED = "self-approved"  # the agent approved itself: never a verdict


class Flag(str, enum.Enum):
    SELF_APPROVED = "self-approved"
    CLAIM_UNVERIFIED = "claim-unverified"


def initial() -> dict[str, Any]:
    return {"agents": {}}


# an agent's record at first sight (every value immutable: each agent gets a copy, and a copy of
# this dict is cheaper than building the 16-key literal: a first tick makes one per agent)
_NEW_AGENT: dict[str, Any] = {
    "contract_sha256": None,   # fixed at first sight
    "contract_len": 0,
    "current_sha256": None,    # last known digest (changes are events)
    "contract_changes": 0,
    "class": None, "class_since": None,
    "claim_seq": 0, "claim_since": None, "claim_flagged": False,
    "verdict": None,           # {"verdict","verifier","evidence","source","at","seq"}
    "goal_key": None,          # "status|verifier" of the last goal.json verdict
    "self_key": None, "self_seq": 0, "self_at": None, "self_detail": "",
    "flags": 0,
}


def _agent(state: dict[str, Any], agent: str) -> dict[str, Any]:
    a = state["agents"].get(agent)
    if a is None:
        a = state["agents"][agent] = _NEW_AGENT.copy()
    return a


def _classified(state: dict[str, Any], ev: AgentClassified, rec: Any) -> None:
    """The contract digest fixed at first sight; a claim is one DICE_TERMINADO period."""
    a = _agent(state, ev.agent)
    if a["contract_sha256"] is None and ev.contract_sha256:
        a["contract_sha256"] = a["current_sha256"] = ev.contract_sha256
        a["contract_len"] = ev.contract_len
    if ev.to != a["class"]:
        a["class"], a["class_since"] = ev.to, rec.time
        if ev.to == DICE_TERMINADO:
            a["claim_seq"], a["claim_since"], a["claim_flagged"] = rec.seq, rec.time, False
    if ev.to != DICE_TERMINADO:
        a["claim_seq"], a["claim_since"], a["claim_flagged"] = 0, None, False
    # fleet.prune_due's period is a multiple of PRUNE_EVERY: other seqs skip its call
    if rec.seq % PRUNE_EVERY == 0 and fleet.prune_due(rec.seq, state["agents"]):
        fleet.prune_closed(state["agents"], rec.time, "class_since")


def _verdict(state: dict[str, Any], ev: DodVerdict, rec: Any) -> None:
    """A verifier's verdict; the agent's own file's is a claim (``claimed``); self-approval none."""
    a = _agent(state, ev.agent)
    if same_identity(ev.verifier, ev.agent):
        return  # self-approval is never a verdict
    v = {"verdict": ev.verdict, "verifier": ev.verifier, "evidence": ev.evidence,
         "source": ev.source, "at": rec.time, "seq": rec.seq}
    if ev.checks:  # the checker's per-check outcome (id, status), shown by status and the board
        v["checks"] = [[str(c.get("id", "?"))[:40], str(c.get("status", "?"))[:12]] for c in ev.checks[:32]]
    if ev.source == "goal.json":  # the agent's own file: a claim, never the verdict
        a["claimed"] = v
        a["goal_key"] = f"{ev.verdict}|{ev.verifier}"
        a["self_key"] = None  # a later self-approval is a new one
    elif ev.verdict == "unevaluable" and judged(a):
        a["unevaluable"] = v   # a non-answer never replaces a human's or a verifier's met/failed
    else:
        a["verdict"] = v


def judged(a: dict[str, Any] | None) -> bool:
    """The agent's verdict is a met or failed from a person or a verifier (not the checker's own
    ``fleetwatch-checks``): an ``unevaluable`` never replaces it (the fold keeps it apart as
    ``unevaluable``; the checker records none)."""
    v = a.get("verdict") if a else None
    return v is not None and v["verdict"] in ("met", "failed") and v["verifier"] != CHECKER


def _check_started(state: dict[str, Any], ev: Any, rec: Any) -> None:
    """The claim whose checks the checker started last (``check_started``: its claim seq)."""
    _agent(state, ev.agent)["check_started"] = ev.claim_seq


def _contract_changed(state: dict[str, Any], ev: DodContractChanged, rec: Any) -> None:
    a = _agent(state, ev.agent)
    a["current_sha256"] = ev.new_sha256
    a["contract_changes"] += 1
    if a["contract_sha256"] is None:
        a["contract_sha256"] = ev.old_sha256


def _flagged(state: dict[str, Any], ev: DodFlagged, rec: Any) -> None:
    a = _agent(state, ev.agent)
    a["flags"] += 1
    if ev.flag == Flag.SELF_APPROVED.value:
        a["self_key"] = ev.detail or "met|"
        a["self_seq"], a["self_at"] = rec.seq, rec.time
    elif ev.flag == Flag.CLAIM_UNVERIFIED.value:
        a["claim_flagged"] = True


def _launched(state: dict[str, Any], ev: Any, rec: Any) -> None:
    """``agent.launched`` is the pin of record: the launched digest (a goal.json that differs is a
    contract change) and folder (``launched_cwd``: the checker runs there, across restarts); a
    relaunch of the id starts a new life (no verdict, no changes counted)."""
    a = _agent(state, ev.agent)
    a["contract_sha256"] = a["current_sha256"] = ev.contract_sha256 or None
    a["contract_changes"], a["verdict"] = 0, None
    a["launched_cwd"] = ev.cwd or None


_HANDLERS: dict[str, Any] = {"agent.classified": _classified, "dod.verdict": _verdict,
                             "dod.contract_changed": _contract_changed, "dod.flagged": _flagged,
                             "dod.check_started": _check_started, "agent.launched": _launched}
TYPES = frozenset(_HANDLERS)  # the event types fold reads (others: no-op)


def fold(state: dict[str, Any], rec: Any) -> dict[str, Any]:
    """One event into the state: the handler of its type (a no-op for every other type)."""
    handler = _HANDLERS.get(rec.type)
    if handler is not None:
        handler(state, rec.event, rec)
    return state


# ---- detect ------------------------------------------------------------------------------
def detect(state: dict[str, Any], snap: Any, now: float, claim_unverified_after: float = 1800.0,
           **_policy: Any) -> list[Any]:
    """Contract changes, goal.json verdicts, self-approvals (each agent's :func:`judge`, in id
    order) and unverified claims (:func:`unverified_claims`), edge-triggered. Agents of a source
    that failed this tick are skipped (their last state stands). The watcher gives the same events
    judging only the agents that changed (watcher/runtime/schedule.py)."""
    agents, cur, failed = state["agents"], snap.agents, snap.failed
    out: list[Any] = []
    for aid in sorted(cur):
        if cur[aid].source not in failed:
            out += judge(aid, cur[aid], agents.get(aid))
    return out + unverified_claims(state, now, claim_unverified_after)


# what of an agent's record its judge reads (the fold changes records in place: compared by value)
_SIG = itemgetter("contract_sha256", "contract_changes", "current_sha256", "self_key", "goal_key")
_NO_SIG = (None, 0, None, None, None)   # an agent the state does not know yet


def signature(a: dict[str, Any] | None) -> tuple[Any, ...]:
    """The fields of ``a`` that :func:`judge` reads: the same observation against the same
    signature gives the same (no) events."""
    return _NO_SIG if a is None else _SIG(a)


def claiming(a: dict[str, Any] | None) -> bool:
    """In a claim not yet flagged (the agents ``claim-unverified`` may come due for)."""
    return a is not None and a["class"] == DICE_TERMINADO and not a["claim_flagged"] and bool(a["claim_since"])


def claiming_ids(state: dict[str, Any]) -> list[str]:
    """The agents of the state in a claim not yet flagged, in id order."""
    return sorted(aid for aid, a in state["agents"].items() if claiming(a))


def unverified_claims(state: dict[str, Any], now: float, claim_unverified_after: float,
                      ids: list[str] | None = None) -> list[Any]:
    """``claim-unverified`` for each agent in a claim not yet flagged (``ids``: those agents in id
    order, when the caller knows them), with no verdict since the claim, ``claim_unverified_after``
    after it."""
    agents = state["agents"]
    out: list[Any] = []
    for aid in claiming_ids(state) if ids is None else ids:
        a = agents[aid]
        v = a["verdict"]
        if v is not None and v["seq"] >= a["claim_seq"]:
            continue
        t = parse_iso(a["claim_since"])
        if now - t >= claim_unverified_after:
            out.append(DodFlagged(agent=aid, flag=Flag.CLAIM_UNVERIFIED.value,
                                  detail=f"no verdict {int(now - t)}s after the claim"))
    return out


def judge(aid: str, obs: Any, a: dict[str, Any] | None) -> list[Any]:
    """One agent's contract change, goal.json verdict or self-approval: its observation against
    its record (None: never seen). Reads only :func:`signature`'s fields of the record."""
    if obs.error:
        return []
    out: list[Any] = []
    cur = a["current_sha256"] if a else None
    known = a is not None and (a["contract_sha256"] is not None or a["contract_changes"])
    if known and obs.contract_sha256 != cur:
        out.append(DodContractChanged(agent=aid, old_sha256=cur, new_sha256=obs.contract_sha256,
                                      new_len=obs.contract_len))
    status = (obs.dod_status or "").strip().lower() or None
    verifier = (obs.dod_verifier or "").strip() or None
    if status == "met" and (not verifier or same_identity(verifier, aid)):   # self-approved
        sk = f"met|{verifier or ''}"   # its signature
        if a is None or a["self_key"] != sk:
            out.append(DodFlagged(agent=aid, flag=Flag.SELF_APPROVED.value, detail=sk))
    elif status in VERDICTS and verifier and not same_identity(verifier, aid):
        key = f"{status}|{verifier}"
        if a is None or a["goal_key"] != key:
            out.append(DodVerdict(agent=aid, verdict=status, verifier=verifier,
                                  evidence="dod_status in goal.json", source="goal.json"))
    return out


# ---- read side ---------------------------------------------------------------------------
def agent_status(a: dict[str, Any]) -> str:
    v = a["verdict"]
    if v is not None and v["verdict"] == Status.UNEVALUABLE:
        return Status.UNEVALUABLE
    cands: list[tuple[int, int, str]] = []
    if v is not None:
        cands.append((v["seq"], 2, v["verdict"] if v["verdict"] in VERDICTS else Status.PENDING))
    if a["self_key"] is not None:
        cands.append((a["self_seq"], 1, Status.SELF_APPROVED))
    if a["class"] == DICE_TERMINADO and a["claim_seq"]:
        cands.append((a["claim_seq"], 0, Status.CLAIMED))
    c = a.get("claimed")
    if c is not None and c["verdict"] == Status.MET:
        cands.append((c["seq"], 0, Status.CLAIMED))  # the agent's file says met: a claim, not a verdict
    return max(cands)[2] if cands else Status.PENDING


def status(state: dict[str, Any], now: float) -> dict[str, Any]:
    """Per agent: status, class, verdict, contract facts and flags (no contract text, ever)."""
    out: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for aid in sorted(state["agents"]):
        a = state["agents"][aid]
        st = agent_status(a)
        counts[st] = counts.get(st, 0) + 1
        v = a["verdict"]
        out[aid] = {
            "status": st, "class": a["class"],
            "claim_age_s": round(now - parse_iso(a["claim_since"]), 1) if a["claim_since"] else None,
            "claim_unverified": a["claim_flagged"],
            "verdict": v["verdict"] if v else None, "verifier": v["verifier"] if v else None,
            "verdict_source": v["source"] if v else None, "verdict_at": v["at"] if v else None,
            "evidence": v["evidence"] if v else None,
            "checks": [{"id": i, "status": st} for i, st in (v.get("checks") or [])] if v else [],
            "verdict_provenance": (f"recorded by {v['verifier']}" if v else None),
            "claimed": ({"verdict": c["verdict"], "verifier": c["verifier"], "at": c["at"],
                         "provenance": FILE_PROVENANCE} if (c := a.get("claimed")) else None),
            "contract_sha256": a["contract_sha256"], "contract_len": a["contract_len"],
            "contract_changes": a["contract_changes"],
            "contract_changed": a["contract_changes"] > 0,
        }
    return {"agents": out, "counts": counts}


def items(state: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """(group, line) for the summary (all ``violations``), agents by id; CERRADO agents left out."""
    out: list[tuple[str, str]] = []
    for aid in sorted(state["agents"]):
        a = state["agents"][aid]
        if a["class"] == CERRADO:
            continue  # gone agents are history, not news
        st = agent_status(a)
        if a["contract_changes"]:
            out.append(("violations", f"{aid}: DoD contract rewritten ({a['contract_changes']}x)"))
        if st == Status.SELF_APPROVED:
            out.append(("violations", f"{aid}: DoD self-approved (no independent verifier)"))
        if st == Status.UNEVALUABLE:
            v = a["verdict"]
            out.append(("violations", f"{aid}: DoD unevaluable per {v['verifier']} (needs a human)"))
        c = a.get("claimed")
        if c is not None and c["verdict"] == Status.MET and (a["verdict"] is None or a["verdict"]["seq"] < c["seq"]):
            out.append(("violations", f"{aid}: DoD met {FILE_PROVENANCE} (verifier {c['verifier']}), no verdict"))
        if st == Status.CLAIMED and a["claim_flagged"] and a["claim_since"]:
            age = int(now - parse_iso(a["claim_since"]))
            out.append(("violations", f"{aid}: claims done, no verdict for {fmt_age(age)}"))
    return out


def summary(state: dict[str, Any], now: float) -> list[str]:
    return [line for _, line in items(state, now)]
