"""The verifier (``[dod] verifier = [argv…]``): a fresh process judges a claim fleetwatch's own
checks cannot (a free-text contract; ``log``, ``url``, ``screenshot`` or any non-``cmd`` check;
every claim when ``run_checks`` is off), and its answer is recorded as one ``dod.verdict``.

Invariants
- It is given the LAUNCHED task, contract and folder on stdin, as one JSON document
  ``{"agent", "task", "contract", "cwd"}``: the pin of record beside the log
  (``launched/<pin>.json``, checked against its name), else, for an agent not launched by
  fleetwatch, goal.json's contract when its digest is the one the dod projection pinned. Never
  goal.json's ``dod`` summary or ``claim_note``: the executor's account of its own work.
  A contract that differs from the pinned one is ``unevaluable`` without running anything.
- Its answer is one JSON object ``{"verdict": "met|failed|unevaluable", "evidence": [{"check",
  "says"}, …]}`` on stdout (a ``claude -p --output-format json`` envelope is opened: its
  ``structured_output``, else its ``result`` text). Anything else, or a non-zero exit, is asked
  once more; then the verdict is ``unevaluable`` "verifier answer invalid". No answer within
  ``verifier_timeout`` is ``unevaluable`` too. Evidence is capped and escaped.
- Recorded under the verifier's name (``verifier:<program>``), never the agent's id; one verdict
  per claim (id ``verifier:<agent>:<claim seq>``); a verdict for a claim that ended meanwhile is
  dropped (never the verdict of the next claim).
- Never in the tick's thread: ``WORKERS`` worker threads; the process runs through
  ``watcher.runtime.isolated.run_isolated`` (the checker's runner: its own PID namespace where
  available, its own process group killed whole at the timeout), its groups in a ledger
  (``verifiers-running``) so a stop kills them and a start after a kill -9 reaps them.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any

from events.log import Pending
from events.types import DodVerdict
from projections.classes import DICE_TERMINADO
from projections.dod.checks import parse_contract
from projections.identity import same_identity
from projections.text import safe
from watcher.config import xdg
from watcher.runtime import launcher
from watcher.runtime.checker import kept_from_checks
from watcher.runtime.workers import Pool, ledgered
from watcher.sources.command import RunError

log = logging.getLogger("fleetwatch.verifier")

WORKERS = 2
MAX_OUT = 1_048_576
MAX_EVIDENCE = 32
INVALID = "verifier answer invalid"
VERDICTS = ("met", "failed", "unevaluable")


def needs_judgement(obs: Any) -> bool:
    """A contract fleetwatch cannot run by itself: free text, or a required check that is not ``cmd``."""
    if obs.checks is None:
        return True
    return any(c.get("kind") != "cmd" and c.get("required", True) is not False for c in obs.checks)


def answer(out: bytes | None) -> dict[str, Any] | None:
    """The verdict in a verifier's stdout, validated, or None."""
    try:
        doc = json.loads((out or b"").decode("utf-8", "strict").strip())
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, dict) and "verdict" not in doc:      # a `claude -p --output-format json` envelope
        inner = doc.get("structured_output")
        if inner is None and isinstance(doc.get("result"), str):
            text = doc["result"].strip()
            if text.startswith("```"):
                text = text.strip("`").removeprefix("json").strip()
            try:
                inner = json.loads(text)
            except (ValueError, RecursionError):
                return None
        doc = inner
    if not isinstance(doc, dict) or doc.get("verdict") not in VERDICTS:
        return None
    ev = doc.get("evidence", [])
    if not isinstance(ev, list) or not all(isinstance(e, dict) and isinstance(e.get("check"), str)
                                           and isinstance(e.get("says"), str) for e in ev):
        return None
    if doc["verdict"] != "unevaluable" and not ev:
        return None                       # a judgement with no evidence is no judgement
    return {"verdict": doc["verdict"], "evidence": [
        {"check": safe(e["check"], 60), "says": safe(e["says"], 240),
         **({"status": e["status"]} if e.get("status") in ("pass", "fail") else {})} for e in ev[:MAX_EVIDENCE]]}


class Verifier:
    def __init__(self, argv: list[str], timeout: float, db_path: str, groups: str | None = None,
                 isolate: str = "auto", handles_all: bool = False) -> None:
        self.argv, self.timeout, self.db_path = list(argv), timeout, db_path
        self.name = "verifier:" + os.path.basename(argv[0])
        self.isolate, self.handles_all = isolate, handles_all
        self.inflight: set[tuple[str, int]] = set()
        self.decided: dict[tuple[str, int], Any] = {}
        self.running = ledgered(groups or os.path.join(xdg("state"), "verifiers-running"))
        self.read_only = kept_from_checks(db_path)   # the folders the verifier may not write
        self.pool = Pool("fleetwatch-verifier", WORKERS, self.judge, "verifier", log)

    @classmethod
    def from_config(cls, cfg: Any, db_path: str) -> Verifier | None:
        if not cfg.dod.verifier:
            return None
        return cls(cfg.dod.verifier, cfg.dur("dod.verifier_timeout"), db_path,
                   isolate=cfg.dod.check_isolation, handles_all=not cfg.dod.run_checks)

    def takes(self, obs: Any) -> bool:
        """The claims this verifier judges (the checker's ``defer`` hook)."""
        return self.handles_all or needs_judgement(obs)

    # ---- the tick's side ----------------------------------------------------------------
    def step(self, states: dict[str, Any], snap: Any, now: float) -> list[Any]:
        out: list[Any] = []
        dod = states["dod"]["agents"]
        for key, pending in self.pool.finished():
            self.inflight.discard(key)
            if pending is None or (dod.get(key[0]) or {}).get("claim_seq") != key[1]:
                continue                         # a bug logged, or the claim ended: never the next claim's
            self.decided[key] = pending
            out.append(pending)
        for key in [k for k in self.decided if (dod.get(k[0]) or {}).get("claim_seq") != k[1]
                    or ((dod[k[0]].get("verdict") or {}).get("seq") or 0) > k[1]]:
            del self.decided[key]                # folded (or the claim ended)
        agents = snap.agents if snap is not None else {}
        launched = (states.get("plans") or {}).get("agents", {})
        for agent, a in dod.items():
            seq = a.get("claim_seq") or 0
            if not seq or a.get("class") != DICE_TERMINADO or (agent, seq) in self.inflight or (agent, seq) in self.decided:
                continue
            if ((a.get("verdict") or {}).get("seq") or 0) > seq:
                continue                         # judged already (by anyone)
            obs = agents.get(agent)
            if obs is None or obs.error or not self.takes(obs):
                continue
            self.inflight.add((agent, seq))
            self.pool.put((agent, seq, launched.get(agent), obs.path, obs.task, a.get("contract_sha256"),
                           a.get("launched_cwd") or obs.cwd or (os.path.dirname(obs.path) if obs.path else None)))
        return out

    # ---- the worker's side (``judge``, in the pool's threads) ---------------------------------
    def given(self, agent: str, launched: dict[str, Any] | None, path: str | None, title: str | None,
              pinned: str | None, cwd: str | None) -> tuple[dict[str, Any] | None, str]:
        """The document the verifier is given, or (None, why not)."""
        if launched is not None and launched.get("pin"):
            rec = launcher.load(launcher.pins_dir(self.db_path), launched["pin"])
            if rec is not None and rec.get("agent") == agent:
                return {"agent": agent, "task": rec["task"], "contract": rec["dod_contract"], "cwd": rec["cwd"]}, ""
        if path is None:
            return None, "no goal.json to read the contract from"
        try:
            doc = launcher.read_json(path, launcher.MAX_CONTRACT_BYTES * 4)
        except Exception:
            return None, "goal.json unreadable"
        if not isinstance(doc, dict):
            return None, "goal.json unreadable"
        contract = doc.get("dod_contract")
        digest = parse_contract(contract).digest
        if pinned and digest != pinned:
            return None, "contract changed since launch: not given to the verifier"
        return {"agent": agent, "task": title or "", "contract": contract, "cwd": cwd}, ""

    def judge(self, agent: str, seq: int, launched: dict[str, Any] | None, path: str | None,
              title: str | None, pinned: str | None, cwd: str | None) -> Pending:
        from watcher.runtime.isolated import Budget, run_isolated

        doc, why = self.given(agent, launched, path, title, pinned, cwd)
        verdict: dict[str, Any] | None = None
        if doc is None:
            verdict = {"verdict": "unevaluable", "evidence": [{"check": "contract", "says": why}]}
        else:
            data = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")
            run_in = doc["cwd"] if isinstance(doc.get("cwd"), str) and os.path.isdir(doc["cwd"]) else None
            for _attempt in range(2):
                r = run_isolated(self.argv, cwd=run_in, timeout=self.timeout, stdin=data,
                                 budget=Budget(out_bytes=MAX_OUT), running=self.running, isolate=self.isolate,
                                 read_only=self.read_only)
                if r.error_class is RunError.TIMEOUT:
                    verdict = {"verdict": "unevaluable",
                               "evidence": [{"check": "verifier", "says": f"no answer within {self.timeout:g}s"}]}
                    break
                if r.error_class in (RunError.NOT_FOUND, RunError.CANNOT_RUN):
                    verdict = {"verdict": "unevaluable", "evidence": [{"check": "verifier", "says": safe(r.error, 200)}]}
                    break
                got = answer(r.out) if r.error_class is None else None
                if got is not None:
                    verdict = got
                    break
            if verdict is None:
                verdict = {"verdict": "unevaluable", "evidence": [{"check": "verifier", "says": INVALID}]}
        name = self.name if not same_identity(self.name, agent) else self.name + "-of-fleetwatch"
        ev_text = "; ".join(f"{e['check']}: {e['says']}" for e in verdict["evidence"]) or verdict["verdict"]
        checks = [{"id": e["check"], "status": e.get("status") or {"met": "pass", "failed": "fail"}.get(
            verdict["verdict"], "unevaluable"), "says": e["says"]} for e in verdict["evidence"]]
        e = DodVerdict(agent=agent, verdict=verdict["verdict"], verifier=name, evidence=safe(ev_text, 600),
                       source="verifier", checks=checks)
        return Pending(e, id=f"verifier:{agent}:{seq}")

    def close(self, timeout: float = 2.0) -> None:
        self.pool.stop(self.running, timeout)
