"""The DoD checker: when an agent claims done, run its contract's ``cmd`` checks and record one
``dod.verdict`` (verifier ``fleetwatch-checks``). On only with ``[dod] run_checks = true``.

Invariants
- Never in the tick's thread: ``step`` only plans (``projections.dod.checks.due``), hands claims to
  ``WORKERS`` worker threads and harvests what finished. A check that hangs holds one worker
  until its timeout; the others go on (at most ``WORKERS`` claims are checked at once, whatever
  the fleet's size: the rest wait in the queue).
- No check outlives the watcher: every group running is in ``self.running`` (and on disk,
  ``watcher.runtime.checkgroups``); ``close`` (a stop, a reload) kills them, and a checker
  starting kills those a watcher killed -9 left behind.
- A verdict is recorded only for the claim it was run for: one that finishes after its claim
  ended (the agent went back to work, maybe claimed again) is dropped, never taken as the
  verdict of the agent's next claim; a new claim is checked on its own.
- Each check is argv without a shell, run in goal.json's ``cwd`` (absolute; absent: the folder
  holding goal.json) through ``watcher.runtime.isolated.run_isolated``: its own PID namespace
  (it cannot see or signal the watcher), its own process group killed whole at ``check_timeout``
  or at ``check_max_bytes`` of output, no file beyond ``check_max_file_bytes``; stderr never kept.
- A claim's checks are recorded as started (``dod.check_started``) before they run. A claim
  started and never decided, found by a checker that did not start it, stopped the watcher
  (or the watcher stopped while it ran): its verdict is ``unevaluable: it stopped the watcher``
  and it is never run again (a check that kills its parent would otherwise kill every start).
- A verdict reached is never thrown away because it could not be written (a full disk): the
  watcher keeps it in memory and appends it with its next commit (``watcher.runtime.loop``
  keeps ``checks:`` ids), and the checker never runs that claim again meanwhile (``decided``).
- The contract is pinned at launch: the dod projection keeps the digest first seen; a claim whose
  current contract differs is ``unevaluable: contract changed since launch`` without running
  anything. A ``met`` needs every required check to pass (``projections.dod.checks.decide``).
- Exactly one verdict per claim: the event id is ``checks:<agent>:<claim seq>`` (an idempotent
  append), and a claim with a checker verdict newer than it is never run again.
- The folder is pinned too (``Checker.pins``, in memory): a claim whose work dir differs from
  the one this checker first saw for the agent is ``unevaluable: cwd changed`` without running
  anything. (Not across a restart: the log does not record ``cwd``; a durable pin belongs with
  the contract digest in ``watcher.sources.parse`` / ``projections.dod.fold``.)
- No comparison can hold the watcher: ``stdout_re`` is searched in a child process killed at
  ``REGEX_TIMEOUT`` (``search_bounded``; no answer: ``unevaluable``), never in this process.
- Evidence is what ran, not what the agent wrote: exit code, duration, the comparison and a
  digest of stdout; its last lines (short, escaped) only with ``[dod] check_output_lines`` (a
  test's output can hold its secrets, and a verdict is forwarded to the hub); never the ``dod``
  text.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import time
from typing import Any, NamedTuple

from events.log import Pending
from events.schema import ORPHAN_SUFFIXES
from events.types import DodCheckStarted, DodVerdict
from projections.dod import checks as dod_checks
from projections.dod.fold import judged
from projections.text import safe
from watcher.config import xdg
from watcher.runtime.isolated import Budget, isolation, run_isolated
from watcher.runtime.workers import Pool, ledgered
from watcher.sources.command import RunError, Running, run_bounded

log = logging.getLogger("fleetwatch.checker")


WORKERS = 4   # claims checked at once
PIN_PRUNE = 1000      # steps between forgetting the folders of agents the dod state forgot
REGEX_TIMEOUT = 10.0   # seconds a stdout_re search may take (at most the check's timeout)
STOPPED = "it stopped the watcher"
_SEARCH = ("import re, sys\n"
           "try:\n"
           "    m = re.search(sys.argv[1], open(sys.argv[2], 'rb').read().decode('utf-8', 'replace'))\n"
           "except BaseException:\n"
           "    sys.exit(3)\n"
           "sys.exit(0 if m else 1)\n")


def search_bounded(pattern: str, out: bytes, timeout: float, running: Running | None = None) -> bool | None:
    """``re.search(pattern, out decoded)`` in a child process killed at ``timeout``: a pattern
    that backtracks without end on a check's output (``^(a+)+$`` on 40 a's and a !) holds the
    GIL inside the regex engine, so in the watcher it would freeze every thread, the tick and
    SIGTERM included. True / False; None when it gave no answer in time (or could not run)."""
    try:
        fd, path = tempfile.mkstemp(prefix="fleetwatch-re-")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(out)
        r = run_bounded([sys.executable, "-I", "-S", "-c", _SEARCH, pattern, path], timeout, 64, running=running)
    except (OSError, ValueError):
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if r.exit_code is None or r.error_class not in (None, RunError.EXIT):
        return None
    return {0: True, 1: False}.get(r.exit_code)


class Limits(NamedTuple):
    """What one check may take: seconds, stdout bytes, bytes of any file it writes, the
    isolation asked for (``[dod] check_isolation``), the stdout lines kept as evidence, the
    folders it may not write (the log's and the watcher's state)."""

    timeout: float
    max_bytes: int
    file_bytes: int | None = None
    isolate: str = "auto"
    lines: int = 0
    read_only: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: Any, db_path: str | None = None) -> Limits:
        d = cfg.dod
        return cls(cfg.dur("dod.check_timeout"), d.check_max_bytes, d.check_max_file_bytes or None,
                   d.check_isolation, min(d.check_output_lines, 20), kept_from_checks(db_path))


def kept_from_checks(db_path: str | None) -> tuple[str, ...]:
    """What a check or a verifier may not write: the log's folder and its files (the files alone
    where the folder holds the home folder: ``isolated.protected``) and the watcher's state."""
    if not db_path:
        return (xdg("state"),)
    db = os.path.abspath(db_path)
    return (os.path.dirname(db), db, *(db + s for s in ORPHAN_SUFFIXES), xdg("state"))


def without_lines(ev: DodVerdict) -> DodVerdict:
    """``ev`` with no check's output lines (what is stored unless ``check_output_lines``)."""
    import msgspec

    return msgspec.structs.replace(ev, checks=[{k: v for k, v in c.items() if k != "lines"} for c in ev.checks])


def run_check(check: dict[str, Any], cwd: str | None, timeout: float | Limits, max_bytes: int = 0,
              running: Running | None = None) -> dict[str, Any]:
    """Run one check; its result (``status`` pass | fail | unevaluable | skipped). ``timeout``: a
    :class:`Limits`, or seconds with ``max_bytes`` (no file budget, last lines kept)."""
    lim = timeout if isinstance(timeout, Limits) else Limits(timeout, max_bytes, lines=dod_checks.MAX_LINES)
    timeout = lim.timeout
    if check.get("kind") != "cmd":
        return dod_checks.not_runnable(check)
    base = {"id": check["id"], "kind": "cmd", "required": dod_checks.required(check)}
    if cwd is not None and not os.path.isabs(cwd):   # relative to what? never the watcher's own folder
        return {**base, "status": "unevaluable", "why": "cwd must be an absolute path"}
    if cwd is not None and not os.path.isdir(cwd):
        return {**base, "status": "unevaluable", "why": "cwd is not a folder"}
    t0 = time.monotonic()
    r = run_isolated(list(check["cmd"]), cwd, timeout, None, Budget(lim.max_bytes, lim.file_bytes),
                     running=running, isolate=lim.isolate, read_only=lim.read_only)
    dur = round(time.monotonic() - t0, 3)
    res = {**base, "duration_s": dur, "exit": r.exit_code}
    if r.error_class in (RunError.TIMEOUT, RunError.TOO_LARGE, RunError.NOT_FOUND, RunError.CANNOT_RUN,
                         RunError.SIGNAL):
        return {**res, "status": "unevaluable", "why": r.error}
    out = r.out or b""
    text = out.decode("utf-8", "replace")
    exp = check.get("expect", {"exit": 0})
    matched = None
    if "stdout_re" in exp:   # never searched here: a backtracking pattern would hold the GIL for ever
        matched = search_bounded(exp["stdout_re"], out, min(timeout, REGEX_TIMEOUT), running)
        if matched is None:
            return {**res, "status": "unevaluable",
                    "why": f"stdout_re: no answer within {min(timeout, REGEX_TIMEOUT):g}s (a backtracking pattern?)"}
        exp = {k: v for k, v in exp.items() if k != "stdout_re"}
    ok, comparison = dod_checks.compare({**check, "expect": exp}, r.exit_code if r.exit_code is not None else 0, text)
    if matched is not None:
        ok = ok and matched
        comparison = "; ".join(x for x in (comparison, "stdout matches" if matched else "stdout does not match") if x)
    res = {**res, "status": "pass" if ok else "fail", "comparison": comparison,
           "digest": hashlib.sha256(out).hexdigest()[:16]}
    if lim.lines:   # opt-in: a test's output can hold its secrets
        res["lines"] = [safe(ln, dod_checks.LINE_MAX) for ln in text.strip().splitlines()[-lim.lines:]]
    return res


def refused(checks: list[dict[str, Any]] | None, digest: str | None, pinned: str | None) -> str:
    """Why a claim's checks are not run at all ("" : they are)."""
    if checks is None:
        return "the contract is free text: needs a human or a verifier agent"
    if pinned is not None and digest != pinned:
        return "contract changed since launch: checks refused"
    return ""


def verdict_for(agent: str, claim_seq: int, checks: list[dict[str, Any]] | None, cwd: str | None,
                digest: str | None, pinned: str | None, timeout: float | Limits, max_bytes: int = 0,
                running: Running | None = None) -> Pending:
    """Run (or refuse) a claim's checks; the verdict to append."""
    why = refused(checks, digest, pinned)
    results: list[dict[str, Any]] = []
    if why:
        verdict, ev = "unevaluable", why
    else:
        results = [run_check(c, cwd, timeout, max_bytes, running) for c in checks or ()]
        verdict = dod_checks.decide(results)
        ev = dod_checks.evidence(results, verdict)
    e = DodVerdict(agent=agent, verdict=verdict, verifier=dod_checks.VERIFIER, evidence=safe(ev, 600),
                   source="checks", checks=results)
    return Pending(e, id=f"checks:{agent}:{claim_seq}")


def stopped_watcher(agent: str, claim_seq: int) -> Pending:
    """The verdict of a claim whose checks were started and never decided: the watcher stopped
    while they ran (they killed it, or it was stopped): never run again."""
    e = DodVerdict(agent=agent, verdict="unevaluable", verifier=dod_checks.VERIFIER,
                   evidence=f"needs a human or a verifier agent: {STOPPED} (its checks were running when the "
                            "watcher stopped; they are not run again)", source="checks", checks=[])
    return Pending(e, id=f"checks:{agent}:{claim_seq}")


def moved(agent: str, claim_seq: int, pinned: str | None, now: str | None) -> Pending:
    """The verdict of a claim whose checks would run in another folder than at first sight."""
    ev = (f"cwd changed since the watcher first saw the agent ({safe(pinned or '-', 120)} -> "
          f"{safe(now or '-', 120)}): checks refused")
    e = DodVerdict(agent=agent, verdict="unevaluable", verifier=dod_checks.VERIFIER,
                   evidence="needs a human or a verifier agent: " + ev, source="checks", checks=[])
    return Pending(e, id=f"checks:{agent}:{claim_seq}")


def _settled(a: dict[str, Any] | None, seq: int) -> bool:
    """The claim ``seq`` has ended, or has a checker verdict in the dod state."""
    if not a or a.get("claim_seq") != seq:
        return True
    v = a.get("verdict") or {}
    return v.get("verifier") == dod_checks.VERIFIER and v.get("seq", 0) > seq


def work_dir(obs: Any) -> str | None:
    """Where an agent's checks run: goal.json's ``cwd``, else the folder holding its goal.json."""
    if obs.cwd:
        return obs.cwd
    return os.path.dirname(obs.path) if obs.path else None


class Checker:
    """``WORKERS`` worker threads; ``step`` is called by the watcher each tick (after its commits).
    ``groups``: the folder recording the check groups running (default: the state folder's)."""

    defer: Any = None   # obs -> bool: claims another judge takes (the verifier: watcher.runtime.verifier)

    def __init__(self, timeout: float | Limits, max_bytes: int = 0, groups: str | None = None) -> None:
        self.limits = timeout if isinstance(timeout, Limits) else Limits(timeout, max_bytes,
                                                                         lines=dod_checks.MAX_LINES)
        self.timeout, self.max_bytes = self.limits.timeout, self.limits.max_bytes
        self.iso = isolation(self.limits.isolate)
        if self.iso.kind == "none":
            log.warning("checks run without isolation (%s): a check can signal the watcher; a stop it causes "
                        "is caught at the next start", self.iso.why)
        self.inflight: set[tuple[str, int]] = set()
        self.mine: set[tuple[str, int]] = set()    # claims this checker recorded as started
        self.decided: dict[tuple[str, int], Pending] = {}   # verdicts handed over, until folded
        self._dod: dict[str, Any] = {}          # the dod state's agents as of the last step
        self.pins: dict[str, str | None] = {}     # agent -> where its checks run, at first sight
        self._steps = 0
        self.running = ledgered(groups or os.path.join(xdg("state"), "checks-running"))
        self.pool = Pool("fleetwatch-checker", WORKERS, self._check, "checks", log)

    @classmethod
    def from_config(cls, cfg: Any, db_path: str | None = None) -> Checker | None:
        if not cfg.dod.run_checks:
            return None
        return cls(Limits.from_config(cfg, db_path))

    def take_over(self, old: Checker) -> None:
        """A reload: the claims the old checker started (and its ``close`` killed) are this one's
        to run again, and what it decided stays decided."""
        self.mine |= old.mine
        self.decided.update(old.decided)
        self.pins.update(old.pins)

    def _check(self, agent: str, claim_seq: int, checks: list[dict[str, Any]] | None, cwd: str | None,
               digest: str | None, pinned: str | None) -> Pending:
        """One job of the pool (what ``step`` puts): its claim's verdict under this checker's limits."""
        return verdict_for(agent, claim_seq, checks, cwd, digest, pinned, self.limits, 0, self.running)

    def step(self, states: dict[str, Any], snap: Any, now: float) -> list[Any]:
        """Hand back finished verdicts and ``dod.check_started`` records (the watcher appends and
        folds them right away, so by the next step the dod state shows them), and hand claims
        recorded as started to the workers."""
        out: list[Any] = []
        dod = self._dod = states["dod"]["agents"]
        for key, pending in self.pool.finished():
            self.inflight.discard(key)
            if pending is None:
                continue
            if (dod.get(key[0]) or {}).get("claim_seq") != key[1]:
                log.info("checks for %s: dropped, the claim they were run for has ended", safe(key[0]))
                continue                       # never the verdict of a later claim
            self._decide(key, pending, out)
        self._forget(dod)
        agents = snap.agents if snap is not None else {}
        self._pin(agents, dod)
        for agent, seq in dod_checks.due(dod, self.inflight | self.decided.keys()):
            key, a, obs = (agent, seq), dod[agent], agents.get(agent)
            started = a.get("check_started") == seq
            if started and key not in self.mine:   # started by a watcher that stopped before deciding
                log.warning("checks for %s were running when the watcher stopped: unevaluable, not run again",
                            safe(agent))
                self._decide(key, stopped_watcher(agent, seq), out)
                continue
            if obs is None or (self.defer is not None and self.defer(obs)):
                continue
            where, pinned_at, pinned = work_dir(obs), a.get("launched_cwd") or self.pins.get(agent), a.get("contract_sha256")
            if pinned_at is not None and where != pinned_at:   # the checks would run somewhere else
                self._decide(key, moved(agent, seq, pinned_at, where), out)
            elif refused(obs.checks, obs.contract_sha256, pinned):   # nothing runs: decided here
                self._decide(key, verdict_for(agent, seq, obs.checks, where, obs.contract_sha256, pinned,
                                              self.limits), out)
            elif not started:                  # recorded first; run once the record is folded
                self.mine.add(key)
                out.append(Pending(DodCheckStarted(agent=agent, claim_seq=seq, isolation=self.iso.kind),
                                   id=f"checks-started:{agent}:{seq}"))
            else:
                self.inflight.add(key)
                self.pool.put((agent, seq, obs.checks, where, obs.contract_sha256, pinned))
        return out

    def _decide(self, key: tuple[str, int], pending: Pending, out: list[Any]) -> None:
        self.decided[key] = pending            # never run again, even while it cannot be written
        if pending.event.verdict == "unevaluable" and judged(self._dod.get(key[0])):
            log.info("checks for %s: unevaluable, not recorded over a person's or a verifier's verdict",
                     safe(key[0]))             # a non-answer never replaces an answer (dod.judged)
            return
        out.append(pending)

    def _forget(self, dod: dict[str, Any]) -> None:
        """Drop what the dod state has taken over: a verdict folded, a claim ended."""
        for keys in (self.decided, self.mine):
            gone = [k for k in keys if _settled(dod.get(k[0]), k[1])]
            for k in gone:
                if isinstance(keys, dict):
                    del keys[k]
                else:
                    keys.discard(k)

    def _pin(self, agents: dict[str, Any], dod: dict[str, Any]) -> None:
        """Where each agent's checks run, as first seen by this checker (``pins``): goal.json's
        ``cwd`` is the agent's to write, and a contract pinned at launch but run in a folder the
        agent picked at claim time (one where ``make test`` is ``true``) proves nothing. Agents
        the dod state has forgotten (pruned long after they closed) are forgotten every
        ``PIN_PRUNE`` steps, so a relaunch under the same id is pinned afresh."""
        if not agents.keys() <= self.pins.keys():
            for a in agents.keys() - self.pins.keys():
                self.pins[a] = work_dir(agents[a])
        self._steps += 1
        if self._steps % PIN_PRUNE == 0:
            for a in [a for a in self.pins if a not in dod and a not in agents]:
                del self.pins[a]

    def close(self, timeout: float = 2.0) -> None:
        """Stop the workers and kill every check still running (a claim checked but not recorded
        is checked again by the next checker)."""
        self.pool.stop(self.running, timeout)

