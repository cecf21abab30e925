"""Acting on verdicts (``[dod] on_met``, ``on_failed``): close a verified agent, nudge one whose
claim failed, escalate what nobody could judge.

Invariants
- What is due is pure (``projections.plans.fold.due_actions`` over the log's verdicts not yet acted
  on): met + ``close`` -> ``close``; failed + ``nudge`` -> ``nudge`` (never while the agent is
  RECLAMA); unevaluable -> ``escalate`` (the urgent push is the notify projection's; never closed).
  A human's ``fleetwatch verdict`` is a verdict like any other.
- Recorded first, done after: the ``dod.acted`` event (id ``acted:<agent>:<verdict seq>``) is
  committed before the window is touched, and the work is handed to the worker only once that
  event is folded. So a nudge is sent at most once per verdict, also across a kill -9; a close
  recorded and not done (a kill -9 in between) is done by the next watcher at once (``closing`` in
  the projection: the agent is not CERRADO yet), and again every ``RECLOSE_S`` while it is not.
- Never in the tick's thread: tmux and ``on_met`` argv run in one worker thread, each call bounded.
- A close sets goal.json ``ended`` (and state idle) and kills the agent's window (or runs the
  ``on_met`` argv): the fleet sees it CERRADO by itself, and :func:`projections.plans.fold.amend`
  names that CERRADO "verified met".
- The nudge is one line pasted into the agent's pane, then Enter (``launcher.send_text``), naming the failed
  checks and what was expected (the verdict's evidence, escaped); the pane activity it causes is
  not the agent's (``marks``, read by the tmux source as the notifier's nudges are). The refused
  claim is withdrawn first (goal.json phase ``haciendo``): the agent's next stop is not a new
  claim, only its next ``fleetwatch claim done`` is (no nudge, verdict, nudge loop).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from events.log import Pending
from events.types import DodActed
from projections.classes import CERRADO
from projections.plans import fold as plans
from projections.text import safe
from watcher.runtime import launcher

log = logging.getLogger("fleetwatch.actions")

RECLOSE_S = 30.0
ARGV_TIMEOUT = 60.0


def nudge_text(v: dict[str, Any]) -> str:
    failed = ", ".join(v.get("failed") or []) or "see the evidence"
    return safe(f"fleetwatch: your done claim was judged FAILED by {v.get('verifier')}. Failed checks: {failed}. "
                f"What was expected and seen: {v.get('evidence') or '-'}. Fix it, then run `fleetwatch claim done` "
                f"again.", 900)


class Actor:
    def __init__(self, cfg: Any) -> None:
        self.on_met = "close" if isinstance(cfg.dod.on_met, list) else cfg.dod.on_met
        self.met_argv: list[str] | None = list(cfg.dod.on_met) if isinstance(cfg.dod.on_met, list) else None
        self.on_failed = cfg.dod.on_failed
        self.socket, self.session, self.goals_dir = cfg.launch.socket, cfg.launch.session, cfg.launch.goals_dir
        self.tmux_socket = next((s.socket for s in cfg.sources if s.kind == "tmux" and s.socket), self.socket)
        self.planned: dict[str, tuple[str, int, dict[str, Any]]] = {}   # agent -> recorded, not yet folded
        self.reclosed: dict[str, float] = {}
        self._marks: dict[str, tuple[float, float]] = {}
        self._seen: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.jobs: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._work, name="fleetwatch-actions", daemon=True)
        self.thread.start()

    @classmethod
    def from_config(cls, cfg: Any) -> Actor | None:
        return cls(cfg)

    def marks(self) -> dict[str, tuple[float, float]]:
        with self._lock:
            return dict(self._marks)

    def step(self, states: dict[str, Any], snap: Any, now: float) -> list[Any]:
        st = states.get("plans")
        self._seen = snap.agents if snap is not None else {}
        if st is None:
            return []
        fleet = (states.get("fleet") or {}).get("agents", {})

        def cls(aid: str) -> Any:
            r = fleet.get(aid)
            return r["class"] if r is not None else None

        for aid, (action, seq, v) in list(self.planned.items()):   # recorded last tick: do it now
            del self.planned[aid]
            if aid in st["todo"]:
                continue        # not committed (or a newer verdict came): decided again below
            if action in ("close", "nudge"):
                self.jobs.put((action, aid, v, self._where(st, fleet, aid)))
                if action == "close":
                    self.reclosed[aid] = time.monotonic()
        out: list[Any] = []
        for aid, action, v in plans.due_actions(st, cls, self.on_met, self.on_failed, frozenset(self.planned)):
            detail = ", ".join(v.get("failed") or [])[:300] if action == "nudge" else ""
            out.append(Pending(DodActed(agent=aid, action=action, verdict_seq=v["seq"], verdict=v["verdict"],
                                        verifier=v["verifier"], detail=detail), id=f"acted:{aid}:{v['seq']}"))
            self.planned[aid] = (action, v["seq"], v)
        mono = time.monotonic()
        for aid, (_, closed) in st["closing"].items():   # a close recorded, not seen done (a kill -9 between)
            if not closed and aid not in self.planned and cls(aid) != CERRADO \
                    and mono - self.reclosed.get(aid, -RECLOSE_S) >= RECLOSE_S:   # this process's: again after RECLOSE_S
                self.jobs.put(("close", aid, {}, self._where(st, fleet, aid)))
                self.reclosed[aid] = mono
        return out

    def _where(self, st: dict[str, Any], fleet: dict[str, Any], aid: str) -> tuple[str, str, str | None]:
        """(socket, recorded target, goal.json path) of an agent's window."""
        rec = st["agents"].get(aid)
        if rec is not None:
            return rec.get("socket") or self.socket, rec.get("target") or "", launcher.goal_path(self.goals_dir, aid)
        f, obs = fleet.get(aid), self._seen.get(aid)   # not launched here: its goal.json as the sources saw it
        return self.tmux_socket, (f["target"] if f is not None else None) or "", getattr(obs, "path", None)

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                action, aid, v, where = self.jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                if action == "close":
                    self._close(aid, *where)
                else:
                    self._nudge(aid, v, *where)
            except Exception:
                log.exception("%s of %s failed", action, safe(aid))

    def _target(self, socket: str, recorded: str, aid: str) -> str:
        return launcher.window_of(socket, self.session, aid) or recorded

    def _close(self, aid: str, socket: str, recorded: str, goal: str | None) -> None:
        from watcher.hook.goalfile import HookError, update_goal

        if goal is not None:
            try:
                update_goal(goal, lambda d: None if d is None else {**d, "ended": True, "state": "idle"}, create=False)
            except (HookError, OSError) as e:
                log.warning("close of %s: goal.json not marked ended: %s", safe(aid), safe(str(e), 200))
        target = self._target(socket, recorded, aid)
        if self.met_argv is not None:
            from watcher.sources.command import run_bounded

            argv = [a.replace("{agent}", aid).replace("{target}", target) for a in self.met_argv]
            r = run_bounded(argv, ARGV_TIMEOUT, 65536)
            ok = r.error_class is None
        else:
            ok = bool(target) and launcher.kill_window(socket, target)
        log.info("close of %s (%s): %s", safe(aid), safe(target or "-"), "done" if ok else "failed")

    def _nudge(self, aid: str, v: dict[str, Any], socket: str, recorded: str, goal: str | None) -> None:
        from watcher.hook.goalfile import HookError, update_goal

        target = self._target(socket, recorded, aid)
        if not target:
            log.warning("nudge of %s: no window", safe(aid))
            return
        if goal is not None:
            try:
                update_goal(goal, lambda d: {**d, "phase": "haciendo"} if d and d.get("phase") in ("hecho", "done")
                            else None, create=False)
            except (HookError, OSError) as e:
                log.warning("nudge of %s: claim not withdrawn in goal.json: %s", safe(aid), safe(str(e), 200))
        start = time.time()
        with self._lock:
            self._marks[aid] = (start, float("inf"))
        try:
            ok = launcher.send_text(socket, target, nudge_text(v))
        finally:
            with self._lock:
                self._marks[aid] = (start, time.time())
        log.info("nudge of %s: %s", safe(aid), "sent" if ok else "failed")

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self.thread.join(timeout)
