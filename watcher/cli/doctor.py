"""`fleetwatch doctor`: a checklist (✓ ok, ! warning, ✗ failure + hint); exit 1 on any ✗.

Checks the config, each source (agents found; windows for tmux), the log (writable, `verify`
head), notify URLs (parsed by apprise, never printed: only their count and schemes) and the
systemd unit (pointing at this install; not installed is a warning, since the service is optional).
"""

import logging
import os
import re
import shlex
import shutil
import subprocess
import time

import typer

from events.errors import FleetwatchError
from projections.text import safe
from watcher.service.units import UNITS, fleetwatch_bin, is_pristine, read_unit, units_dir

# ---- doctor ---------------------------------------------------------------------------------
class Checklist:
    """Collects ✓ / ! / ✗ lines; ``failed`` is True after any ✗."""

    def __init__(self, echo=typer.echo):
        self.echo = echo
        self.failed = False

    def line(self, mark: str, what: str, hint: str = "") -> None:
        """One check; ``what`` and ``hint`` may carry paths and errors from files agents write:
        escaped, so each check stays one line."""
        self.failed |= mark == "✗"
        self.echo(f"{mark} {safe(what, 400)}" + (f"\n    hint: {safe(hint, 400)}" if hint else ""))

    def ok(self, what: str) -> None:
        self.line("✓", what)

    def warn(self, what: str, hint: str = "") -> None:
        self.line("!", what, hint)

    def bad(self, what: str, hint: str = "") -> None:
        self.line("✗", what, hint)


def _scheme(url: str) -> str:
    m = re.match(r"\s*([a-zA-Z][a-zA-Z0-9+.\-]*)://", url)
    return m.group(1).lower() if m else "?"


def _quiet_apprise():
    """Apprise logs rejected URLs in full: silence it while we test them."""
    lg = logging.getLogger("apprise")
    prev = lg.disabled
    lg.disabled = True
    return lambda: setattr(lg, "disabled", prev)


def check_config(ck: Checklist, config: str | None):
    from events.errors import ConfigError
    from watcher.config import config_path, load

    path = config_path(config)
    if not os.path.exists(path):
        ck.bad(f"config: {path} not found", "create one with `fleetwatch init`")
        return None
    try:
        cfg = load(config, required=True, check_paths=True)
    except ConfigError as e:
        ck.bad(f"config: {e}", e.hint or f"fix key {e.key!r} in {path}" if e.key else e.hint)
        try:  # keep checking what does not depend on the failing paths
            return load(config, required=True, check_paths=False)
        except ConfigError:
            return None
    ck.ok(f"config: {path} parses ({len(cfg.sources)} source{'s' * (len(cfg.sources) != 1)})")
    return cfg


def check_sources(ck: Checklist, cfg, now: float) -> None:
    if not cfg.sources:
        ck.warn("sources: none configured, nothing to watch", "add a [[sources]] entry (see `fleetwatch init`)")
        return
    from watcher.sources import make

    for spec in cfg.sources:
        label = f"source {spec.name} ({spec.kind})"
        try:
            src = make(spec)
            try:
                res = src.poll(now)
                if any(e.fails == 1 for e in getattr(src, "cache", {}).values()):
                    time.sleep(min(0.5, cfg.dur("watch.debounce")))  # the two-read rule: read again
                    res = src.poll(now)
            finally:
                getattr(src, "close", lambda: None)()
        except Exception as e:  # doctor reports, never crashes
            ck.bad(f"{label}: {type(e).__name__}: {e}", "check this source's settings")
            continue
        if not res.ok:
            hint = "check the path, command or query of this source"
            if res.error_class == "root-missing" and spec.glob:
                import shlex

                from watcher.config import _glob_root, expand

                hint = f"create it: mkdir -p {shlex.quote(_glob_root(expand(spec.glob)))} (or fix the glob)"
            ck.bad(f"{label}: {res.error or 'failed'}", hint)
            continue
        n = len(res.agents) + len(res.runs) + len(res.rows)
        what = "agents" if res.agents or spec.kind == "goals" or spec.entity == "agent" else \
            "runs" if spec.kind == "steps" else "rows"
        if spec.kind == "tmux":  # tmux enriches agents: it finds windows, not agents
            n, what = tmux_windows(src), "windows"
            if n == 0 and not tmux_server_up(spec.socket):
                sock = f" -L {spec.socket}" if spec.socket else ""
                ck.warn(f"{label}: no tmux server runs on {'socket ' + spec.socket if spec.socket else 'the default socket'}"
                        " (no windows to watch yet)",
                        f"start it: tmux{sock} new-session -d -s fleet (then new-window per agent)")
                continue
        bad = sum(1 for a in res.agents if a.error) + sum(1 for r in res.runs if r.error)
        extra = f" ({bad} unreadable: MAL_LANZADO)" if bad else ""
        if n == 0:
            ck.warn(f"{label}: readable, 0 {what} found", "is the glob/command right? (fine if none run yet)")
        else:
            ck.ok(f"{label}: {n} {what}{extra}")


def tmux_server_up(socket: str | None) -> bool:
    """Whether a tmux server answers on ``socket`` (``tmux -L SOCKET list-sessions``); True when
    that cannot be told (no tmux: the source's own check says so)."""
    try:
        r = subprocess.run(["tmux", *(["-L", socket] if socket else []), "list-sessions"], capture_output=True,
                           text=True, timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return True
    return not (r.returncode != 0 and ("no server running" in r.stderr or "error connecting" in r.stderr))


def check_extras(ck: Checklist, cfg) -> None:
    """A configured surface whose extra is not installed is a ✗ (it would not start: one log
    line); the board's, used from a terminal, a warning."""
    import importlib.util

    def have(mod: str) -> bool:
        try:
            return importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            return False

    for sec, mod, extra, what in (("web", "werkzeug", "web", "the phone page and action endpoint"),
                                  ("forward", "nats", "hub", "forwarding to the hub"),
                                  ("hub", "nats", "hub", "`fleetwatch hub`")):
        if getattr(cfg, sec, None) is not None and not have(mod):
            ck.bad(f"[{sec}] is configured but the {extra!r} extra is missing ({mod}): {what} will not start",
                   f"pip install 'fleetwatch[{extra}]' into this install's environment")
    if not have("textual"):
        ck.warn("board: Textual is not installed: `fleetwatch board` will not start",
                "pip install 'fleetwatch[board]' (optional: status, summary and tail need nothing more)")


def check_nats(ck: Checklist, cfg, db: str | None = None) -> None:
    """``[forward]`` and ``[hub]``: NATS reachable (within a few seconds) and the stream there."""
    from watcher.hub.health import probe

    for sec in ("forward", "hub"):
        c = getattr(cfg, sec, None)
        if c is None:
            continue
        urls = [c.nats] if isinstance(c.nats, str) else list(c.nats)
        where = ", ".join(urls)
        how, detail = probe(c.nats, c.creds, c.stream)
        if how == "no-extra":
            continue  # check_extras said so
        if sec == "forward":  # where this host's forwarder is in the log
            from watcher.config import db_path
            from watcher.hub.health import forwarded
            from watcher.hub.wire import host_name

            pos = forwarded(db_path(cfg, db), c.stream, host_name(c.host))
            if pos is not None:
                detail += f"; this host forwarded up to seq {pos[0]} of {pos[1]}"
        if how == "ok":
            ck.ok(f"{sec}: NATS {where} reachable; {detail}")
        elif how == "no-stream":
            ck.warn(f"{sec}: NATS {where} reachable; {detail}",
                    "created by the first `fleetwatch run` with [forward] or `fleetwatch hub`")
        else:
            ck.bad(f"{sec}: cannot reach NATS at {where} ({detail})",
                   f"is nats-server running with JetStream (nats-server -js)? check [{sec}] nats"
                   + (" and creds" if c.creds else ""))


def tmux_windows(src) -> int:
    """How many windows in scope a polled tmux source saw (its ``wins``)."""
    return len(getattr(src, "wins", None) or ())


def check_log(ck: Checklist, cfg, db: str | None) -> None:
    from events.errors import FleetwatchError as FE
    from events.log import EventLog
    from watcher.config import db_path

    path = db_path(cfg, db)
    if not os.path.exists(path):
        from watcher.cli.plain import explicit_db

        parent = os.path.dirname(os.path.abspath(path))
        if explicit_db(db, cfg) and not os.path.isdir(parent):  # `run` refuses it: a typo, not a folder to make
            ck.bad(f"log: the folder {parent} does not exist (a typo?)",
                   "fix --db / $FLEETWATCH_DB / [store] path, or run `fleetwatch run --create` once to make it")
            return
        probe = parent
        while not os.path.exists(probe):
            probe = os.path.dirname(probe)
        if os.path.isdir(probe) and os.access(probe, os.W_OK | os.X_OK):
            ck.ok(f"log: {path} not created yet (the first `fleetwatch run` creates it)")
        else:
            ck.bad(f"log: cannot create {path} ({probe} is not writable)", "set [store] path or --db to a writable place")
        return
    try:
        # read-only: a check writes nothing (a writer's open migrated an older log under a running old watcher)
        with EventLog(path, durability=cfg.store.durability, create=False, readonly=True) as elog:
            res = elog.verify()
        from events.records import _writable

        readonly = not _writable(elog.path)  # the file and its folder (-wal, -shm): what `run` needs
    except FE as e:
        ck.bad(f"log: {e}", e.hint or "check [store] path / --db")
        return
    if not res.ok:  # the chain, the head anchor, the append-only guards or a snapshot's binding
        where = f"seq {res.bad_seq}" if res.bad_seq is not None else f"table {res.table}"
        ck.bad(f"log: {path} broken at {where}: {res.problem}", "run `fleetwatch verify` (removed guards: "
               "`fleetwatch verify --restore-guards`); keep a copy for inspection (`fleetwatch backup --as-is PATH`) "
               "and start a new log with --db")
        return
    if readonly:
        ck.bad(f"log: {path} is not writable here (verify intact, {res.count} events): `fleetwatch run` cannot "
               "append to it", "check the owner and mode of the file and its folder (and whether the mount is read-only)")
    else:
        ck.ok(f"log: {path} writable, verify intact ({res.count} events, head seq {res.head_seq})")
    from events import anchor

    for kept in anchor.lost(path):  # a writer found the log cut (or replaced) and kept its head file
        ck.warn(f"log: {path} once lost events: the head it had is kept in {kept}",
                "its line SEQ:HASH is that head: `fleetwatch verify --expect-head SEQ:HASH --db COPY` finds a copy "
                "that still holds it; delete the file once dealt with")


def disabled_plugins() -> dict[str, str]:
    """scheme -> why apprise cannot use it here (a plugin whose packages or platform are missing)."""
    import apprise

    out: dict[str, str] = {}
    for s in apprise.Apprise().details(show_disabled=True, show_requirements=True).get("schemas", []):
        if s.get("enabled", True):
            continue
        req = (s.get("requirements") or {}).get("packages_required") or []
        why = f"needs {', '.join(map(str, req))}" if req else "not available on this system"
        for proto in [*(s.get("protocols") or ()), *(s.get("secure_protocols") or ())]:
            out[str(proto).lower()] = f"{s.get('service_name', proto)} plugin {why}"
    return out


def check_notify(ck: Checklist, cfg) -> None:
    urls, conf = list(cfg.notify.urls), cfg.notify.config
    if not urls and not conf:
        ck.warn("notify: no URLs configured: nothing will be pushed", "add [notify] urls (apprise URLs)")
        return
    import apprise

    restore = _quiet_apprise()
    try:
        bad = [i for i, u in enumerate(urls, 1) if not apprise.Apprise().add(u)]
        conf_ok = True
        if conf:
            from watcher.config import expand

            ac = apprise.AppriseConfig()
            conf_ok = os.path.isfile(expand(conf)) and bool(ac.add(expand(conf)))
    finally:
        restore()
    schemes = ", ".join(sorted({_scheme(u) for u in urls})) or "-"
    plugins = disabled_plugins() if bad else {}
    for i in (i for i in bad if _scheme(urls[i - 1]) in plugins):  # known scheme, plugin not usable
        ck.bad(f"notify: URL #{i} ({_scheme(urls[i - 1])}): {plugins[_scheme(urls[i - 1])]}",
               "install what the plugin needs (pip install into the same venv), or use another service")
    plugin_bad = [i for i in bad if _scheme(urls[i - 1]) in plugins]
    bad = [i for i in bad if _scheme(urls[i - 1]) not in plugins]
    if bad:
        ck.bad(f"notify: {len(bad)} of {len(urls)} URLs do not parse (#{', #'.join(map(str, bad))}; "
               f"schemes: {', '.join(_scheme(urls[i - 1]) for i in bad)})",
               "see https://github.com/caronc/apprise/wiki for the URL format; then `fleetwatch notify-test`")
    elif urls and not plugin_bad:
        ck.ok(f"notify: {len(urls)} URL{'s' * (len(urls) != 1)} parse ({schemes})")
    if conf and not conf_ok:
        ck.bad("notify: the apprise config file [notify] config cannot be read", "check the path and its format")
    elif conf:
        ck.ok("notify: apprise config file readable")


def check_secret_files(ck: Checklist, cfg) -> None:
    """A config or apprise config file that holds tokens must not be readable by others."""
    from watcher.config import expand

    n = cfg.notify
    holds = bool(n.urls or n.escalate_urls or n.heartbeat_url or any(r.urls for r in n.routes))
    files = [(cfg.config_path, holds, "config")] + ([(expand(n.config), True, "[notify] config")] if n.config else [])
    for path, has_tokens, what in files:
        try:
            mode = os.stat(path).st_mode & 0o777 if path and has_tokens else 0
        except OSError:
            continue
        if mode & 0o077:
            ck.warn(f"{what}: {path} holds notify tokens and is readable by others (mode {mode:04o})",
                    f"chmod 600 {path}")


def check_unit(ck: Checklist) -> None:
    d = units_dir()
    p = d / UNITS[0]
    if not p.exists():  # optional: `fleetwatch run` in a terminal or under another supervisor is fine
        ck.warn(f"service: {p} not installed (optional)", "for a systemd user service: `fleetwatch install-service`")
        return
    try:
        text = read_unit(p)
        binary = fleetwatch_bin()
    except OSError as e:
        ck.bad(f"service: {p}: {e.strerror or e}", "move it away, then rerun `fleetwatch install-service`")
        return
    except FleetwatchError as e:
        ck.bad(f"service: {e}", "rerun `fleetwatch install-service`")
        return
    exe = _unit_exec(text)
    if exe != binary:
        ck.bad(f"service: {p.name} runs {exe}, not this install ({binary})",
               "rerun `fleetwatch install-service` from the install you want (--force if edited by hand)")
        return
    timer = "" if (d / UNITS[2]).exists() else " (no verify timer)"
    note = "" if is_pristine(text) else " (edited by hand)"
    ck.ok(f"service: {p.name} runs this install{note}{timer}")
    state = _unit_state(UNITS[0])
    if state is not None and state not in ("active", "reloading", "activating"):
        ck.warn(f"service: {p.name} is {state}", "systemctl --user enable --now fleetwatch.service; "
                "then journalctl --user -u fleetwatch -e")


def _unit_state(unit: str) -> str | None:
    """`systemctl --user is-active` when a user manager answers, else None."""
    sc = shutil.which("systemctl")
    if sc is None:
        return None
    try:
        r = subprocess.run([sc, "--user", "is-active", unit], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = r.stdout.strip()
    return out if out in ("active", "inactive", "failed", "activating", "deactivating", "reloading") else None


def pipe_safe(echo):
    """``echo`` that survives a reader closing the pipe (`doctor | head -3`): the rest of the
    output goes to /dev/null and the checks go on, so the exit status still says unhealthy."""
    def out(*a, **kw) -> None:
        try:
            echo(*a, **kw)
        except BrokenPipeError:
            from watcher.cli.log import _quiet_pipe

            _quiet_pipe()
    return out


def doctor(config: str | None, db: str | None, echo=typer.echo) -> int:
    echo = pipe_safe(echo)
    ck = Checklist(echo)
    cfg = check_config(ck, config)
    if cfg is not None:
        check_sources(ck, cfg, time.time())
        check_log(ck, cfg, db)
        check_notify(ck, cfg)
        check_extras(ck, cfg)
        check_nats(ck, cfg, db)
        check_secret_files(ck, cfg)
        from watcher.cli.doctor_hostile import check_hostile

        check_hostile(ck, cfg, db)
    else:
        from watcher.config import Config, config_path

        why = "the config does not parse" if os.path.exists(config_path(config)) else "no config"
        if db or os.environ.get("FLEETWATCH_DB"):  # a log named without the config: checked all the same
            ck.warn(f"sources, notify: not checked ({why})")
            check_log(ck, Config(), db)
        else:
            ck.warn(f"sources, log, notify: not checked ({why})")
    check_unit(ck)
    echo("unhealthy: fix the ✗ lines above" if ck.failed else "healthy")
    return 1 if ck.failed else 0


def _unit_exec(text: str) -> str | None:
    m = re.search(r"^ExecStart=(.*)$", text, re.M)
    if not m:
        return None
    try:
        words = shlex.split(m.group(1).replace("%%", "%").replace("$$", "$"))
    except ValueError:
        return None
    return words[0] if words else None
