"""A seeded churn generator for drills and benchmarks: a fleet folder whose agents change state
and phase, whose files get corrupted and repaired, whose agents appear and leave, and whose runs
advance their steps. Every write of a *valid* document is atomic (tmp + rename, as the hook
does); corruption is written in place, the way a crashed or careless writer leaves a file.

``expected()`` gives what the watcher must end with: the classification of each final file
(``projections.fleet.fold.classify`` on ``watcher.sources.parse.parse_goal``) and each run's final
step statuses.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

STATES = ("busy", "idle", "waiting")
PHASES = ("haciendo", "testeando", "hecho", "preguntando", "bloqueado", "working", "done")
STEP_ORDER = ("facts", "audit", "analyze", "apply", "validate", "deploy", "upload_intent",
              "upload_confirmed", "ledger", "launch_intent", "launch_confirmed", "notify")
HUGE_STALL = 10_000 * 86400.0   # time alone never changes a class in the drills
CORRUPTIONS = (
    b'{"agent": "X", "state": ',            # truncated (a half-written file)
    b"\x00\xff garbage \xfe",               # not JSON
    b"[1, 2, 3]",                           # not an object
    b"",                                    # empty
    b'{"agent": "X", "state": "sleeping", "dod_contract": "c"}',  # unknown state
    b'{"agent": "X", "state": "busy"}',     # no dod_contract
)


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def goal_doc(agent: str, rng: random.Random, t: float) -> dict[str, Any]:
    return {"agent": agent, "task": f"task of {agent}", "state": rng.choice(STATES),
            "phase": rng.choice(PHASES), "dod": "private session text, never logged",
            "dod_contract": f"pytest passes for {agent}", "dod_status": "pending", "last_activity": t}


class Churn:
    """``step()`` applies one random change; ``steps(n)``; ``expected(now)`` the final truth."""

    def __init__(self, root: Path, seed: int, *, agents: int = 20, runs: int = 3, t0: float = 1_800_000_000.0,
                 steps_root: Path | None = None, p_appear: float = 0.10, p_leave: float = 0.07,
                 p_corrupt: float = 0.13):
        self.root = Path(root)
        self.p = (p_appear, p_leave, p_corrupt)   # chances per step (the rest: a state/phase change)
        self.steps_root = Path(steps_root) if steps_root else None
        self.rng = random.Random(seed)
        self.t = t0
        self.next_id = 0
        self.live: set[str] = set()
        self.runs: dict[str, int] = {}      # run -> index of the next step transition
        self.step_at: dict[str, dict[str, tuple[str, str]]] = {}
        self.counts: dict[str, int] = {}
        for _ in range(agents):
            self._add()
        if self.steps_root is not None:
            for i in range(runs):
                self._new_run(i)

    # ---- agents --------------------------------------------------------------------------
    def path(self, agent: str) -> Path:
        return self.root / agent / "goal.json"

    def _add(self) -> str:
        a = f"a{self.next_id:04d}"
        self.next_id += 1
        write_atomic(self.path(a), json.dumps(goal_doc(a, self.rng, self.t)).encode())
        self.live.add(a)
        return a

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def step(self) -> str:
        rng = self.rng
        self.t += rng.uniform(1, 30)
        r = rng.random()
        live = sorted(self.live)
        pa, pl, pc = self.p
        if self.steps_root is not None:
            if r < 0.15:
                what = self._advance_run()
                self._count(what)
                return what
            r = (r - 0.15) / 0.85
        if r < pa or not live:
            self._add()
            what = "appear"
        elif r < pa + pl and len(live) > 3:
            a = rng.choice(live)
            shutil.rmtree(self.root / a)
            self.live.discard(a)
            what = "leave"
        elif r < pa + pl + pc:
            a = rng.choice(live)
            bad = rng.choice(CORRUPTIONS).replace(b'"X"', json.dumps(a).encode())
            with open(self.path(a), "wb") as f:  # in place, not atomic
                f.write(bad)
            what = "corrupt"
        else:
            a = rng.choice(live)
            write_atomic(self.path(a), json.dumps(goal_doc(a, rng, self.t)).encode())
            what = "change"  # also repairs a corrupted file
        self._count(what)
        return what

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.step()

    # ---- runs ----------------------------------------------------------------------------
    def _new_run(self, i: int) -> None:
        run = f"R{i:03d}"
        self.runs[run] = 0
        self._write_run(run)

    def _write_run(self, run: str) -> None:
        k = self.runs[run]
        steps = {}
        at = self.step_at.setdefault(run, {})
        for j, name in enumerate(STEP_ORDER):  # a step's `at` is when it reached its status
            if 2 * j + 1 < k:
                st = "done"
            elif 2 * j < k:
                st = "begin"
            else:
                continue
            if at.get(name, ("",))[0] != st:
                at[name] = (st, iso(self.t))
            steps[name] = {"status": st, "at": at[name][1]}
        for name, data in (("audit", {"verdict": "pass", "tainted": False}),
                           ("upload_intent", {"sha256": "ab" * 32, "candidate": "c-1"}),
                           ("launch_intent", {"request_id": f"req-{run}"})):
            if name in steps:
                steps[name]["data"] = data
        doc = {"event_id": f"run:{run}", "kind": "run", "run": run, "branch": "full", "steps": steps,
               "failures": 0, "work_complete": k >= 2 * len(STEP_ORDER)}
        write_atomic(self.steps_root / run / "steps.json", json.dumps(doc).encode())

    def _advance_run(self) -> str:
        open_runs = [r for r, k in self.runs.items() if k < 2 * len(STEP_ORDER)]
        if not open_runs:
            self._new_run(len(self.runs))
            return "run"
        run = self.rng.choice(sorted(open_runs))
        self.runs[run] += 1
        self._write_run(run)
        return "step"

    # ---- the truth -----------------------------------------------------------------------
    def expected(self, now: float, stall_after: float = HUGE_STALL) -> dict[str, str]:
        """agent -> the class its final file (or its absence) must give."""
        from projections.fleet.fold import classify
        from watcher.sources.parse import parse_goal

        out = {}
        for d in sorted(self.root.iterdir()):
            p = d / "goal.json"
            if not p.exists():
                continue
            raw = p.read_bytes()
            obs = parse_goal(raw, source="fleet", path=str(p), folder_id=d.name, mtime=p.stat().st_mtime)
            out[obs.agent] = classify(obs, now, stall_after)[0].value
        return out

    def expected_steps(self) -> dict[tuple[str, str], str]:
        out = {}
        if self.steps_root is None:
            return out
        for run in self.runs:
            doc = json.loads((self.steps_root / run / "steps.json").read_bytes())
            for name, s in doc["steps"].items():
                out[(run, name)] = s["status"]
        return out


def keep(churn: Churn, n: int) -> None:
    """Hold the live fleet at ``n`` agents: leavers are replaced by newcomers (new ids)."""
    while len(churn.live) < n:
        churn._add()
    while len(churn.live) > n:
        a = churn.rng.choice(sorted(churn.live))
        shutil.rmtree(churn.root / a)
        churn.live.discard(a)
