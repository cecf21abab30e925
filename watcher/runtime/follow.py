"""``[launch] follow = true``: the watcher launches each plan's next tasks when their deps are
verified met, and stops a plan at a failed or unevaluable verdict (``plan.stopped``: pushed).

Invariants
- What to launch and stop is pure (``projections.plans.fold.judge`` over the log): never more than
  ``max_parallel`` of a plan live, only tasks whose every dep's agent has a ``met`` verdict.
- Never a task twice, also across a kill -9: the ``agent.launched`` event (id
  ``launch:<plan>:<task>``, idempotent) is committed first, and the window is opened only once
  that event is folded; a task with such an event is launched by nobody again. A kill -9
  between the two leaves a task recorded and never opened: the next watcher's first step opens
  each task the watcher recorded that the fleet never saw and that has no window (``_resume``).
- The task run is the one validated: the plan as kept beside the log (``plans/<sha256>.json``,
  refused when its content is not its name); a plan whose copy is gone is stopped, not guessed.
- Never in the tick's thread: goal.json, the pin of record and tmux run in one worker thread; a
  launch that fails stops its plan (``plan.stopped`` "launch-failed").
"""
from __future__ import annotations

import hashlib
import logging
import queue
import threading
from typing import Any

from events.log import Pending
from events.types import AgentLaunched, PlanStopped
from projections.classes import CERRADO
from projections.plans import fold as plans
from projections.text import safe
from watcher.runtime import launcher, plan_file

log = logging.getLogger("fleetwatch.follow")


class Follower:
    def __init__(self, cfg: Any, db_path: str) -> None:
        self.cfg, self.db_path = cfg, db_path
        self.socket, self.session = cfg.launch.socket, cfg.launch.session
        self.env = launcher.env_for(cfg, db_path)
        self.copies: dict[str, Any] = {}
        self.planned: dict[tuple[str, str], Any] = {}     # recorded, not yet folded
        self.resumed = False
        self.failed: queue.Queue = queue.Queue()
        self.jobs: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._work, name="fleetwatch-follow", daemon=True)
        self.thread.start()

    @classmethod
    def from_config(cls, cfg: Any, db_path: str) -> Follower | None:
        return cls(cfg, db_path) if cfg.launch.follow else None

    def _copy(self, sha: str) -> Any:
        if sha not in self.copies:
            self.copies[sha] = launcher.load(launcher.plans_dir(self.db_path), sha)
        return self.copies[sha]

    def step(self, states: dict[str, Any], snap: Any, now: float) -> list[Any]:
        st = states.get("plans")
        if st is None:
            return []
        out: list[Any] = []
        while True:
            try:
                plan, tid, why = self.failed.get_nowait()
            except queue.Empty:
                break
            out.append(Pending(PlanStopped(plan=plan, task=tid, agent=tid, verdict="launch-failed", reason=why),
                               id=f"plan-stopped:{plan}"))
        for key, spec in list(self.planned.items()):
            del self.planned[key]
            p = st["plans"].get(key[0])
            if p is not None and p["launched"].get(key[1]) == spec.agent:
                self.jobs.put(spec)              # its launch is in the log: open it now
        fleet = (states.get("fleet") or {}).get("agents", {})
        if not self.resumed:
            self.resumed = True
            self._resume(st, fleet)
        todo, stop = plans.judge(st, frozenset(self.planned))
        for plan, tid, agent, verdict in stop:
            out.append(Pending(PlanStopped(plan=plan, task=tid, agent=agent, verdict=verdict,
                                           reason=f"task {tid} was judged {verdict}"), id=f"plan-stopped:{plan}"))
        for plan, tid in todo:
            copy = self._copy(st["plans"][plan]["sha256"])
            if copy is None:
                out.append(Pending(PlanStopped(plan=plan, task=tid, verdict="launch-failed",
                                               reason="the plan's copy beside the log is missing or changed"),
                                   id=f"plan-stopped:{plan}"))
                continue
            rec = fleet.get(tid)
            if rec is not None and rec["class"] != CERRADO:
                continue                          # another agent of that id is live: wait for it
            spec = plan_file.spec_of(copy, tid, self.env)
            pin = hashlib.sha256(launcher._canon(launcher.pin_record(spec))).hexdigest()
            out.append(Pending(AgentLaunched(agent=tid, task=spec.title, contract_sha256=spec.digest, cwd=spec.cwd,
                                             target=f"={self.session}:{tid}", plan=plan, task_id=tid,
                                             socket=self.socket, by="watcher", pin=pin),
                               id=f"launch:{plan}:{tid}"))
            self.planned[(plan, tid)] = spec
        return out

    def _resume(self, st: dict[str, Any], fleet: dict[str, Any]) -> None:
        """Tasks a watcher recorded as launched, the fleet never saw: opened now if no window has them."""
        for aid, a in st["agents"].items():
            if a.get("by") != "watcher" or not a.get("plan") or fleet.get(aid) is not None:
                continue
            p = st["plans"].get(a["plan"])
            copy = self._copy(p["sha256"]) if p is not None else None
            if copy is not None and any(t["id"] == a.get("task_id") for t in copy["tasks"]):
                self.jobs.put(("resume", plan_file.spec_of(copy, a["task_id"], self.env)))

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                spec = self.jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(spec, tuple):
                spec = spec[1]
                if launcher.window_of(self.socket, self.session, spec.agent) is not None:
                    continue                     # it was opened before the stop
            try:
                launcher.start(spec, self.socket, self.session, self.cfg.launch.goals_dir, self.db_path)
                log.info("plan %s: launched %s", safe(spec.plan), safe(spec.agent))
            except Exception as e:
                log.warning("plan %s: launch of %s failed: %s", safe(spec.plan), safe(spec.agent), safe(str(e), 200))
                self.failed.put((spec.plan, spec.task_id, safe(str(e), 200)))

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self.thread.join(timeout)
