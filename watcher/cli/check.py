"""``fleetwatch check AGENT [--dry-run]``: run an agent's structured DoD checks by hand, the way
the watcher's checker does (``watcher.runtime.checker``), and record the verdict.

The agent's goal.json is found through the configured ``goals`` sources (one poll each); the
pinned contract digest comes from the log. ``--dry-run`` shows each check (argv, expectation,
where it runs) and whether the contract still matches the one pinned at launch; it runs and
writes nothing. Exit 0 when the verdict is ``met``, 1 otherwise, 2 for an unknown agent, and
``NOTHING_RECORDED`` (4) when there was nothing to record: no check fleetwatch can run (a free-text
contract, no ``cmd`` check), or an ``unevaluable`` that would stand over a person's or a verifier's
met/failed (``projections.dod.fold.judged``): a non-answer never replaces an answer.
"""
from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Annotated

import typer

from projections.dod.fold import judged
from projections.text import safe
from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, context, errors


NOTHING_RECORDED = 4   # exit: nothing to run or no answer over an answer; nothing written


def find_agent(cfg, agent: str):
    """The agent's observation from one poll of every goals source, or None."""
    from watcher.sources import make

    for spec in cfg.sources:
        if spec.kind != "goals":     # only goals sources hold goal.json files: build nothing else
            continue
        s = make(spec)
        try:
            found = _named(s.poll(time.time(), True).agents, agent)
            if found is None:   # the two-read rule: a second look
                time.sleep(max(0.05, cfg.dur("watch.debounce")))
                found = _named(s.poll(time.time(), True).agents, agent)
        finally:
            close = getattr(s, "close", None)
            if close:
                close()
        if found is not None:
            return found
    return None


def _named(agents, agent: str):
    """The observation of ``agent``, also given as status shows it (escaped: plain.shown_id), or None."""
    if "\\" in agent:
        from watcher.cli.plain import shown_id

        agent = shown_id(agent, [o.agent for o in agents])
    return next((o for o in agents if o.agent == agent), None)


def register(app: typer.Typer) -> None:
    @app.command("check")
    @errors
    def check_cmd(
        agent: Annotated[str, typer.Argument(help="The agent whose DoD checks to run.")],
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the checks; run and record nothing.")] = False,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Run an agent's dod_contract cmd checks now and record the verdict (verifier fleetwatch-checks)."""
        from events.log import EventLog, Pending
        from watcher.cli.status import load_states
        from watcher.runtime.checker import verdict_for, work_dir

        cfg, path = context(config, db)
        name = agent.strip()
        obs = find_agent(cfg, name)
        if obs is None:
            print(f"fleetwatch: no goal.json for agent {safe(name, 80)!r} in the configured goals sources", file=sys.stderr)
            raise typer.Exit(2)
        name = obs.agent  # the id itself, also when given as status shows it (escaped)
        if obs.error:
            print(f"fleetwatch: {safe(name, 80)}: {safe(obs.error, 200)}", file=sys.stderr)
            raise typer.Exit(2)
        _, states, _, _ = load_states(config, db)
        pinned = ((states.get("dod") or {}).get("agents", {}).get(name) or {}).get("contract_sha256")
        changed = pinned is not None and pinned != obs.contract_sha256
        if dry_run:
            rows = [{"id": c["id"], "kind": c["kind"], "required": c.get("required", True) is not False,
                     "cmd": c.get("cmd"), "expect": c.get("expect", {"exit": 0}) if c["kind"] == "cmd" else None,
                     "runs": c["kind"] == "cmd"} for c in (obs.checks or [])]
            if as_json:
                print(json.dumps({"agent": name, "cwd": work_dir(obs), "pinned": pinned, "current": obs.contract_sha256,
                                  "contract_changed": changed, "checks": rows}))
                return
            print(f"{safe(name, 80)}: {len(rows)} check(s), run in {safe(work_dir(obs) or '-', 200)}")
            if changed:
                print("  contract changed since launch: the checker would refuse (unevaluable)")
            if obs.checks is None:
                print("  the contract is free text: nothing fleetwatch can run (needs a human or a verifier agent)")
            for r in rows:
                what = " ".join(safe(a, 60) for a in r["cmd"]) + f"  expect {json.dumps(r['expect'])}" if r["runs"] \
                    else "needs a human or a verifier agent"
                print(f"  {safe(r['id'], 40)} ({safe(r['kind'], 20)}{', required' if r['required'] else ''}): {what}")
            return
        if not any(c.get("kind") == "cmd" for c in (obs.checks or [])):
            what = "the contract is free text" if obs.checks is None else "no check of the contract is a cmd"
            print(f"fleetwatch: {safe(name, 80)}: {what}: nothing fleetwatch can run (needs a person or a verifier "
                  "agent: `fleetwatch verdict`); nothing recorded", file=sys.stderr)
            raise typer.Exit(NOTHING_RECORDED)
        from watcher.runtime.checker import Limits, without_lines

        lim = Limits.from_config(cfg, path)   # the person at the terminal sees the last lines; the log keeps
        pend = verdict_for(name, 0, obs.checks, work_dir(obs), obs.contract_sha256, pinned,  # them only by opt-in
                           lim._replace(lines=max(lim.lines, 3)))
        ev = pend.event
        if ev.verdict == "unevaluable" and judged((states.get("dod") or {}).get("agents", {}).get(name)):
            print(f"fleetwatch: {safe(name, 80)}: the checks gave no answer (unevaluable); the recorded verdict "
                  "of a person or a verifier stands; nothing recorded", file=sys.stderr)
            raise typer.Exit(NOTHING_RECORDED)
        elog = EventLog(path, durability=cfg.store.durability, create=False)
        try:
            stored = ev if lim.lines else without_lines(ev)
            seq = elog.append([Pending(stored, id=f"checks-cli:{name}:{uuid.uuid4().hex[:12]}")], time.time())[0]
        finally:
            elog.close()
        if as_json:
            print(json.dumps({"agent": name, "verdict": ev.verdict, "seq": seq, "checks": ev.checks}))
        else:
            for r in ev.checks:
                detail = r.get("comparison") or r.get("why") or ""
                print(f"  {safe(r['id'], 40)}: {r['status']}" + (f" ({safe(detail, 160)})" if detail else ""))
                for ln in r.get("lines", []):
                    print(f"      | {ln}")
            print(f"recorded dod.verdict {ev.verdict} for {safe(name, 80)} by fleetwatch-checks (seq {seq})")
        raise typer.Exit(0 if ev.verdict == "met" else 1)
