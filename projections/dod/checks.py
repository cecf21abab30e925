"""Structured DoD contracts and the checker's decisions (pure: no process is run here).

A ``dod_contract`` in goal.json is either free text (a non-empty string) or a non-empty list of
checks::

    {"id": "tests", "kind": "cmd", "cmd": ["make", "test"], "expect": {"exit": 0}, "required": true}

- ``id``: non-empty string, unique in the contract. ``kind``: ``cmd`` | ``log`` | ``url`` |
  ``screenshot`` | any other word (only ``cmd`` can be run by fleetwatch; the others need a human
  or a verifier agent). ``required``: bool, default true.
- ``cmd`` checks: ``cmd`` a non-empty list of strings (argv, no shell; run in goal.json's ``cwd``);
  ``expect`` (default ``{"exit": 0}``) any of ``exit`` (int), ``stdout_gt`` / ``stdout_lt`` (a
  number: stdout, stripped, read as a number), ``stdout_eq`` (string, compared stripped),
  ``stdout_re`` (a regular expression searched in stdout). All given must hold.
  (``expected``, the seed's free-text field, is allowed on every kind and shown to humans.)

``parse_contract`` validates (a malformed contract makes the agent MAL_LANZADO with the reason) and
gives the digest the contract is pinned by: sha256 of the canonical JSON, or of the text.
``decide`` turns the per-check results into one verdict: ``failed`` if a required check failed;
else ``unevaluable`` if a required check could not be decided (not a ``cmd``, could not run,
timed out); else ``met``. A check that cannot run is never ``met``.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, NamedTuple

from projections.classes import DICE_TERMINADO

VERIFIER = "fleetwatch-checks"
EXPECT_KEYS = ("exit", "stdout_gt", "stdout_lt", "stdout_eq", "stdout_re")
MAX_CHECKS = 32
MAX_ARGV = 64
MAX_LINES = 3          # output lines kept as evidence per check
LINE_MAX = 120


class Contract(NamedTuple):
    checks: tuple[dict[str, Any], ...] | None   # None: free text
    digest: str | None                          # None: no contract
    length: int
    error: str | None                           # set: MAL_LANZADO with this reason


def _check_error(i: int, c: Any, seen: set[str]) -> str | None:
    where = f"dod_contract check {i + 1}"
    if not isinstance(c, dict):
        return f"{where} is not an object"
    cid = c.get("id")
    if not isinstance(cid, str) or not cid.strip():
        return f"{where}: id must be a non-empty string"
    if cid in seen:
        return f"{where}: duplicate id {cid[:40]!r}"
    seen.add(cid)
    kind = c.get("kind")
    if not isinstance(kind, str) or not kind.strip():
        return f"{where} ({cid[:40]}): kind must be a non-empty string"
    if "required" in c and not isinstance(c["required"], bool):
        return f"{where} ({cid[:40]}): required must be true or false"
    if kind != "cmd":
        return None
    argv = c.get("cmd")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
        return f"{where} ({cid[:40]}): cmd must be a non-empty list of strings"
    if len(argv) > MAX_ARGV:
        return f"{where} ({cid[:40]}): cmd has more than {MAX_ARGV} words"
    exp = c.get("expect", {"exit": 0})
    if not isinstance(exp, dict) or not exp:
        return f"{where} ({cid[:40]}): expect must be a non-empty object"
    for k, v in exp.items():
        if k not in EXPECT_KEYS:
            return f"{where} ({cid[:40]}): unknown expect key {k[:30]!r} (known: {', '.join(EXPECT_KEYS)})"
        if k == "exit" and (type(v) is not int):
            return f"{where} ({cid[:40]}): expect.exit must be an integer"
        if k in ("stdout_gt", "stdout_lt") and not (type(v) is int or (type(v) is float and math.isfinite(v))):
            return f"{where} ({cid[:40]}): expect.{k} must be a number"
        if k in ("stdout_eq", "stdout_re") and not isinstance(v, str):
            return f"{where} ({cid[:40]}): expect.{k} must be a string"
        if k == "stdout_re":
            try:
                re.compile(v)
            except (re.error, RecursionError, OverflowError) as e:  # 1,000 nested groups: RecursionError
                return f"{where} ({cid[:40]}): expect.stdout_re does not compile ({str(e) or type(e).__name__})"
    return None


def parse_contract(value: Any) -> Contract:
    """Validate goal.json's ``dod_contract`` (see the module docstring)."""
    if value is None or value == [] or isinstance(value, str) and not value.strip():
        return Contract(None, None, 0, None)   # no contract
    if isinstance(value, str):
        return Contract(None, hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest(), len(value), None)
    if not isinstance(value, list):
        return Contract(None, None, 0, f"dod_contract has the wrong type ({type(value).__name__})")
    if len(value) > MAX_CHECKS:
        return Contract(None, None, 0, f"dod_contract has more than {MAX_CHECKS} checks")
    seen: set[str] = set()
    for i, c in enumerate(value):
        err = _check_error(i, c, seen)
        if err:
            return Contract(None, None, 0, err)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)   # canonical
    return Contract(tuple(value), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), len(text), None)


def required(check: dict[str, Any]) -> bool:
    return check.get("required", True) is not False


def _number(text: str) -> float | None:
    try:
        v = float(text.strip())
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def compare(check: dict[str, Any], exit_code: int | None, stdout: str) -> tuple[bool, str]:
    """(passed, the comparison as text) of a ``cmd`` check that ran to its end."""
    exp = check.get("expect", {"exit": 0})
    parts, ok = [], True
    for k, v in exp.items():
        if k == "exit":
            good = exit_code == v
            parts.append(f"exit {exit_code} {'==' if good else '!='} {v}")
        elif k in ("stdout_gt", "stdout_lt"):
            n = _number(stdout)
            good = n is not None and (n > v if k == "stdout_gt" else n < v)
            op = ">" if k == "stdout_gt" else "<"
            parts.append(f"stdout {stdout.strip()[:20] if n is not None else 'not a number'} "
                         f"{op if good else 'not ' + op} {v}")
        elif k == "stdout_eq":
            good = stdout.strip() == v
            parts.append("stdout == expected" if good else "stdout != expected")
        else:
            good = re.search(v, stdout) is not None
            parts.append("stdout matches" if good else "stdout does not match")
        ok = ok and good
    return ok, "; ".join(parts)


def decide(results: list[dict[str, Any]]) -> str:
    """met | failed | unevaluable from per-check results (``status`` pass|fail|unevaluable|skipped
    and ``required``)."""
    req = [r for r in results if r["required"]]
    if any(r["status"] == "fail" for r in req):
        return "failed"
    if any(r["status"] != "pass" for r in req) or not req:
        return "unevaluable"
    return "met"


def evidence(results: list[dict[str, Any]], verdict: str) -> str:
    """One short line per check (what a push and ``status`` show)."""
    out = []
    for r in results:
        line = f"{r['id']}: {r['status']}"
        if r.get("comparison"):
            line += f" ({r['comparison']})"
        elif r.get("why"):
            line += f" ({r['why']})"
        if r.get("duration_s") is not None:
            line += f" in {r['duration_s']:.1f}s"
        out.append(line)
    head = {"met": "every required check passed", "failed": "a required check failed",
            "unevaluable": "needs a human or a verifier agent"}[verdict]
    return head + ": " + " · ".join(out)


def not_runnable(check: dict[str, Any]) -> dict[str, Any]:
    """The result of a check fleetwatch cannot run (not a ``cmd``)."""
    status = "unevaluable" if required(check) else "skipped"
    return {"id": check["id"], "kind": check["kind"], "required": required(check), "status": status,
            "why": f"{check['kind']} {check['id']!r}: needs a human or a verifier agent"}


def due(dod_agents: dict[str, Any], busy: set[tuple[str, int]]) -> list[tuple[str, int]]:
    """(agent, claim seq) of every open claim that has no checker verdict yet: the agent is in
    DICE_TERMINADO since ``claim_seq`` and the DoD's verdict (if any) is older than the claim or
    not the checker's. ``busy``: claims in flight (or just decided, not yet folded)."""
    out = []
    for agent, a in dod_agents.items():
        seq = a.get("claim_seq") or 0
        if not seq or a.get("class") != DICE_TERMINADO or (agent, seq) in busy:
            continue
        v = a.get("verdict") or {}
        if v.get("verifier") == VERIFIER and v.get("seq", 0) > seq:
            continue
        out.append((agent, seq))
    return out
