"""What ``fleetwatch launch`` does once its arguments are checked (watcher/cli/launch.py): one
agent (``launch_one``) or a plan (``launch_plan``).

``launch --plan FILE [--dry-run]``: validate a plan whole, record it, launch its
runnable tasks (every dep verified met, at most ``max_parallel`` live).

The plan is kept beside the log (``plans/<sha256>.json``, the normalised plan: folders and argv
resolved) and recorded once (``plan.recorded``; the same plan again records nothing, a different
plan under a recorded id is refused). Each task is launched as the agent named by its id
(``launch_one``), its ``agent.launched`` event carrying the plan and task;
a task with such an event is never launched again (``projections.plans.fold.judge``).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from projections.classes import CERRADO
from projections.text import safe


def _live(states: dict[str, Any], cfg: Any, agent: str) -> str | None:
    """Why ``agent`` counts as live (its class, or its window), or None."""
    from watcher.runtime.launcher import window_of

    rec = (states.get("fleet") or {}).get("agents", {}).get(agent)
    cls = rec["class"] if rec is not None else None
    if cls is not None and cls != CERRADO:
        return f"agent {agent} is live ({cls})"
    if window_of(cfg.launch.socket, cfg.launch.session, agent) is not None:
        return f"agent {agent} has a window on tmux socket {cfg.launch.socket}"
    return None


def _states(config: str | None, db: str | None) -> dict[str, Any]:
    from watcher.cli.status import load_states

    return load_states(config, db, ("fleet", "dod", "plans"))[1]


def _append(cfg: Any, path: str, db: str | None, events: list[Any]) -> list[int]:
    from watcher.cli.plain import open_at

    elog = open_at(cfg, path, db, create=True)
    try:
        return elog.append(events, time.time())
    finally:
        elog.close()


def launch_one(cfg: Any, path: str, db: str | None, spec: Any, *, by: str = "cli", pending_id: str | None = None) -> dict[str, Any]:
    """Open the window (goal.json and pin first), then record ``agent.launched``; a failed record
    closes the window and removes goal.json again."""
    import os

    from events.log import Pending
    from events.types import AgentLaunched
    from watcher.runtime import launcher

    target, pin = launcher.start(spec, cfg.launch.socket, cfg.launch.session, cfg.launch.goals_dir, path)
    ev = AgentLaunched(agent=spec.agent, task=spec.title, contract_sha256=spec.digest, cwd=spec.cwd,
                       target=target, plan=spec.plan, task_id=spec.task_id, socket=cfg.launch.socket, by=by,
                       pin=pin)
    try:
        seq = _append(cfg, path, db, [Pending(ev, id=pending_id)])[0]
    except BaseException:
        launcher.kill_window(cfg.launch.socket, target)
        try:
            os.unlink(launcher.goal_path(cfg.launch.goals_dir, spec.agent))
        except OSError:
            pass
        raise
    return {"agent": spec.agent, "target": target, "seq": seq, "contract_sha256": spec.digest, "cwd": spec.cwd}


def launch_plan(cfg: Any, path: str, db: str | None, file: str, dry_run: bool, as_json: bool,
                states: dict[str, Any]) -> None:
    from events.log import Pending
    from projections.plans import fold as plans
    from watcher.runtime import launcher, plan_file

    doc = plan_file.read(file)
    plan = plan_file.normalise(doc, os.getcwd(), list(cfg.launch.argv))
    name = plan["plan"]
    st = states.get("plans") or plans.initial()
    old = st["plans"].get(name)
    sha = hashlib.sha256(launcher._canon(plan)).hexdigest()
    if old is not None and old["sha256"] != sha:
        raise launcher.refuse(f"plan {name} is already recorded with other content", "give the new plan another id")
    mine = set((old or {}).get("launched", {}).values())
    for t in plan["tasks"]:
        if t["id"] in mine:
            continue
        why = _live(states, cfg, t["id"])
        if why:
            raise launcher.refuse(f"task {t['id']}: {why}", "a plan's task runs as the agent named by its id")
    # what would run now: the plan folded into a copy of the state
    trial = {**st, "plans": dict(st["plans"])}
    if old is None:
        trial["plans"][name] = {"max_parallel": plan["max_parallel"], "sha256": sha, "seq": 0, "at": "",
                                "tasks": [dict(t) for t in plan_file.recorded(plan, sha).tasks],
                                "launched": {}, "stopped": None}
    due, _stop = plans.judge(trial)
    now = [tid for p, tid in due if p == name]
    if dry_run:
        out = {"plan": name, "max_parallel": plan["max_parallel"], "tasks": [t["id"] for t in plan["tasks"]],
               "would_launch": now, "recorded": old is not None}
        print(json.dumps(out) if as_json else
              f"plan {safe(name)} is valid ({len(plan['tasks'])} tasks, max_parallel {plan['max_parallel']}); "
              f"would launch now: {', '.join(safe(t) for t in now) or 'nothing'}")
        return
    if old is None:
        try:
            launcher.store(launcher.plans_dir(path), plan)
        except OSError as e:
            raise launcher.refuse(f"cannot keep the plan beside the log: {e.strerror or e}",
                                  path=launcher.plans_dir(path)) from None
        _append(cfg, path, db, [Pending(plan_file.recorded(plan, sha), id=f"plan:{name}:{sha[:32]}")])
    env = launcher.env_for(cfg, db)
    got = [launch_one(cfg, path, db, plan_file.spec_of(plan, tid, env), pending_id=f"launch:{name}:{tid}")
           for tid in now]
    if as_json:
        print(json.dumps({"plan": name, "launched": got}))
    else:
        print(f"plan {safe(name)} recorded ({len(plan['tasks'])} tasks); launched: "
              f"{', '.join(safe(g['agent']) for g in got) or 'nothing yet'}")
