"""`silence`, `unsilence`, `silences`, `notify-test`.

Silences are events (``silence.added`` / ``silence.removed``) appended through SQLite's own
locking, so they work while `fleetwatch run` holds the log; the watcher folds them on its next
tick. Silenced notices are recorded (``notice.silenced``), never sent.
"""
from __future__ import annotations

import glob
import sys
import time
import uuid
from typing import Annotated, Any, Optional

import msgspec
import typer

from projections.text import inert_json, safe

from events.errors import ConfigError, FleetwatchError
from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, errors, open_log

_json = msgspec.json.Encoder(order="sorted")


class UnknownSilence(FleetwatchError):
    """``unsilence`` named an id that is not an active silence."""

    exit_code = 1


# The notice classes the notify projection raises besides the agent classes (a silence may name
# any of them; the agent classes come from projections.classes).
NOTICE_CLASSES = ("APPROVAL_REQUIRED", "RULE_VIOLATED", "CONTRACT_CHANGED", "SELF_APPROVED", "CLAIM_UNVERIFIED",
                  "SOURCE_FAILED", "STEP_OVERDUE", "RUN_ABANDONED", "NOTICE_ABANDONED", "VERDICT",
                  "MISSION_COMPLETED", "SWARM", "FLAPPING", "HOST_SILENT", "HOST_GAP", "HOST_REFUSED",
                  "HUB_CONSUMER_TAKEN")


def silence_classes() -> list[str]:
    """Every class a silence can name: the agent classes, then the notice classes."""
    from projections import classes

    return [*classes.ORDER, *NOTICE_CLASSES]


def refusal(subject: str | None, cls: str | None, agents: dict[str, Any]) -> str | None:
    """Why a silence must be refused (an unknown class, an agent the log never saw), or None.
    ``agents``: the log's known agents (``known_agents``)."""
    from projections.text import safe

    if cls is not None:
        known = silence_classes()
        if cls.strip().upper() not in known:
            return f"unknown class {safe(cls, 40)}; classes: {', '.join(known)}; --force mutes anyway"
    if subject:
        s = normalise_subject(subject)
        fam, _, aid = s.partition(":")
        if fam == "agent":
            from watcher.cli.status import unknown_agent

            if not any(c in aid for c in "*?["):  # a pattern is not a typo (a known id is escaped: silence_match)
                return unknown_agent(aid, agents)
    return None


def known_agents(config: str | None, db: str | None) -> dict[str, Any]:
    from watcher.cli.status import load_states

    _, states, _, _ = load_states(config, db)
    return (states.get("fleet") or {}).get("agents", {})


def silence_match(subject: str, agents: dict[str, Any]) -> str:
    """The glob a silence of ``subject`` records. Silences match subjects by glob, so an agent
    whose id holds ``* ? [`` (``b[12]``, ``a*``: ids come from files) is escaped to mean only
    itself: ``silence 'b[12]'`` recorded ``agent:b[12]``, which muted b1 and not b[12]. Any
    other subject with those characters is the pattern it says (``agent:test-*``)."""
    s = normalise_subject(subject)
    fam, _, aid = s.partition(":")
    if fam == "agent" and any(c in aid for c in "*?[") and aid in agents:
        return "agent:" + glob.escape(aid)
    return s


def normalise_subject(subject: str) -> str:
    """``a7`` -> ``agent:a7``; ``agent:a7``, ``run:T1``, globs like ``agent:*`` are kept."""
    s = subject.strip()
    return s if ":" in s else f"agent:{s}"


def active_silences(log: Any, now: float) -> dict[str, dict[str, Any]]:
    """id -> silence fields, for silences not removed and not expired at ``now``."""
    from events.log import parse_iso

    out: dict[str, dict[str, Any]] = {}
    for rec in log.read(0, types=["silence.added", "silence.removed"]):
        ev = rec.event
        if rec.type == "silence.added":
            out[ev.silence] = {"id": ev.silence, "subject": ev.subject_match, "class": ev.class_match,
                               "until": ev.until, "reason": ev.reason, "seq": rec.seq}
        else:
            out.pop(ev.silence, None)
    return {k: v for k, v in out.items() if not v["until"] or parse_iso(v["until"]) > now}


def register(app: typer.Typer) -> None:
    @app.command("silence")
    @errors
    def silence(
        subject: Annotated[Optional[str], typer.Argument(help="Subject to mute: an agent id (a7), or agent:a7, run:T1, mission:m1, source:fleet; globs like 'agent:*' work.")] = None,
        cls: Annotated[Optional[str], typer.Option("--class", help="Mute this class everywhere (RECLAMA, ESTANCADO, RULE_VIOLATED, SOURCE_FAILED, ...; an unknown class is refused with the list).")] = None,
        for_: Annotated[Optional[str], typer.Option("--for", help="How long, required: 30m, 2h, 1d.")] = None,
        force: Annotated[bool, typer.Option("--force", help="Mute even an agent or class the log does not know.")] = False,
        reason: Annotated[str, typer.Option("--reason", help="Why (shown by `silences`).")] = "",
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Mute notices for a subject and/or a class for a while. Muted notices are recorded in
        the log (notice.silenced), not sent. Prints the silence id (for `unsilence`)."""
        from events.log import iso
        from events.types import SilenceAdded
        from watcher.config import parse_duration

        if not subject and not cls:
            raise typer.BadParameter("give a SUBJECT, --class CLASS, or both")
        if for_ is None:
            raise typer.BadParameter("say for how long, e.g. --for 2h (30m, 1d)", param_hint="--for")
        agents: dict[str, Any] = {}  # loaded once (the log's projections), only for an agent subject
        if subject and normalise_subject(subject).startswith("agent:"):   # an id as status shows it
            from watcher.cli.plain import shown_id

            agents = known_agents(config, db)
            subject = "agent:" + shown_id(normalise_subject(subject)[6:], agents)
        why = refusal(subject, cls, agents) if not force else None
        if why:
            print(f"fleetwatch: refused: {why}; nothing written", file=sys.stderr)
            raise typer.Exit(2)
        secs = parse_duration(for_, "--for")
        if secs <= 0:
            raise ConfigError("--for: must be longer than 0", key="--for")
        now = time.time()
        sid = uuid.uuid4().hex[:8]
        ev = SilenceAdded(silence=sid, subject_match=silence_match(subject, agents) if subject else None,
                          class_match=cls.strip().upper() if cls else None, until=iso(now + secs),
                          reason=reason[:200])
        _, log = open_log(config, db, create=True)
        try:
            log.append([ev], now)
        finally:
            log.close()
        if as_json:
            typer.echo(inert_json(_json.encode({"id": sid, "subject": ev.subject_match, "class": ev.class_match,
                                                "until": ev.until, "reason": ev.reason}).decode()))
        else:
            shown = normalise_subject(subject) if subject else None
            if shown and shown != ev.subject_match:  # an id holding glob characters, escaped
                shown += " (that agent only, not a pattern)"
            what = " ".join(x for x in (shown, ev.class_match and f"class {ev.class_match}") if x)
            typer.echo(f"silence {sid}: {safe(what, 200)} muted until {ev.until} (undo: fleetwatch unsilence {sid})")

    @app.command("unsilence")
    @errors
    def unsilence(
        silence_id: Annotated[str, typer.Argument(metavar="ID", help="The id printed by `silence` (see `silences`).")],
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """End a silence now."""
        from events.types import SilenceRemoved

        now = time.time()
        _, log = open_log(config, db)
        try:
            if silence_id not in active_silences(log, now):
                raise UnknownSilence(f"no active silence with id {silence_id!r}", op="unsilence",
                                     hint="list them with `fleetwatch silences`")
            log.append([SilenceRemoved(silence=silence_id)], now)
        finally:
            log.close()
        typer.echo(f"silence {safe(silence_id, 40)} removed")

    @app.command("silences")
    @errors
    def silences(as_json: JsonOpt = False, config: ConfigOpt = None, db: DbOpt = None) -> None:
        """List active silences."""
        _, log = open_log(config, db)
        try:
            act = active_silences(log, time.time())
        finally:
            log.close()
        if as_json:
            for v in act.values():
                typer.echo(inert_json(_json.encode(v).decode()))
            return
        if not act:
            typer.echo("no active silences")
        for v in act.values():
            what = " ".join(x for x in (v["subject"], v["class"] and f"class {v['class']}") if x)
            typer.echo(safe(f"{v['id']}  {what}  until {v['until']}", 300)
                       + (f"  ({safe(v['reason'], 200)})" if v["reason"] else ""))

    @app.command("notify-test")
    @errors
    def notify_test(config: ConfigOpt = None, db: DbOpt = None) -> None:
        """Send one test push through the configured [notify] URLs. Exit 0 if delivered, 1 if not."""
        from watcher.cli.util import context
        from watcher.runtime.deliver import Causes, exit_if_deliveries_hang
        from watcher.runtime.notifier import Deliverer

        cfg, _ = context(config, db)
        if not (cfg.notify.urls or cfg.notify.config):
            typer.echo("not delivered: no [notify] urls or config in the config file", err=True)
            raise typer.Exit(1)
        d = Deliverer(cfg)
        with Causes(d.secrets) as causes:
            out = d.send("fleetwatch test", "If you can read this, fleetwatch can reach you.", "info", "")
        if out.ok:
            typer.echo("delivered" + (f" ({out.error})" if out.error else ""))
            if out.partial:  # some services failed: say why
                say_causes(causes.lines)
            exit_if_deliveries_hang(0)
            return
        typer.echo(f"not delivered: {safe(out.error, 300)}", err=True)
        say_causes(causes.lines)
        exit_if_deliveries_hang(1)
        raise typer.Exit(1)


def say_causes(lines: list[str]) -> None:
    """apprise's own words on a failed send (``deliver.Causes``: redacted), one escaped line each
    on stderr: its bare "JSON failure" hid an HTTP 500, a refused connection, a DNS failure."""
    for line in lines:
        typer.echo(f"  apprise: {safe(line, 300)}", err=True)
