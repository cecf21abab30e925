"""``fleetwatch launch``: start an agent with its DoD contract (or a plan's runnable tasks).

``launch AGENT --task TEXT --contract JSON|@FILE [--cwd DIR] [--dry-run] [-- ARGV…]`` checks
everything first (watcher/runtime/launcher.py: a refusal is exit 2 and writes nothing, opens
nothing), then writes goal.json and the pin of record, opens the agent's tmux window and records
one ``agent.launched``. ``launch --plan FILE`` validates the whole plan (watcher/runtime/plan_file.py),
records it (``plan.recorded``) and launches its runnable tasks, at most ``max_parallel`` live
(watcher/cli/launching.py).
"""
from __future__ import annotations

import json
import re
import sys
import time
from typing import Annotated, Any, Optional

import typer

from projections.text import safe
from watcher.cli.launching import _live, _states, launch_one, launch_plan
from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, context, errors


MAX_ID = 255   # a folder name (NAME_MAX): the longest id any goals source can name


def agent_problem(agent: Optional[str], *, new: bool) -> Optional[str]:
    """Why an agent id a person gave cannot be used (None: it can): the one check of ``launch
    AGENT`` and ``claim --agent``/``$FLEETWATCH_AGENT``, made before anything is read, written or
    opened. Every id must pass the hook's own rule (``adapter.valid_agent``: no control character
    such as a newline or ESC, no ``/``, not ``.``/``..``, not empty) and be at most ``MAX_ID``
    characters; a new one (``launch``) must also match ``launcher.AGENT_RE`` whole (``fullmatch``:
    ``re.match``'s ``$`` also matches before a trailing newline, so ``"a1\n"`` passed it and
    ``agents/a1\n/`` was created). The message carries the id raw, cut to 80 characters: the
    caller prints it through ``safe`` (``error_text`` does for a LaunchError)."""
    from watcher.hook.adapter import valid_agent
    from watcher.runtime.launcher import AGENT_RE

    if not agent:
        return "agent id is empty"
    shown = agent if len(agent) <= 80 else agent[:80] + "…"
    rule = ("letters, digits, - and _ (1-64, starting with a letter or digit)" if new
            else f"no control characters, no /, at most {MAX_ID} characters")
    if len(agent) > MAX_ID or not valid_agent(agent) or (new and not re.fullmatch(AGENT_RE, agent)):
        return f"agent id '{shown}' is not usable ({len(agent)} characters): {rule}"
    return None


def _dry(spec: Any, cfg: Any, as_json: bool) -> None:
    from watcher.runtime import launcher

    doc = {"agent": spec.agent, "goal_json": launcher.goal_path(cfg.launch.goals_dir, spec.agent),
           "goal": launcher.goal_doc(spec, time.time()), "socket": cfg.launch.socket, "session": cfg.launch.session,
           "window": spec.agent, "argv": launcher.command(spec), "env": {"FLEETWATCH_AGENT": spec.agent},
           "contract_sha256": spec.digest, "plan": spec.plan}
    if as_json:
        print(json.dumps(doc))
        return
    print(f"would write {safe(doc['goal_json'], 300)}:")
    for line in json.dumps(doc["goal"], indent=2, ensure_ascii=False).splitlines():
        print("  " + safe(line, 300))
    print(f"would open window {safe(spec.agent)} on tmux -L {safe(cfg.launch.socket)} session "
          f"{safe(cfg.launch.session)} (FLEETWATCH_AGENT={safe(spec.agent)}) running:")
    print("  " + " ".join(safe(a, 120) for a in launcher.command(spec)))
    print(f"would record agent.launched (contract sha256 {spec.digest[:16]}…)")


def register(app: typer.Typer) -> None:
    @app.command("launch", context_settings={"allow_interspersed_args": True})
    @errors
    def launch_cmd(
        args: Annotated[Optional[list[str]], typer.Argument(
            help="AGENT, then after -- the command to run (default: [launch] argv).", show_default=False)] = None,
        task: Annotated[Optional[str], typer.Option("--task", help="What the agent is to do.")] = None,
        contract: Annotated[Optional[str], typer.Option(
            "--contract", help="The DoD contract: JSON (a list of checks or a string), plain text, or @FILE.")] = None,
        cwd: Annotated[Optional[str], typer.Option("--cwd", help="The agent's working folder (default: here).")] = None,
        plan: Annotated[Optional[str], typer.Option("--plan", help="A plan file: validate, record, launch its runnable tasks.")] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be written and run; do nothing.")] = False,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Launch an agent with its DoD contract: goal.json, its tmux window, one agent.launched event."""
        from watcher.runtime import launcher

        cfg, path = context(config, db)
        args = list(args or [])
        if plan is not None:
            if args or task is not None or contract is not None:
                raise launcher.refuse("--plan takes no AGENT, --task, --contract or command")
            launch_plan(cfg, path, db, plan, dry_run, as_json, _states(config, db))
            return
        if not args:
            raise launcher.refuse("no agent id given", "fleetwatch launch AGENT --task TEXT --contract JSON|@FILE")
        why = agent_problem(args[0], new=True)
        if why:
            raise launcher.refuse(why, "it names a folder and a tmux window")
        agent = launcher.check_agent(args[0])
        if not task or not task.strip():
            raise launcher.refuse("no task given (--task TEXT)")
        value = launcher.contract_arg(contract)
        spec = launcher.Spec(agent=agent, task=task[:launcher.MAX_TASK], contract=value, cwd=launcher.check_cwd(cwd),
                             argv=launcher.check_argv(args[1:] or list(cfg.launch.argv)),
                             env=launcher.env_for(cfg, db))
        why = _live(_states(config, db), cfg, agent)
        if why:
            raise launcher.refuse(f"{why}: not launched again", "close it first, or pick another id")
        if dry_run:
            _dry(spec, cfg, as_json)
            return
        got = launch_one(cfg, path, db, spec)
        if launcher.unwatched(cfg, agent):
            print(f"fleetwatch: note: no goals source reads {safe(launcher.goal_path(cfg.launch.goals_dir, agent), 300)}: "
                  "the watcher will not see this agent\n  hint: add a [[sources]] kind = \"goals\" whose glob "
                  "matches [launch] goals_dir/*/goal.json", file=sys.stderr)
        if as_json:
            print(json.dumps(got))
        else:
            print(f"launched {safe(agent)} in window {safe(got['target'])} of tmux -L {safe(cfg.launch.socket)} "
                  f"(agent.launched seq {got['seq']})")

