"""`status`, `summary`, `verdict`, `rebuild`: the read side of the log, plus the verifier's append.

`status` and `summary` answer from the stored projection snapshots plus the tail
(``Projections.load``), never a full replay. `verdict` appends through SQLite's own locking, so it
works while `fleetwatch run` holds the log. A missing log is not an error for the readers: they
say so and show an empty fleet.
"""
from __future__ import annotations

import enum
import logging
import os
import sys
import time
from typing import Annotated, Any

import msgspec
import typer

from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, context, errors
from projections.text import age as fmt_age

log = logging.getLogger("fleetwatch.status")

CLASS_ORDER = ("RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO", "TRABAJANDO", "CERRADO")
SUMMARY_GROUPS = ("RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO", "approvals", "violations",
                  "sources", "runs", "swarms")
EVIDENCE_MAX = 2000
_json = msgspec.json.Encoder(order="sorted")


class Refusal(str, enum.Enum):
    SELF_VERDICT = "verifier is the agent (no self-approval)"
    EMPTY_VERIFIER = "the verifier id is empty"
    EMPTY_AGENT = "the agent id is empty"


# ---- reading ---------------------------------------------------------------------------------
def load_states(config: str | None, db: str | None) -> tuple[Any, dict[str, Any], int, str | None]:
    """(cfg, {projection: state}, head seq, note). A missing log gives initial states and a note."""
    from events.log import EventLog
    from watcher.runtime.state import Projections

    cfg, path = context(config, db)
    if not os.path.exists(path):
        p = Projections()
        return cfg, p.states, 0, f"no event log yet at {path} (start `fleetwatch run`)"
    elog = EventLog(path, durability=cfg.store.durability, create=False)
    try:
        p = Projections.load(elog)
        return cfg, p.states, p.seq, None
    finally:
        elog.close()


def _since_s(iso_s: str | None, now: float) -> float | None:
    from events.log import parse_iso

    if not iso_s:
        return None
    try:
        return now - parse_iso(iso_s)
    except ValueError:
        return None


def build_status(cfg: Any, states: dict[str, Any], head: int, now: float) -> dict[str, Any]:
    """The `status --json` document (pure over the folded states)."""
    from events.log import iso
    from projections.base import registry

    mods = registry()
    fleet = states.get("fleet") or {"agents": {}, "sources": {}}
    dod_st = mods["dod"].status(states["dod"], now) if "dod" in mods else {"agents": {}, "counts": {}}
    agents = []
    counts = {c: 0 for c in CLASS_ORDER}
    for aid in sorted(fleet["agents"]):
        a = fleet["agents"][aid]
        counts[a["class"]] = counts.get(a["class"], 0) + 1
        d = dod_st["agents"].get(aid, {})
        agents.append({"agent": aid, "class": a["class"], "since": a["since"],
                       "age_s": _r(_since_s(a["since"], now)), "state": a.get("state"), "phase": a.get("phase"),
                       "reason": a.get("reason", ""), "source": a.get("source", ""),
                       "dod_status": d.get("status", "pending"),
                       "dod": {k: d.get(k) for k in ("verdict", "verifier", "verdict_at", "claim_age_s",
                                                     "contract_changed", "contract_changes")} if d else None})
    rank = {c: i for i, c in enumerate(CLASS_ORDER)}
    agents.sort(key=lambda x: (rank.get(x["class"], 99), x["agent"]))
    doc: dict[str, Any] = {
        "head": head, "generated_at": iso(now), "agents": agents, "classes": counts,
        "dod": dod_st.get("counts", {}),
        "sources": [{"source": k, **v} for k, v in sorted(fleet.get("sources", {}).items())],
        "runs": _runs(mods, states, now),
        "missions": mods["missions"].status(states["missions"], now) if "missions" in mods
        else {"missions": {}, "circuits": {}, "open_circuits": []},
        "swarms": mods["swarms"].status(states["swarms"], now, cfg.swarm.max_concurrent, cfg.swarm.max_children)
        if "swarms" in mods else {"groups": {}},
    }
    return doc


def _runs(mods: dict[str, Any], states: dict[str, Any], now: float) -> Any:
    """projections.runs.status gives {"runs": [...]}: the list goes under "runs"."""
    m = mods.get("runs")
    if m is None or not hasattr(m, "status"):
        return []
    st = m.status(states["runs"], now)
    return st.get("runs", st) if isinstance(st, dict) else st


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def summary_groups(cfg: Any, states: dict[str, Any], now: float) -> list[tuple[str, list[str]]]:
    """[(group, lines)] in the fixed order: the four attention classes, then approvals, violations,
    failed sources, runs, swarms. Empty groups are left out. Pure over the folded states."""
    from projections.base import registry

    mods = registry()
    fleet = states.get("fleet") or {"agents": {}, "sources": {}}
    dod_agents = mods["dod"].status(states["dod"], now)["agents"] if "dod" in mods else {}
    groups: dict[str, list[str]] = {g: [] for g in SUMMARY_GROUPS}
    by_class: dict[str, list[tuple[str, str]]] = {}
    for aid, a in fleet["agents"].items():
        by_class.setdefault(a["class"], []).append((a["since"] or "", aid))
    for cls in ("RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO"):
        for since, aid in sorted(by_class.get(cls, [])):
            a = fleet["agents"][aid]
            age = fmt_age(_since_s(since, now))
            if cls == "RECLAMA":
                line = f"{aid}: {a.get('state') or '-'}/{a.get('phase') or '-'} for {age}"
            elif cls == "DICE_TERMINADO":
                line = f"{aid}: claims done {age} ago, DoD {dod_agents.get(aid, {}).get('status', 'pending')}"
            elif cls == "ESTANCADO":
                line = f"{aid}: stalled for {age} ({a.get('phase') or '-'})"
            else:
                line = f"{aid}: {a.get('reason') or 'mal lanzado'}"
            groups[cls].append(line)
    for name in ("dod", "missions"):
        if name in mods and hasattr(mods[name], "items"):
            for g, line in mods[name].items(states[name], now):
                groups.setdefault(g, []).append(line)
    if "swarms" in mods:
        for g, line in mods["swarms"].items(states["swarms"], now, cfg.swarm.max_concurrent, cfg.swarm.max_children):
            groups.setdefault(g, []).append(line)
    if "runs" in mods:
        m = mods["runs"]
        if hasattr(m, "items"):
            for g, line in m.items(states["runs"], now):
                groups.setdefault(g, []).append(str(line))
        elif hasattr(m, "summary"):
            groups["violations"] += [_text(x) for x in m.summary(states["runs"], now)]
    for src, s in sorted(fleet.get("sources", {}).items()):
        if s.get("failed"):
            groups["sources"].append(f"{src}: failed for {fmt_age(_since_s(s.get('since'), now))}: {s.get('error', '')}")
    order = list(SUMMARY_GROUPS) + sorted(g for g in groups if g not in SUMMARY_GROUPS)
    return [(g, groups[g]) for g in order if groups[g]]


def _text(x: Any) -> str:
    if isinstance(x, str):
        return x
    for attr in ("text", "line", "title"):
        if hasattr(x, attr):
            return str(getattr(x, attr))
    if isinstance(x, dict):
        return str(x.get("text") or x.get("line") or x)
    return str(x)


def render_summary(groups: list[tuple[str, list[str]]], fleet_size: int) -> str:
    if not groups:
        return f"all quiet: {fleet_size} agent(s), nothing needs you\n"
    out = []
    for g, lines in groups:
        out.append(f"{g.upper()} ({len(lines)})")
        out += [f"  {line}" for line in lines]
    return "\n".join(out) + "\n"


# ---- human status -----------------------------------------------------------------------------
def _tables(doc: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    t = []
    t.append(("Fleet", ["agent", "class", "for", "state/phase", "DoD"],
              [[a["agent"], a["class"], fmt_age(a["age_s"]), f"{a['state'] or '-'}/{a['phase'] or '-'}", a["dod_status"]]
               for a in doc["agents"]]))
    ms = doc["missions"].get("missions", {})
    if ms:
        t.append(("Missions", ["mission", "WPs", "by state", "runnable", "approval", "circuit", "flagged", "done"],
                  [[mid, str(m["wps"]), " ".join(f"{k}:{v}" for k, v in m["counts"].items()),
                    ",".join(m["runnable"]) or "-", ",".join(m["approval_required"]) or "-", m["circuit"],
                    ",".join(f["wp"] for f in m["flagged"]) or "-", "yes" if m["completed"] else "no"]
                   for mid, m in ms.items()]))
    gs = doc["swarms"].get("groups", {})
    if gs:
        t.append(("Swarms", ["group", "children", "queued", "running", "done", "failed", "killed", "timeout",
                             "settled", "flags"],
                  [[gid, str(g["children"]), *[str(g["counts"].get(s, 0)) for s in
                                               ("queued", "running", "done", "failed", "killed", "timeout")],
                    "yes" if g["settled"] else "no", ",".join(g["flags"]) or "-"] for gid, g in gs.items()]))
    runs = doc.get("runs") or []
    if isinstance(runs, list) and runs:
        t.append(("Runs", ["run", "branch", "progress", "at", "failures", "next retry", "violations"],
                  [[str(r.get("run")), str(r.get("branch") or "-"), str(r.get("progress") or "-"),
                    str(r.get("current") or "-"), str(r.get("failures", 0)),
                    ("abandoned" if r.get("abandoned") else str(r.get("next_retry") or "-")),
                    ",".join(r.get("violations") or []) or "-"]
                   for r in runs if isinstance(r, dict) and not r.get("gone")]))
    if doc["sources"]:
        t.append(("Sources", ["source", "state", "since", "error"],
                  [[s["source"], "FAILED" if s.get("failed") else "ok", s.get("since") or "-", s.get("error") or ""]
                   for s in doc["sources"]]))
    return t


def render_plain(doc: dict[str, Any]) -> str:
    counts = " ".join(f"{c}:{n}" for c, n in doc["classes"].items() if n)
    out = [" · ".join(x for x in (f"fleet: {len(doc['agents'])} agent(s)", counts, f"log head {doc['head']}") if x)]
    for title, head, rows in _tables(doc):
        if not rows:
            continue
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        out.append("")
        out.append(title)
        out.append("  " + "  ".join(h.ljust(w[i]) for i, h in enumerate(head)).rstrip())
        out += ["  " + "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    return "\n".join(out) + "\n"


def render_rich(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console()
    con.print(f"[bold]fleet[/]: {len(doc['agents'])} agent(s) · " +
              " ".join(f"{c}:{n}" for c, n in doc["classes"].items() if n) + f" · log head {doc['head']}")
    for title, head, rows in _tables(doc):
        if not rows:
            continue
        tb = Table(title=title, title_justify="left")
        for h in head:
            tb.add_column(h)
        for r in rows:
            tb.add_row(*(escape(c) for c in r))
        con.print(tb)


# ---- commands ---------------------------------------------------------------------------------
def register(app: typer.Typer) -> None:
    @app.command("status")
    @errors
    def status_cmd(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
        """Fleet by class with ages, DoD per agent, missions, swarm groups, runs, sources."""
        now = time.time()
        cfg, states, head, note = load_states(config, db)
        if note:
            print(f"fleetwatch: {note}", file=sys.stderr)
        doc = build_status(cfg, states, head, now)
        if json:
            sys.stdout.write(_json.encode(doc).decode() + "\n")
        elif sys.stdout.isatty():
            render_rich(doc)
        else:
            sys.stdout.write(render_plain(doc))

    @app.command("summary")
    @errors
    def summary_cmd(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
        """The one short text to read: RECLAMA > DICE_TERMINADO > ESTANCADO > MAL_LANZADO, then
        approvals and violations. One line per item, counts per group."""
        now = time.time()
        cfg, states, head, note = load_states(config, db)
        if note:
            print(f"fleetwatch: {note}", file=sys.stderr)
        groups = summary_groups(cfg, states, now)
        if json:
            sys.stdout.write(_json.encode({"head": head, "groups": [
                {"group": g, "count": len(lines), "items": lines} for g, lines in groups]}).decode() + "\n")
        else:
            sys.stdout.write(render_summary(groups, len((states.get("fleet") or {}).get("agents", {}))))

    @app.command("verdict")
    @errors
    def verdict_cmd(
        agent: Annotated[str, typer.Argument(help="The agent whose DoD was checked.")],
        verdict: Annotated[str, typer.Argument(help="met | failed | unevaluable")],
        verifier: Annotated[str, typer.Option("--verifier", help="Who checked (never the agent itself).")],
        evidence: Annotated[str, typer.Option("--evidence", help="What was run and what it showed.")],
        config: ConfigOpt = None, db: DbOpt = None,
    ) -> None:
        """Record a verifier's verdict on an agent's DoD (works while the watcher runs)."""
        from events.log import EventLog
        from events.types import DodVerdict

        v = verdict.strip().lower()
        if v not in ("met", "failed", "unevaluable"):
            print(f"fleetwatch: verdict must be met, failed or unevaluable, got {verdict!r}", file=sys.stderr)
            raise typer.Exit(2)
        refusal = check_verdict(agent, verifier)
        if refusal is not None:
            print(f"fleetwatch: refused: {refusal.value}; nothing written", file=sys.stderr)
            raise typer.Exit(2)
        cfg, path = context(config, db)
        elog = EventLog(path, durability=cfg.store.durability, create=False)
        try:
            ev = DodVerdict(agent=agent.strip(), verdict=v, verifier=verifier.strip(),
                            evidence=cap_evidence(evidence), source="cli")
            seq = elog.append([ev], time.time())[0]
        finally:
            elog.close()
        print(f"recorded dod.verdict {v} for {agent.strip()} by {verifier.strip()} (seq {seq})")

    @app.command("rebuild")
    @errors
    def rebuild_cmd(config: ConfigOpt = None, db: DbOpt = None,
                    check: Annotated[bool, typer.Option("--check", help="Compare with the stored snapshots; write nothing.")] = False,
                    ) -> None:
        """Replay every projection from seq 1 (and store the snapshots); --check compares instead."""
        from events.log import EventLog
        from watcher.runtime.state import rebuild

        cfg, path = context(config, db)
        if not os.path.exists(path):
            print(f"fleetwatch: no event log yet at {path}; nothing to rebuild", file=sys.stderr)
            return
        elog = EventLog(path, durability=cfg.store.durability, create=False)
        try:
            t0 = time.perf_counter()
            p, diff = rebuild(elog, check=check, store=not check)
            dt = time.perf_counter() - t0
        finally:
            elog.close()
        if diff is not None:
            print(f"fleetwatch: projection {diff.projection!r} differs at seq {diff.seq}: {diff.detail}",
                  file=sys.stderr)
            raise typer.Exit(1)
        what = "checked" if check else "rebuilt"
        print(f"{what} {len(p.mods)} projection(s) over {p.seq} event(s) in {dt:.2f}s"
              + (": snapshots match" if check else ""))


def check_verdict(agent: str, verifier: str) -> Refusal | None:
    """Why a verdict must be refused, or None. Pure."""
    a, v = agent.strip(), verifier.strip()
    if not a:
        return Refusal.EMPTY_AGENT
    if not v:
        return Refusal.EMPTY_VERIFIER
    if a.lower() == v.lower():
        return Refusal.SELF_VERDICT
    return None


def cap_evidence(text: str, limit: int = EVIDENCE_MAX) -> str:
    """The verifier's evidence, kept verbatim up to ``limit`` characters (marked when cut)."""
    t = text.strip()
    return t if len(t) <= limit else t[: limit - 1] + "…"
