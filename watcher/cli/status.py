"""`status`, `summary`, `verdict`, `rebuild`: the read side of the log, plus the verifier's append.

`status` and `summary` answer from the stored projection snapshots plus the tail
(``Projections.load``), never a full replay. `verdict` appends through SQLite's own locking, so it
works while `fleetwatch run` holds the log. A missing log is not an error for the readers: they
say so and show an empty fleet.
"""
import enum
import functools
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypedDict

import msgspec

from projections.present import views
from projections.text import inert_json, safe
from watcher.cli import render
from watcher.cli.plain import context

EVIDENCE_MAX = 2000
_json = msgspec.json.Encoder(order="sorted")


class Refusal(str, enum.Enum):
    SELF_VERDICT = "verifier is the agent (no self-approval)"
    EMPTY_VERIFIER = "the verifier id is empty"
    EMPTY_AGENT = "the agent id is empty"
    EMPTY_EVIDENCE = "the evidence is empty (say what was run and what it showed)"


# ---- reading ---------------------------------------------------------------------------------
# What each reader shows (projections.present.views): only these snapshots are read and decoded. The
# notify state is read for its health fields (views.notify_health) and for how each open
# condition was handled (views.handling), so a narrow view of it is decoded (notify's snapshot is
# the biggest: 1.4 MB of 2.6 at 1M events, bench_rebuild.py): of each condition, CONDVIEW's keys.
TABLE_READS = ("fleet", "dod", "runs", "missions", "swarms", "plans", "notify")
STATUS_READS = TABLE_READS
NOTIFY_HEALTH_KEYS = ("last", "retry", "silences", "conds")
# what ``views.handling`` reads of a condition (a dict of the keys it has; the others are skipped)
CONDVIEW = TypedDict("CondView", {"subject": str, "cls": str, "cleared": Any, "acked": Any, "acked_at": Any,
                                  "acked_by": Any}, total=False)


def notify_health_view() -> Callable[[bytes], dict[str, Any]]:
    """Decodes notify's snapshot to only what ``views.notify_health`` and ``views.handling`` read
    (a dict of those keys; each condition a dict of ``CONDVIEW``'s keys). Every other key is kept as raw bytes
    (``msgspec.Raw``: scanned, never built into objects), but all of STATE_TYPE's keys are
    required, so a snapshot of another layout still fails to decode (and is replayed), as with
    the whole state."""
    from projections.notify import fold as notify

    kept = {"conds": dict[str, CONDVIEW]}
    fields = [(k, kept.get(k, v) if k in NOTIFY_HEALTH_KEYS else msgspec.Raw)
              for k, v in notify.STATE_TYPE.__annotations__.items()]
    dec = msgspec.json.Decoder(msgspec.defstruct("NotifyHealthView", fields))

    def decode(data: bytes) -> dict[str, Any]:
        view = dec.decode(data)
        return {k: getattr(view, k) for k in NOTIFY_HEALTH_KEYS}

    return decode


def load_states(config: str | None, db: str | None, names: tuple[str, ...] | None = None,
                views: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any], int, str | None]:
    """(cfg, {projection: state}, head seq, note). A missing log gives initial states and a note.
    ``names``/``views``: only those projections, some decoded narrowly (``Projections.load``)."""
    from events.log import EventLog
    from projections.base import registry
    from watcher.runtime.state import Projections

    cfg, path = context(config, db)
    if not os.path.exists(path):
        p = Projections(registry(names))
        return cfg, p.states, 0, f"no event log yet at {path} (start `fleetwatch run`)"
    elog = EventLog(path, durability=cfg.store.durability, create=False, readonly=True)
    try:
        p = Projections.load(elog, names, views)  # a snapshot that fails its chain binding is not used: replay
        for seq, why in sorted(elog.damaged.items()):
            print(f"fleetwatch: seq {seq}: damaged row ({safe(why)}); skipped (see `fleetwatch verify`)", file=sys.stderr)
        return cfg, p.states, p.seq, None
    finally:
        elog.close()


NOT_RUNNING = ("note: no watcher is running on this log (no `fleetwatch run` holds it): classes are as of "
               "its last tick, and time alone moves none of them (no TRABAJANDO becomes ESTANCADO)\n"
               "  hint: start it: `systemctl --user start fleetwatch` or `fleetwatch run`")


def watcher_state(cfg: Any, db: str | None, note: str | None, locks: Any = None) -> dict[str, Any]:
    """``{"running": bool | None, "pid"}``: whether a writer holds the log now (None: cannot tell,
    or no log: ``note``, load_states'; events.lock.writer_running), said on stderr by `status` and
    `summary` when it does not: a fleet nobody watches kept showing TRABAJANDO with a growing age
    and "all quiet"."""
    from events.lock import writer_running
    from watcher.config import db_path

    if note is not None:
        return {"running": None, "pid": None}
    running, pid = writer_running(db_path(cfg, db), locks)  # locks: events.lock.LocksRead, started early
    if running is False:
        print(f"fleetwatch: {NOT_RUNNING}", file=sys.stderr)
    return {"running": running, "pid": pid}


def build_status(cfg: Any, states: dict[str, Any], head: int, now: float) -> dict[str, Any]:
    """The `status --json` document (pure over the folded states; see projections.present.views)."""
    return views.status_doc(states, head, now, max_concurrent=cfg.swarm.max_concurrent,
                            max_children=cfg.swarm.max_children)


def summary_groups(cfg: Any, states: dict[str, Any], now: float) -> list[tuple[str, list[str]]]:
    """[(GROUP, lines)] in the fixed order of projections.present.views.GROUPS (empty groups left out)."""
    return views.summary_groups(states, now, max_concurrent=cfg.swarm.max_concurrent,
                                max_children=cfg.swarm.max_children)


def near(name: str, known: Any, n: int = 3) -> list[str]:
    """Known names close to ``name`` (for a refusal that helps), most similar first."""
    import difflib

    ks = [k for k in known if isinstance(k, str)]
    out = difflib.get_close_matches(name, ks, n=n, cutoff=0.5)
    low = name.lower()
    out += [k for k in sorted(ks) if low and low in k.lower() and k not in out]
    return out[:n]


def unknown_agent(agent: str, known: Any) -> str | None:
    """The refusal text for an agent id the log has never classified, or None if it is known."""
    if agent in known:
        return None
    hint = near(agent, known)
    return (f"unknown agent {safe(agent, 80)!s}" + (f"; did you mean: {', '.join(safe(h, 80) for h in hint)}?"
            if hint else f" ({len(known)} known agent(s); see `fleetwatch status`)") + "; --force records anyway")


# ---- commands ---------------------------------------------------------------------------------
# ---- the commands' bodies (no typer: the typer commands below and watcher.cli.fast call these)
def gc_paused(fn: Callable[..., None]) -> Callable[..., None]:
    """Run a one-shot reader with the cyclic GC off. Decoding the snapshots allocates ~10^5
    containers on a big log and each gen-0/1 collection on the way scans them again; they are JSON
    trees, never cycles, so reference counting
    frees them all the same."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        was = gc.isenabled()
        gc.disable()
        try:
            fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()
    return run


@gc_paused
def status(config: str | None = None, db: str | None = None, json: bool = False) -> None:
    """`fleetwatch status` (options as the command's)."""
    from events.lock import LocksRead

    now = time.time()
    locks = LocksRead()  # the kernel's slow first read of /proc/locks, meanwhile the rest runs
    cfg, states, head, note = load_states(config, db, STATUS_READS, {"notify": notify_health_view()})
    if note:
        print(f"fleetwatch: {safe(note)}", file=sys.stderr)  # it names the path
    doc = build_status(cfg, states, head, now)
    doc["watcher"] = watcher_state(cfg, db, note, locks)
    from watcher.config import db_path
    from watcher.hub.health import view

    hub = view(db_path(cfg, db), now)  # a hub's log: the hub's own health (watcher/hub/health.py)
    if hub is not None:
        from projections.present.hub import mark_stale

        doc["hub"] = hub
        mark_stale(doc["agents"], hub)
    if json:
        sys.stdout.write(inert_json(_json.encode(doc).decode()) + "\n")
    elif sys.stdout.isatty():
        render.status_rich(doc)
    else:
        sys.stdout.write(render.status_plain(doc))
    if hub is not None and not json:
        from projections.present.hub import host_lines, hub_line

        sys.stdout.write("\n".join([hub_line(hub), *(f"  {x}" for x in host_lines(hub))]) + "\n")


@gc_paused
def summary(config: str | None = None, db: str | None = None, json: bool = False) -> None:
    """`fleetwatch summary` (options as the command's)."""
    from events.lock import LocksRead

    now = time.time()
    locks = LocksRead()
    cfg, states, head, note = load_states(config, db, TABLE_READS, {"notify": notify_health_view()})
    if note:
        print(f"fleetwatch: {safe(note)}", file=sys.stderr)  # it names the path
    groups = summary_groups(cfg, states, now)
    w = watcher_state(cfg, db, note, locks)
    if json:
        sys.stdout.write(inert_json(_json.encode({"head": head, "watcher": w, "groups": [
            {"group": g, "count": len(lines), "items": lines} for g, lines in groups]}).decode()) + "\n")
    elif sys.stdout.isatty():
        render.summary_rich(groups, len((states.get("fleet") or {}).get("agents", {})))
    else:
        sys.stdout.write(render.summary_text(groups, len((states.get("fleet") or {}).get("agents", {}))))


def register(app: Any) -> None:
    from typing import Annotated

    import typer

    from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, errors

    @app.command("status")
    @errors
    def status_cmd(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
        """Fleet by class with ages, DoD per agent, missions, swarm groups, runs, sources."""
        status(config, db, json)

    @app.command("summary")
    @errors
    def summary_cmd(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
        """The one short text to read: RECLAMA > DICE_TERMINADO > ESTANCADO > MAL_LANZADO, then
        approvals and violations. One line per item, counts per group."""
        summary(config, db, json)

    @app.command("verdict")
    @errors
    def verdict_cmd(
        agent: Annotated[str, typer.Argument(help="The agent whose DoD was checked.")],
        verdict: Annotated[str, typer.Argument(help="met | failed | unevaluable")],
        verifier: Annotated[str, typer.Option("--verifier", help="Who checked (never the agent itself).")],
        evidence: Annotated[str, typer.Option("--evidence", help="What was run and what it showed.")],
        force: Annotated[bool, typer.Option("--force", help="Record even for an agent the log does not know.")] = False,
        config: ConfigOpt = None, db: DbOpt = None,
    ) -> None:
        """Record a verifier's verdict on an agent's DoD (works while the watcher runs)."""
        from events.log import EventLog
        from events.types import DodVerdict

        v = verdict.strip().lower()
        if v not in ("met", "failed", "unevaluable"):
            print(f"fleetwatch: verdict must be met, failed or unevaluable, got {safe(verdict, 40)!r}", file=sys.stderr)
            raise typer.Exit(2)
        refusal = check_verdict(agent, verifier, evidence)
        if refusal is not None:
            print(f"fleetwatch: refused: {refusal.value}; nothing written", file=sys.stderr)
            raise typer.Exit(2)
        if not force:
            from watcher.cli.plain import shown_id

            _, states, _, _ = load_states(config, db)
            known = (states.get("fleet") or {}).get("agents", {})
            agent = shown_id(agent.strip(), known)   # the id as status shows it names the agent
            why = unknown_agent(agent, known)
            if why:
                print(f"fleetwatch: refused: {why}; nothing written", file=sys.stderr)
                raise typer.Exit(2)
        cfg, path = context(config, db)
        elog = EventLog(path, durability=cfg.store.durability, create=False)
        try:
            ev = DodVerdict(agent=agent.strip(), verdict=v, verifier=verifier.strip(),
                            evidence=cap_evidence(evidence), source="cli")
            seq = elog.append([ev], time.time())[0]
        finally:
            elog.close()
        print(f"recorded dod.verdict {v} for {safe(agent.strip(), 80)} by {safe(verifier.strip(), 80)} (seq {seq})")

    @app.command("rebuild")
    @errors
    def rebuild_cmd(config: ConfigOpt = None, db: DbOpt = None,
                    check: Annotated[bool, typer.Option("--check", help="Compare with the stored snapshots; write nothing.")] = False,
                    ) -> None:
        """Replay every projection from seq 1 (and store the snapshots); --check compares instead."""
        import apsw

        from events.errors import AppendFailed, StoreError, append_hint
        from events.log import EventLog
        from watcher.runtime.rebuild_par import rebuild  # half the folds in a second process when that pays

        cfg, path = context(config, db)
        if not os.path.exists(path):
            print(f"fleetwatch: no event log yet at {safe(path)}; nothing to rebuild", file=sys.stderr)
            return
        elog = EventLog(path, durability=cfg.store.durability, create=False, readonly=check)
        try:
            if elog.readonly and not check:  # a read-only file or folder: it would fold, then fail to store
                raise StoreError("the event log is read-only here: `rebuild` stores fresh snapshots in it; "
                                 "nothing rebuilt", op="rebuild", path=path,
                                 hint="`fleetwatch rebuild --check` compares without writing; or rebuild a "
                                      "writable copy (`fleetwatch backup COPY`, then --db COPY)")
            t0 = time.perf_counter()
            try:
                p, diff = rebuild(elog, check=check, store=not check)
            except apsw.Error as e:  # storing the snapshots failed (disk full, I/O): one message, nothing changed
                raise AppendFailed(f"cannot store the rebuilt snapshots, nothing changed: {type(e).__name__}: {e}",
                                   op="rebuild", path=path, hint=append_hint(e)) from e
            dt = time.perf_counter() - t0
            damaged, untrusted = dict(elog.damaged), dict(elog.snapshot_problems)
            stored = elog.db.execute("SELECT count(*) FROM snapshots").fetchall()[0][0] if check else 0
        finally:
            elog.close()
        for seq, why in sorted(damaged.items()):  # reported by seq; the replay went on without them
            print(f"fleetwatch: seq {seq}: damaged row ({safe(why)}); skipped", file=sys.stderr)
        for name, why in sorted(untrusted.items()):
            print(f"fleetwatch: snapshot {name!r} not trusted ({safe(why)})"
                  + ("" if check else "; replaced by the rebuilt one"), file=sys.stderr)
        if diff is not None:
            print(f"fleetwatch: projection {diff.projection!r} differs at seq {diff.seq}: {safe(diff.detail)}",
                  file=sys.stderr)
            raise typer.Exit(1)
        if damaged or (check and untrusted):
            raise typer.Exit(1)
        what = "checked" if check else "rebuilt"
        print(f"{what} {len(p.mods)} projection(s) over {p.seq} event(s) in {dt:.2f}s"  # none stored: nothing compared
              + ((f": snapshots match ({stored} compared)" if stored else ": no snapshots stored, nothing to compare")
                 if check else ""))


def check_verdict(agent: str, verifier: str, evidence: str | None = None) -> "Refusal | None":
    """Why a verdict must be refused, or None. Pure. Self-verdicts are refused by identity
    (``projections.identity``: ``a 1``, ``ａ１``, Cyrillic ``а1``, ``agent:a1`` are all ``a1``)."""
    from projections.identity import blank, same_identity

    a, v = agent.strip(), verifier.strip()
    if blank(a):
        return Refusal.EMPTY_AGENT
    if blank(v):
        return Refusal.EMPTY_VERIFIER
    if same_identity(a, v):
        return Refusal.SELF_VERDICT
    if evidence is not None and blank(evidence):
        return Refusal.EMPTY_EVIDENCE
    return None


def cap_evidence(text: str, limit: int = EVIDENCE_MAX) -> str:
    """The verifier's evidence, kept verbatim up to ``limit`` characters (marked when cut)."""
    t = text.strip()
    return t if len(t) <= limit else t[: limit - 1] + "…"
