"""`ack` (acknowledge a pushed condition from a shell) and `notify-stopped` (the OnFailure push).

``fleetwatch ack SUBJECT|NOTICE [--for DUR]`` appends ``notice.acked`` (via cli) for the open
conditions the target names (see ``watcher.runtime.acks``): they are not repeated and do not
escalate; with ``--for`` the ack ends after DUR (one reminder then, if still open). Acking again
what is already acked the same way (until it clears, or to the same end) records nothing and
says "already acknowledged" (exit 0); a different ``--for`` is a new ack. Unknown targets exit 2. It works while the service runs (SQLite's own locking).

``fleetwatch notify-stopped`` is what the ``fleetwatch-onfailure.service`` unit runs when the
watcher's unit fails: one urgent push "fleetwatch stopped: <result>" through the configured
URLs (systemd passes ``$MONITOR_SERVICE_RESULT`` / ``$MONITOR_EXIT_CODE`` / ``$MONITOR_EXIT_STATUS``).
Nothing is pushed (exit 0) while another watcher holds the log's writer lock: the unit failed
because a second `run` was refused (exit 3), and the fleet is watched.
"""
from __future__ import annotations

import os
import time
from typing import Annotated, Optional

import msgspec
import typer

from events.errors import ConfigError
from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, errors, open_log

_json = msgspec.json.Encoder(order="sorted")


def register(app: typer.Typer) -> None:
    @app.command("ack")
    @errors
    def ack_cmd(
        target: Annotated[str, typer.Argument(metavar="SUBJECT|NOTICE", help="A notice id (from a push link or `tail`), or a subject: a7, agent:a7, run:T1, mission:m1.")],
        for_: Annotated[Optional[str], typer.Option("--for", help="Acknowledge for this long only (30m, 2h): then one reminder if still open. Default: until it clears.")] = None,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Acknowledge a pushed condition: no repeat, no escalation. Exit 2 if nothing open matches."""
        from projections.text import safe
        from watcher.config import parse_duration
        from watcher.runtime.acks import ack, resolve, unchanged
        from watcher.runtime.state import Projections

        secs = None
        if for_ is not None:
            secs = parse_duration(for_, "--for")
            if secs <= 0:
                raise ConfigError("--for: must be longer than 0", key="--for")
        now = time.time()
        _, log = open_log(config, db)
        try:
            st = Projections.load(log).states["notify"]
            notice, cids = resolve(log, st, target)
            same = unchanged(st, cids, now, secs)
            todo = [c for c in cids if c not in same]
            ev = ack(notice, todo, "cli", now, secs)
            if todo:  # acking again what is already acked so changes nothing: nothing is recorded
                log.append([ev], now)
        finally:
            log.close()
        if as_json:
            typer.echo(_json.encode({"notice": notice, "conditions": todo, "already": same,
                                     "until": ev.until or None}).decode())
            return
        until = f" until {ev.until}" if ev.until else " (until it clears)"
        for verb, part in (("acknowledged", todo), ("already acknowledged", same)):
            if part:
                # SUBJECT|CLASS#N: the subject (an id may hold '|' and '#') and the class
                what = ", ".join(safe(f"{c.rpartition('|')[0]} {c.rpartition('|')[2].partition('#')[0]}", 80)
                                 for c in part)
                typer.echo(f"{verb} {what}{until}" + ("" if todo else ": nothing recorded"))

    UNASKED_EVERY = 600   # s: at most one push for the exits the unit did not ask for

    def _said_lately(path: str, mark: bool = False) -> bool:
        """Whether a "stopped" push for an unasked exit of this log's watcher went out within
        ``UNASKED_EVERY`` (``<log>.stopped-said``: its mtime; touched, never written, so a full
        disk keeps it working once it exists); ``mark``: it just did."""
        stamp = path + ".stopped-said"
        try:
            if mark:
                os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600))
                os.utime(stamp)
                return True
            return 0 <= time.time() - os.stat(stamp).st_mtime < UNASKED_EVERY
        except OSError:
            return False

    @app.command("notify-stopped")
    @errors
    def notify_stopped(
        result: Annotated[Optional[str], typer.Option("--result", help="The unit's result (default: $MONITOR_SERVICE_RESULT from systemd).")] = None,
        unasked: Annotated[bool, typer.Option("--unasked", help="Run as ExecStopPost=: push only when the exit was not asked for ($SERVICE_RESULT, $EXIT_CODE, $EXIT_STATUS); the unit restarts the watcher.")] = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Push "fleetwatch stopped: <result>" (run by the OnFailure= unit). Exit 0 delivered, 1 not."""
        from projections.text import safe
        from watcher.cli.notify import say_causes
        from watcher.cli.util import context
        from watcher.runtime.deliver import Causes, Deliverer, exit_if_deliveries_hang

        from events.lock import writer_running

        cfg, path = context(config, db)
        running, pid = writer_running(path)
        if running:  # this unit failed (a second `run` refused, exit 3), but a watcher holds the log
            typer.echo(f"not pushed: another watcher (pid {pid}) holds the log {safe(path, 200)}: "
                       "the fleet is watched")
            return
        pre = "" if unasked else "MONITOR_"
        res = safe(result or os.environ.get(f"{pre}SERVICE_RESULT") or "failed", 40)
        code = safe(os.environ.get(f"{pre}EXIT_CODE", ""), 20)
        status = safe(os.environ.get(f"{pre}EXIT_STATUS", ""), 20)
        if unasked and (res == "success" or status in ("2", "3")):   # asked for, or OnFailure= says it
            typer.echo(f"not pushed: the exit was asked for or is final ({res} {code} {status}".rstrip() + ")")
            return
        if unasked and _said_lately(path):   # a watcher stopping again and again (a full disk): once
            typer.echo(f"not pushed: said less than {UNASKED_EVERY // 60} minutes ago (the unit restarts it; "
                       "OnFailure= says when it gives up)")
            return
        unit = safe(os.environ.get("MONITOR_UNIT", "fleetwatch.service"), 80)
        if not (cfg.notify.urls or cfg.notify.config):
            typer.echo("not delivered: no [notify] urls or config in the config file", err=True)
            raise typer.Exit(1)
        detail = " ".join(x for x in (code, status) if x)
        body = (f"{unit}: {res}" + (f" ({detail})" if detail else "") + "\n"
                + ("the unit starts it again in a few seconds (Restart=always)\n" if unasked else
                   "nothing is watching the fleet until it runs again\n") +
                f"journalctl --user -u {unit}")
        d = Deliverer(cfg)
        with Causes(d.secrets) as causes:
            out = d.send(f"fleetwatch stopped: {res}", body, "failure", "", priority=True)
        if out.ok:
            if unasked:
                _said_lately(path, mark=True)
            typer.echo("delivered")
            exit_if_deliveries_hang(0)
            return
        typer.echo(f"not delivered: {safe(out.error, 300)}", err=True)
        say_causes(causes.lines)
        exit_if_deliveries_hang(1)
        raise typer.Exit(1)
