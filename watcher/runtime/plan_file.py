"""A plan file (``fleetwatch launch --plan FILE``), validated whole before anything is launched.

``{"plan": "p1", "max_parallel": 1, "tasks": [{"id", "task", "dod_contract", "deps", "cwd", "argv"}]}``
(``contract`` is taken for ``dod_contract``). Refused, naming the first problem (exit 2): not a
JSON object, a plan id or task id that is not a usable agent id (a task runs as the agent named
by its id), a duplicate task id, a task without a task text or without a valid non-empty
contract (the goal.json rules), a dep naming no task of the plan, a cycle of deps, a ``cwd`` that
is not an existing folder, an argv that is not a list of words, ``max_parallel`` not 1..1000.
``normalise`` gives the plan as it is kept (every default resolved: absolute folders, argv), so
the watcher launching a task later runs exactly what was validated.
"""
from __future__ import annotations

from typing import Any

from watcher.runtime.launcher import AGENT_RE, check_argv, check_contract, check_cwd, json_file, refuse

MAX_PLAN_BYTES = 4 * 1024 * 1024
MAX_TASKS = 200


def read(path: str) -> Any:
    return json_file(path, MAX_PLAN_BYTES, "the plan")


def normalise(doc: Any, default_cwd: str, default_argv: list[str]) -> dict[str, Any]:
    import re

    if not isinstance(doc, dict):
        raise refuse("the plan is not a JSON object")
    name = doc.get("plan")
    if not isinstance(name, str) or not re.match(AGENT_RE, name):
        raise refuse("plan: needs an id (letters, digits, - and _, 1-64)")
    mp = doc.get("max_parallel", 1)
    if type(mp) is not int or not 1 <= mp <= 1000:
        raise refuse("max_parallel must be an integer between 1 and 1000")
    tasks = doc.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise refuse("tasks: the plan needs a non-empty list of tasks")
    if len(tasks) > MAX_TASKS:
        raise refuse(f"tasks: more than {MAX_TASKS}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, t in enumerate(tasks):
        where = f"task {i + 1}"
        if not isinstance(t, dict):
            raise refuse(f"{where} is not an object")
        tid = t.get("id")
        if not isinstance(tid, str) or not re.match(AGENT_RE, tid):
            raise refuse(f"{where}: id must be a usable agent id (letters, digits, - and _, 1-64)")
        where = f"task {tid}"
        if tid in seen:
            raise refuse(f"duplicate task id {tid}")
        seen.add(tid)
        text = t.get("task")
        if not isinstance(text, str) or not text.strip():
            raise refuse(f"{where}: no task text")
        value = t.get("dod_contract", t.get("contract"))
        if value is None:
            raise refuse(f"{where}: no contract (dod_contract): no task is launched without knowing when it is done")
        check_contract(value, f"{where}: dod_contract")
        deps = t.get("deps", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise refuse(f"{where}: deps must be a list of task ids")
        argv = t.get("argv", default_argv)
        if not isinstance(argv, list):
            raise refuse(f"{where}: argv must be a list of words")
        try:
            check_argv(argv)
            cwd = check_cwd(t.get("cwd") if isinstance(t.get("cwd"), str) else default_cwd)
        except Exception as e:
            raise refuse(f"{where}: {e}") from None
        out.append({"id": tid, "task": text, "dod_contract": value, "deps": sorted(set(deps)), "cwd": cwd,
                    "argv": list(argv)})
    for t in out:
        for d in t["deps"]:
            if d not in seen:
                raise refuse(f"task {t['id']}: unknown dep {d!r}")
    cyc = cycle(out)
    if cyc:
        raise refuse("the deps have a cycle: " + " -> ".join(cyc))
    return {"plan": name, "max_parallel": mp, "tasks": out}


def cycle(tasks: list[dict[str, Any]]) -> list[str] | None:
    """A dependency cycle (its ids, first repeated at the end), or None."""
    deps = {t["id"]: t["deps"] for t in tasks}
    state: dict[str, int] = {}
    for root in deps:
        if state.get(root):
            continue
        stack = [(root, iter(deps[root]))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(deps[nxt])))
                path.append(nxt)
    return None


def recorded(plan: dict[str, Any], sha: str) -> Any:
    """The ``plan.recorded`` event of a normalised plan kept under ``sha``."""
    from events.types import PlanRecorded
    from projections.dod.checks import parse_contract

    return PlanRecorded(plan=plan["plan"], max_parallel=plan["max_parallel"], sha256=sha, tasks=[
        {"id": t["id"], "title": (t["task"].strip().splitlines() or [""])[0][:200], "deps": t["deps"],
         "contract_sha256": parse_contract(t["dod_contract"]).digest} for t in plan["tasks"]])


def spec_of(plan: dict[str, Any], tid: str, env: dict[str, str]) -> Any:
    from watcher.runtime.launcher import Spec

    t = next(t for t in plan["tasks"] if t["id"] == tid)
    return Spec(agent=tid, task=t["task"], contract=t["dod_contract"], cwd=t["cwd"], argv=list(t["argv"]),
                plan=plan["plan"], task_id=tid, env=env)


__all__ = ["cycle", "normalise", "read", "recorded", "spec_of"]
