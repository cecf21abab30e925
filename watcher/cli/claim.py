"""``fleetwatch claim done|blocked|question|working [--agent ID] [--note TEXT]``: an agent says
where it stands.

The agent is ``--agent``, else ``$FLEETWATCH_AGENT`` (``fleetwatch launch`` sets it in the
window). Its goal.json (``[launch] goals_dir/AGENT/goal.json``, else the configured goals
sources) gets the phase — done: ``hecho`` (and, for an agent no Claude Code hook keeps the state
of, state ``idle``: DICE_TERMINADO at the next tick; under hooks the claim is made from inside a
tool call, and the turn's Stop makes it idle, so the claim starts once, at the turn's end), blocked: ``bloqueado``, question: ``preguntando`` (both RECLAMA),
working: ``haciendo`` (state ``busy``) — through ``watcher.hook.goalfile.update_goal``: atomic,
never losing another writer's update. The note is the agent's words: it is not written to
goal.json, the log or a push (the claim itself is what the fleet learns). Exit 2: no agent or no
goal.json for it.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Optional

import typer

from projections.text import safe
from watcher.cli.util import ConfigOpt, DbOpt, context, errors

PHASES = {"done": ("hecho", "idle"), "blocked": ("bloqueado", None), "question": ("preguntando", None),
          "working": ("haciendo", "busy")}


def goal_of(cfg, agent: str) -> str | None:
    """The agent's goal.json: under ``[launch] goals_dir``, else found by the goals sources."""
    from watcher.runtime.launcher import goal_path

    if "/" not in agent and agent not in (".", "..") and "\0" not in agent:   # a folder name, never a path
        p = goal_path(cfg.launch.goals_dir, agent)
        if os.path.lexists(p):
            return p
    from watcher.cli.check import find_agent

    obs = find_agent(cfg, agent)
    return obs.path if obs is not None and obs.path else None


def register(app: typer.Typer) -> None:
    @app.command("claim")
    @errors
    def claim_cmd(
        what: Annotated[str, typer.Argument(help="done | blocked | question | working")],
        agent: Annotated[Optional[str], typer.Option("--agent", help="The agent (else $FLEETWATCH_AGENT).")] = None,
        note: Annotated[Optional[str], typer.Option("--note", help="Your words for a human (kept in goal.json; never logged or pushed).")] = None,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Say where this agent stands: sets the phase in its goal.json (done -> DICE_TERMINADO)."""
        from events.timefmt import iso
        from watcher.hook.goalfile import HookError, update_goal

        w = what.strip().lower()
        if w not in PHASES:
            print(f"fleetwatch: claim what? done, blocked, question or working (got {safe(what, 40)!r})", file=sys.stderr)
            raise typer.Exit(2)
        aid = agent if agent is not None else os.environ.get("FLEETWATCH_AGENT") or ""
        if not aid.strip():
            print("fleetwatch: no agent: give --agent ID (or run inside a launched window: $FLEETWATCH_AGENT)",
                  file=sys.stderr)
            raise typer.Exit(2)
        from watcher.cli.launch import agent_problem   # the one id check (launch's too)

        why = agent_problem(aid, new=False)   # checked as given: "a1\n" is not a1
        if why:
            print(f"fleetwatch: {safe(why)}", file=sys.stderr)
            raise typer.Exit(2)
        cfg, _ = context(config, db)
        path = goal_of(cfg, aid)
        if path is None:
            print(f"fleetwatch: unknown agent {safe(aid, 80)}: no goal.json under [launch] goals_dir or the goals sources",
                  file=sys.stderr)
            raise typer.Exit(2)
        phase, state = PHASES[w]
        now = iso(time.time())

        def change(doc):
            if doc is None:
                return None
            new = dict(doc)
            new["phase"] = phase
            if state is not None and "hook_event" not in doc:   # hooks keep the state of a real client
                new["state"] = state
            new["last_activity"] = now
            if note is not None:
                new["claim_note"] = note[:2000]
            else:
                new.pop("claim_note", None)
            return new

        try:
            changed = update_goal(path, change, create=False)
        except (HookError, OSError) as e:
            print(f"fleetwatch: {safe(aid, 80)}: goal.json not updated: {safe(str(e), 200)}", file=sys.stderr)
            raise typer.Exit(1) from None
        if not changed:
            print(f"fleetwatch: unknown agent {safe(aid, 80)}: its goal.json is gone", file=sys.stderr)
            raise typer.Exit(2)
        print(f"{safe(aid, 80)}: phase {phase}" + (f", state {state}" if state else ""))
