"""``fleetwatch report``: DoD throughput and the human's load, from the log.

The figures are the ``report`` projection (projections/report/fold.py) folded from a fresh state over
the asked range — every event of its types with time in [since, until] — and shaped by
``projections.report.view.figures``. The log is opened read-only (a read-only copy works).
``--since``/``--until`` take a duration back from now (``7d``, ``12h``), a seq (``SEQ`` or
``#SEQ``) or an ISO-8601 time. Output: rich tables with per-day sparklines, ``--json`` (stable
field names, documented in the README), ``--html FILE`` (one self-contained page with charts,
needs the ``report`` extra: matplotlib).
"""
from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any, Optional

import typer

from events.errors import ConfigError
from projections import classes
from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, context, errors

SPARK = "▁▂▃▄▅▆▇█"


def parse_bound(text: str | None, now: float, key: str) -> tuple[str, float] | None:
    """("seq", n) or ("time", epoch) for a ``--since``/``--until`` value; None when absent."""
    if text is None or text == "":
        return None
    t = text.strip()
    n = t.lstrip("#")
    if n.isascii() and n.isdigit() and int(n) < 1 << 63:  # larger: SQLite's OverflowError before; "²": a digit int() refuses
        return ("seq", float(int(n)))
    from watcher.config import parse_duration

    try:
        return ("time", now - parse_duration(t))
    except Exception:
        pass
    try:
        from events.timefmt import parse_iso

        return ("time", parse_iso(t))
    except ValueError:
        raise ConfigError(f"{key} {text!r} is not a duration (7d, 12h), a seq or an ISO-8601 time",
                          op="report", key=key, hint="e.g. --since 7d, --since 1200, --since 2026-11-24T00:00:00Z") from None


def collect(log: Any, since: tuple[str, float] | None, until: tuple[str, float] | None,
            loop: dict | None = None) -> tuple[dict, float | None]:
    """Fold the report over the range; (state, since as epoch or None). ``loop``: a dict that gets
    the ``plans`` projection folded over the same range (its ``"state"``). Folded as a replay is
    (watcher/runtime/state.py): each distinct time parsed once (an append's events share it), the
    cyclic GC paused (bench_report's row: 0.51 -> 0.69x its floor, CPU, 2026-12-01)."""
    from projections.report import fold as report
    from watcher.runtime.state import TimeCache, gc_paused

    st = report.initial(bounded=False)
    times = TimeCache(report.TIME).__getitem__
    start_seq = int(since[1]) if since and since[0] == "seq" else 0
    t_from = since[1] if since and since[0] == "time" else None
    seq_to = int(until[1]) if until and until[0] == "seq" else None
    t_to = until[1] if until and until[0] == "time" else None
    from projections.plans import fold as plans

    mine, lp = report.TYPES, (plans.initial() if loop is not None else None)
    with gc_paused():
        for rec in log.read(max(0, start_seq - 1) if start_seq else 0,
                            types=sorted(mine | (plans.TYPES if lp is not None else frozenset()))):
            if seq_to is not None and rec.seq > seq_to:
                break
            if t_from is not None or t_to is not None:
                t = times(rec.time)
                if t_from is not None and t < t_from:
                    continue
                if t_to is not None and t > t_to:
                    break
            if lp is not None and rec.type in plans.TYPES:
                lp = plans.fold(lp, rec)
            if rec.type in mine:
                st = report.fold(st, rec, times)
    if loop is not None:
        loop["state"] = lp
    return st, (t_from if t_from is not None else st["first"])


def damaged_note(damaged: dict[int, str]) -> str:
    """One line naming the damaged rows the report left out ('' when none)."""
    if not damaged:
        return ""
    seqs = sorted(damaged)
    shown = ", ".join(str(n) for n in seqs[:10]) + (", …" if len(seqs) > 10 else "")
    return (f"{len(seqs)} damaged row(s) left out of the report (seq {shown}); "
            "`fleetwatch verify` and `fleetwatch tail` show them")


def spark(values: list[float]) -> str:
    top = max(values) if values else 0
    if top <= 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))] for v in values)


def _dur(s: float | None) -> str:
    from projections.text import age

    return "-" if s is None else age(s)


def _figures(title: str, width: int, Table: Any, pairs: list[tuple[str, str]]) -> Any:
    """One row of named figures as a table: the names as headers when every one fits whole in
    ``width`` columns, else one line per figure (name, value): never a name cut to ``unevalu…``."""
    need = sum(max(len(k), len(v)) + 3 for k, v in pairs) + 1
    t = Table(title=title, show_header=need <= width, header_style="bold", title_justify="left")
    if need <= width:
        for k, _ in pairs:
            t.add_column(k, justify="right")
        t.add_row(*(v for _, v in pairs))
    else:
        t.add_column("", overflow="fold")
        t.add_column("", justify="right", overflow="fold")
        for k, v in pairs:
            t.add_row(k, v)
    return t


def render(fig: dict[str, Any]) -> None:
    """The terminal report (rich; no colour when NO_COLOR is set or not a terminal). Values from
    the log (agent ids, rule and source names) are escaped and never parsed as rich markup: an id
    like ``a[/]`` was a MarkupError traceback, ``[bold]x[/]`` printed as a bold ``x``."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from events.timefmt import iso
    from projections.text import safe

    con = Console(highlight=False)
    days = fig["days"]
    rng = fig["range"]
    since = iso(rng["since"]) if rng["since"] else "-"
    n_days = rng["days"]
    con.print(f"[bold]fleetwatch report[/bold]  {since[:16]} → {iso(rng['until'])[:16]} UTC  "
              f"({n_days} day{'' if n_days == 1 else 's'})")
    d, ld, st = fig["dod"], fig["load"], fig["stalls"]
    rate = "-" if d["false_done_rate"] is None else f"{d['false_done_rate'] * 100:.0f} %"
    con.print(_figures("DoD", con.width, Table, [
        ("met", str(d["met"])), ("failed", str(d["failed"])), ("unevaluable", str(d["unevaluable"])),
        ("claims", str(d["claims"])), ("false done", rate), ("never verified", str(d["never_verified"])),
        ("claim → verdict p50", _dur(d["claim_to_verdict"]["p50_s"])),
        ("self-approvals refused", str(d["self_approvals_refused"]))]))
    r = ld["reclama"]
    con.print(_figures("Your load", con.width, Table, [
        ("pushes", str(ld["pushes"])), ("items/push", "-" if ld["items_per_push"] is None else f"{ld['items_per_push']:.1f}"),
        ("waits (RECLAMA)", str(r["episodes"]) + (f" ({r['open']} open)" if r["open"] else "")),
        ("agent-hours waiting", f"{r['agent_hours']:.1f}"), ("p50", _dur(r["p50_s"])), ("p90", _dur(r["p90_s"])),
        ("max", _dur(r["max_s"])), ("acks", str(ld["acks"])), ("escalations", str(ld["escalations"]))]))
    con.print(f"pushes by hour (UTC 0–23): {spark(ld['pushes_by_hour'])}")
    lp = fig.get("loop")
    if lp and (lp["launched"] or sum(lp["acted"].values())):
        con.print(f"closed loop: {lp['launched']} launched, launch → verified met p50 "
                  f"{_dur(lp['launch_to_met']['p50_s'])} (max {_dur(lp['launch_to_met']['max_s'])}, "
                  f"{lp['launch_to_met']['count']} met); verdicts acted on: "
                  + (", ".join(f"{k} {v}" for k, v in sorted(lp["acted"].items())) or "none"))
    helped = sum(n for c, n in st["after_nudge"].items() if c in (classes.TRABAJANDO, classes.DICE_TERMINADO))
    nudged = sum(st["after_nudge"].values())
    con.print(f"stalls: {st['episodes']} (p50 {_dur(st['p50_s'])}, max {_dur(st['max_s'])}), "
              f"nudges {st['nudges']}" + (f", back to work after a nudge {helped}/{nudged}" if nudged else ""))
    if days:
        t = Table(title="Per day", show_header=True, header_style="bold", title_justify="left")
        t.add_column("")
        t.add_column("trend")
        t.add_column("total", justify="right")
        for label, field, scale in (("DoD met", "met", 1), ("false done", "false_done", 1), ("pushes", "pushes", 1),
                                    ("hours waiting on you", "reclama_s", 3600), ("stalls", "stalls", 1)):
            vals = [x[field] / scale for x in days]
            tot = sum(vals)
            t.add_row(label, spark(vals), f"{tot:.1f}" if scale != 1 else str(int(tot)))
        con.print(t)
    if fig["agents"]:
        from watcher.cli.render import RICH_ROWS

        head = ("agent", "working", "waiting on you", "stalled", "claims", "met", "failed")
        rows = [(safe(a, 40), _dur(v["seconds"].get(classes.TRABAJANDO)), _dur(v["seconds"].get(classes.RECLAMA)),
                 _dur(v["seconds"].get(classes.ESTANCADO)), str(v["claims"]), str(v["met"]), str(v["failed"]))
                for a, v in fig["agents"].items()]
        if len(rows) > RICH_ROWS:  # a rich Table measures every cell: 5,000 agents took 4 s; aligned text
            w = [max(map(len, col)) for col in zip(head, *rows)]
            out = Text("Per agent\n", style="bold")
            for r in (head, *rows):
                out.append("  ".join(c.ljust(n) if i == 0 else c.rjust(n) for i, (c, n) in enumerate(zip(r, w))) + "\n")
            out.rstrip()
            con.print(out, soft_wrap=True)   # no wrap at 80 columns: a line per agent
        else:
            t = Table(title="Per agent", show_header=True, header_style="bold", title_justify="left")
            for c in head:  # an id too long for the width wraps, never cut
                t.add_column(c, justify="right" if c != "agent" else "left", overflow="fold")
            for r in rows:
                t.add_row(Text(r[0]), *r[1:])
            con.print(t)
    ru, mi, w = fig["runs"], fig["missions"], fig["watcher"]
    viol = ", ".join(f"{safe(k)} {n}" for k, n in ru["violations"].items()) or "none"
    con.print(f"runs: steps done {ru['steps_done']}, failed {ru['steps_failed']}, retries {ru['retries']}, "
              f"abandoned {ru['abandoned']}; rule violations: {viol}", markup=False)
    con.print(f"missions: WPs done {mi['wps_done']}, approvals {mi['approvals']} (p50 wait "
              f"{_dur(mi['approval_wait']['p50_s'])}), circuit opens {mi['circuit_opens']}")
    down = ", ".join(f"{safe(k)} {n}" for k, n in w["source_failures"].items()) or "none"
    con.print(f"watcher: up {_dur(w['uptime_s'])}, starts {w['starts']}, restarts {w['restarts']}; "
              f"source failures: {down}", markup=False)


def register(app: typer.Typer) -> None:
    @app.command("report")
    @errors
    def report_cmd(
        since: Annotated[Optional[str], typer.Option("--since", help="Start: a duration back (7d), a seq, or an ISO time. Default: the whole log.")] = None,
        until: Annotated[Optional[str], typer.Option("--until", help="End: a duration back, a seq, or an ISO time. Default: now.")] = None,
        html: Annotated[Optional[str], typer.Option("--html", help="Also write one self-contained HTML page with charts to FILE.")] = None,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """DoD throughput and the human's load, measured from the log (read-only)."""
        from events.log import EventLog
        from projections.report.view import figures

        now = time.time()
        s, u = parse_bound(since, now, "--since"), parse_bound(until, now, "--until")
        if s and u and s[0] == u[0] and s[1] > u[1]:  # an empty range, not an empty report
            raise ConfigError(f"--since {since!r} is after --until {until!r}: the range holds nothing",
                              op="report", key="--since", hint="swap them: --since is the start, --until the end")
        _, path = context(config, db)
        log = EventLog(path, create=False, readonly=True)
        try:
            loop: dict = {}
            st, t_from = collect(log, s, u, loop)
            note = damaged_note(log.damaged)
        finally:
            log.close()
        if note:  # rows the fold could not read: said, never silently left out of the figures
            print(f"fleetwatch: {note}", file=sys.stderr)
        # the end: --until, else now — or the last event if the log is ahead of this clock (a
        # clock stepped back, a log from another host): a report never ends before its data
        end = u[1] if u and u[0] == "time" else (st["last"] if u else max(now, st["last"] or now))
        if s and s[0] == "time" and u is None and s[1] > end:  # after now and after the last event
            raise ConfigError(f"--since {since!r} is in the future: the range holds nothing", op="report",
                              key="--since", hint="e.g. --since 7d, --since 2026-11-24T00:00:00Z")
        fig = figures(st, end if end is not None else now, t_from)
        from projections.plans.fold import figures as loop_figures

        fig["loop"] = loop_figures(loop["state"])   # launch -> verified met, verdicts acted on
        if html:
            from watcher.cli.report_html import write_html

            write_html(fig, html, note)
        if as_json:
            from projections.text import inert_json

            print(inert_json(json.dumps(fig, ensure_ascii=False, sort_keys=True)))
        else:
            render(fig)
            if html:
                from projections.text import safe

                print(f"wrote {safe(html)}")
