"""Config: TOML decoded and validated with msgspec (strict: unknown keys are errors).

Lookup: ``--config PATH``, else ``$FLEETWATCH_CONFIG``, else ``$XDG_CONFIG_HOME/fleetwatch/config.toml``.
The log path: ``--db`` > ``$FLEETWATCH_DB`` > ``[store] path`` > ``$XDG_STATE_HOME/fleetwatch/events.db``.
``~`` and ``$VARS`` are expanded in every path and glob. Durations are ``<int><ms|s|m|h|d>``.
Every problem raises :class:`ConfigError` naming the key (exit 2 from the CLI).
"""
from __future__ import annotations

import os
import re
import shlex
from typing import Literal

import msgspec

from events.errors import ConfigError
from watcher.config_launch import Launch, check as check_launch
from watcher.config_limits import MAX_CONFIG_BYTES, check_ranges, private_dir, read_regular  # noqa: F401
from watcher.config_sources import EXAMPLE, KINDS

_DUR = r"^\s*([0-9]{1,15})\s*(ms|s|m|h|d)\s*$"   # ASCII digits (\d took "١h"); as text: re compiles at first use
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DURATION = 36500 * 86400.0   # a century ("never" in tests is 10000d); more is a typo that overflows timers


def parse_duration(value: object, key: str = "duration") -> float:
    """``"90s"`` -> 90.0 seconds. Integers are seconds. Anything else, or more than
    ``MAX_DURATION`` -> ConfigError(key)."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a duration like 90s, got {value!r}", key=key)
    secs: float | None = None
    if isinstance(value, int) and value >= 0:
        secs = float(value) if value <= MAX_DURATION else MAX_DURATION + 1
    elif isinstance(value, str):
        m = re.match(_DUR, value)
        if m:
            secs = int(m.group(1)) * _UNIT[m.group(2)]
    if secs is None:
        raise ConfigError(f"{key}: expected a duration like 500ms, 90s, 15m, 4h or 1d, got {str(value)[:40]!r}",
                          key=key)
    if secs > MAX_DURATION:
        raise ConfigError(f"{key}: {str(value)[:40]!r} is too long (at most 36500d)", key=key)
    return secs


def expand(path: str) -> str:
    return os.path.expanduser(os.path.expandvars(path))


def xdg(kind: str) -> str:
    env, default = {"config": ("XDG_CONFIG_HOME", "~/.config"), "state": ("XDG_STATE_HOME", "~/.local/state")}[kind]
    return os.path.join(expand(os.environ.get(env) or default), "fleetwatch")


Dur = str | int


class _S(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class Store(_S):
    path: str | None = None
    durability: Literal["full", "normal"] = "full"


class Watch(_S):
    interval: Dur = "2s"
    debounce: Dur = "100ms"
    resync: Dur = "30s"   # while inotify is healthy every file is stat'ed once per resync, a slice per interval (else every interval)
    resync_rate: int = 100  # ... but at most this many files a second: over resync x rate files a round takes files / rate s


class Classify(_S):
    stall_after: Dur = "15m"
    claim_unverified_after: Dur = "30m"
    fanout_max: int = 8                        # more new agents than this within fanout_window -> fleet.fanout
    fanout_window: Dur = "1m"
    busy_silence: Dur = "10m"                  # busy, no hook event and no pane activity this long -> ESTANCADO
    busy_silence_tool: Dur = "1h"              # the same while a tool call is open (PreToolUse, no PostToolUse)


class Source(_S):
    name: str
    kind: str                        # one of watcher/config_sources.py KINDS
    glob: str | None = None          # goals, steps
    argv: list[str] | None = None    # command
    timeout: Dur = "10s"             # command, sqlite; any kind: a poll longer than this fails the source
    socket: str | None = None        # tmux: -L SOCKET
    session: str | None = None       # tmux: only windows of this session (exact name)
    agent_windows: list[str] | None = None    # tmux: window-name globs that are agents (no goal.json: MAL_LANZADO)
    exclude_windows: list[str] | None = None  # tmux: window-name globs never an agent (a shell, an editor, the board)
    entity: Literal["agent", "wp", "circuit", "swarm"] | None = None  # command (agent|swarm), sqlite
    path: str | None = None          # sqlite database
    query: str | None = None         # sqlite
    key: list[str] | None = None     # sqlite
    max_bytes: int | None = None     # goals, steps: per file (default 1 MiB); command: output (16 MiB)


class Steps(_S):
    deadline: Dur = "45m"                      # default per-step deadline while in `begin`
    deadlines: dict[str, Dur] = {}             # per step name
    board_daily_quota: int = 3                 # confirmed uploads per board per UTC day (board-daily-quota)
    sessions_per_day: int = 12                 # outer-loop events per UTC day (session-daily-cap)
    inactive_boards: list[str] = []            # a launch on one of these breaks inactive-board


class Missions(_S):
    max_children_active: int = 3               # WPs RUNNING/CHECKING at once per mission (children-active-cap)


class Swarm(_S):
    max_concurrent: int = 8                    # running children per group (0 = no cap)
    max_children: int = 50                     # active (queued + running) children per group
    max_total: int = 200                       # distinct children a group ever had


class Nudge(_S):
    enabled: bool = False
    argv: list[str] = []                       # e.g. ["tmux", "send-keys", "-t", "{target}", "close your DoD", "Enter"]
    max_per_stall: int = 1
    after: Dur = "0s"
    gap: Dur = "5m"                            # at least this between two nudges of one stall


class NotifyRoute(_S):
    """``[[notify.routes]]``: ``match`` on severity, class or subject (glob); its own ``urls``."""
    match: dict[str, str] = {}
    urls: list[str] = []


class Web(_S):
    """``[web]``: the action endpoint and phone page (watcher/web/); off when absent."""
    listen: str = "127.0.0.1:8765"             # host:port
    public_url: str = ""                       # base of the links in push bodies; default http://<listen>
    key_file: str = ""                         # HMAC key (0600); default $XDG_STATE_HOME/fleetwatch/web.key
    token_ttl: Dur = "24h"


class Notify(_S):
    urls: list[str] = []
    config: str | None = None                  # an apprise config file (alternative to urls)
    group_wait: Dur = "10s"
    group_interval: Dur = "5m"
    repeat_interval: Dur = "4h"
    min_severity: Literal["info", "warning", "urgent"] = "warning"
    tags: dict[str, str] = {}                  # severity -> apprise tag
    retry: list[Dur] = msgspec.field(default_factory=lambda: ["10s", "30s", "2m", "10m"])
    timeout: Dur = "10s"
    flap_high: float = 50.0
    flap_low: float = 25.0
    source_failed_after: Dur = "1m"
    # the phone loop (projections/notify/escalate.py, notify_quiet.py; docs/readme/notify.md)
    escalate_after: Dur = "0s"                 # urgent, not acked, not cleared this long -> pushed again once (0 = off)
    escalate_urls: list[str] = []              # empty: the same urls at top priority
    quiet: list[str] = []                      # local time windows "22:00-07:00"
    quiet_tz: str = ""                         # default: the system zone
    quiet_urgent: bool = True                  # urgent still pushed during quiet hours
    send_resolved: bool = False                # one grouped "all clear" for pushed conditions that cleared
    heartbeat_url: str = ""                    # GET every heartbeat_every while ticks are healthy
    heartbeat_every: Dur = "5m"
    routes: list[NotifyRoute] = []             # [[notify.routes]]: first match wins; urls above = the default


class Forward(_S):
    """``[forward]``: publish this host's events to NATS JetStream (watcher/hub/forwarder.py)."""
    nats: str | list[str] = "nats://127.0.0.1:4222"   # one URL or a cluster's URLs
    stream: str = "FLEETWATCH"                 # created if missing (file storage)
    host: str = ""                             # default: the hostname (made a subject token)
    creds: str | None = None                   # a nats .creds file
    batch: int = 100                           # events per publish round (acks awaited together)
    heartbeat: Dur = "30s"                     # liveness ping to the hub while idle


class Hub(_S):
    """``[hub]``: `fleetwatch hub` consumes every host's events (watcher/hub/hub.py)."""
    nats: str | list[str] = "nats://127.0.0.1:4222"
    stream: str = "FLEETWATCH"
    silent_after: Dur = "5m"                   # no event or heartbeat this long -> host.silent
    consumer: str = ""                         # durable consumer ("": fleetwatch-hub-<host>-<log chain>, one per hub)
    creds: str | None = None
    batch: int = 100                           # messages per fetch (also the consumer's max_ack_pending)
    ack_wait: Dur = "30s"                      # an unacked message is redelivered after this


class Dod(_S):
    run_checks: bool = False                   # run a structured contract's cmd checks when an agent claims done
    check_timeout: Dur = "5m"                  # per check; the whole process group is killed at the limit
    check_max_bytes: int = 1048576             # stdout kept per check (beyond: killed, unevaluable)
    check_max_file_bytes: int = 1000000000     # any one file a check writes (RLIMIT_FSIZE; beyond: unevaluable)
    check_isolation: Literal["auto", "bwrap", "unshare", "unshare-pid", "none"] = "auto"  # each check's PID namespace
    check_output_lines: int = 0                # last stdout lines kept as evidence (0: digest and exit status; at most 20)
    verifier: list[str] = []                   # argv judging what checks cannot; stdin {agent, task, contract, cwd}
    verifier_timeout: Dur = "10m"              # the verifier's whole process group is killed at the limit
    on_met: Literal["keep", "close"] | list[str] = "keep"   # close: the agent's window closed; argv: run instead
    on_failed: Literal["keep", "nudge"] = "keep"            # nudge: one message into its pane naming the gap


class HookEndpoint(_S):
    """``[hook]``: the loopback endpoint Claude Code's http hooks POST to (watcher/hook/endpoint.py); off when absent."""
    listen: str = "127.0.0.1:8766"             # a loopback address (127.x.y.z, [::1]):port; `hook install` writes this URL
    goals_dir: str = ""                        # for sessions whose hook names none; default $FLEETWATCH_GOALS_DIR, ~/.fleet/agents


class Config(_S):
    store: Store = msgspec.field(default_factory=Store)
    watch: Watch = msgspec.field(default_factory=Watch)
    classify: Classify = msgspec.field(default_factory=Classify)
    sources: list[Source] = []
    steps: Steps = msgspec.field(default_factory=Steps)
    swarm: Swarm = msgspec.field(default_factory=Swarm)
    missions: Missions = msgspec.field(default_factory=Missions)
    notify: Notify = msgspec.field(default_factory=Notify)
    nudge: Nudge = msgspec.field(default_factory=Nudge)
    dod: Dod = msgspec.field(default_factory=Dod)
    launch: Launch = msgspec.field(default_factory=Launch)
    web: Web | None = None                     # absent: no endpoint, no links in pushes
    hook: HookEndpoint | None = None           # absent: no hook endpoint (hook install writes command hooks)
    forward: Forward | None = None             # absent: no forwarding
    hub: Hub | None = None                     # only `fleetwatch hub` reads it
    # resolved at load (not TOML keys)
    config_path: str | None = msgspec.field(default=None, name="_config_path")

    def dur(self, dotted: str) -> float:
        """Seconds for a duration key, e.g. ``cfg.dur("classify.stall_after")``."""
        obj: object = self
        for part in dotted.split("."):
            obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
        return parse_duration(obj, dotted)


def config_path(explicit: str | None = None) -> str:
    """The config file: ``--config``, else $FLEETWATCH_CONFIG, else the XDG default."""
    if explicit:
        return _a_file(expand(explicit), "--config", "config.toml")
    if os.environ.get("FLEETWATCH_CONFIG"):
        return _a_file(expand(os.environ["FLEETWATCH_CONFIG"]), "$FLEETWATCH_CONFIG", "config.toml")
    return os.path.join(xdg("config"), "config.toml")


def db_path(cfg: Config | None, explicit: str | None = None) -> str:
    """The event log: ``--db``, else $FLEETWATCH_DB, else ``[store] path``, else the XDG default."""
    if explicit:
        return _a_file(expand(explicit), "--db", "events.db")
    if os.environ.get("FLEETWATCH_DB"):
        return _a_file(expand(os.environ["FLEETWATCH_DB"]), "$FLEETWATCH_DB", "events.db")
    if cfg is not None and cfg.store.path:
        return _a_file(expand(cfg.store.path), "store.path", "events.db")
    return os.path.join(xdg("state"), "events.db")


def _a_file(path: str, key: str, name: str) -> str:
    """``path`` as a file's path. One ending in a slash (or ``/.``, ``/..``) names a folder: the
    path functions drop the slash, so ``init --config DIR/`` wrote a *file* named DIR and
    ``run --db DIR/`` made a log of that name. Refused, naming the key and the file meant."""
    if path.endswith(("/", "/.", "/..")) or path in (".", ".."):
        raise ConfigError(f"{key} names a folder (the path ends in a slash or a dot), not a file", key=key,
                          op="config", path=path, hint=f"name the file in it, e.g. {os.path.join(path, name)}")
    return path


_KEY_RE = r"`\$\.([^`]*)`"


def _where(err: msgspec.ValidationError) -> str:
    """The path msgspec names in a validation error (``$.sources[0].kind`` -> ``sources[0].kind``);
    empty at the top level."""
    m = re.search(_KEY_RE, str(err))
    return m.group(1) if m else ""


def parse(text: str, path: str = "<config>", *, check_paths: bool = True) -> Config:
    """Parse and validate config text. Raises ConfigError naming the key."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config is too large (over {MAX_CONFIG_BYTES} bytes)", key="", path=path, op="config")
    import tomllib  # here, not at the top: a reader without a config file never parses TOML

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config is not valid TOML: {e}", key="", path=path, op="config") from e
    except RecursionError:
        raise ConfigError("config is nested too deeply", key="", path=path, op="config") from None
    return from_raw(raw, path, check_paths=check_paths)


def from_raw(raw: dict, path: str, *, check_paths: bool = True) -> Config:
    """The decoded TOML ``raw`` as a validated Config (``parse``'s second half)."""
    try:
        cfg = msgspec.convert(raw, Config, strict=True)
    except RecursionError:
        raise ConfigError("config is nested too deeply", key="", path=path, op="config") from None
    except msgspec.ValidationError as e:
        msg, where = str(e), _where(e)
        unk = re.search(r"Object contains unknown field `([^`]*)`", msg)
        if unk:
            full = f"{where}.{unk.group(1)}" if where else unk.group(1)
            raise ConfigError(f"unknown key {full!r} in config", key=full, path=path, op="config") from e
        raise ConfigError(f"bad value for {where or 'config'}: {msg}", key=where, path=path, op="config") from e
    validate(cfg, path, check_paths=check_paths)
    return msgspec.structs.replace(cfg, config_path=path)


def validate(cfg: Config, path: str, *, check_paths: bool = True) -> None:
    def bad(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{key}: {msg}", key=key, path=path, op="config")

    check_ranges(cfg, bad, parse_duration)  # every number and duration, key named
    for key in ("watch.interval", "watch.debounce", "watch.resync", "classify.stall_after", "classify.claim_unverified_after",
                "steps.deadline", "notify.group_wait", "notify.group_interval", "notify.repeat_interval",
                "notify.timeout", "notify.source_failed_after", "nudge.after", "nudge.gap",
                "classify.busy_silence", "classify.busy_silence_tool"):
        cfg.dur(key)
    for k, v in cfg.steps.deadlines.items():
        parse_duration(v, f"steps.deadlines.{k}")
    for i, v in enumerate(cfg.notify.retry):
        parse_duration(v, f"notify.retry[{i}]")
    cfg.dur("classify.fanout_window")
    for key, v in (("steps.board_daily_quota", cfg.steps.board_daily_quota),
                   ("steps.sessions_per_day", cfg.steps.sessions_per_day),
                   ("missions.max_children_active", cfg.missions.max_children_active),
                   ("classify.fanout_max", cfg.classify.fanout_max), ("swarm.max_concurrent", cfg.swarm.max_concurrent),
                   ("swarm.max_children", cfg.swarm.max_children), ("swarm.max_total", cfg.swarm.max_total)):
        if not 0 <= v <= 1_000_000:
            raise bad(key, f"must be between 0 and 1000000, got {v}")
    if cfg.dur("watch.interval") <= 0:
        raise bad("watch.interval", "must be greater than 0")
    if not (0 <= cfg.notify.flap_low <= cfg.notify.flap_high <= 100):
        raise bad("notify.flap_low", "need 0 <= flap_low <= flap_high <= 100")
    names: set[str] = set()
    for i, s in enumerate(cfg.sources):
        k = f"sources[{i}]"
        if not s.name.strip():
            raise bad(f"{k}.name", "must not be empty")
        if s.name in names:
            raise bad(f"{k}.name", f"duplicate source name {s.name!r}")
        names.add(s.name)
        parse_duration(s.timeout, f"{k}.timeout")
        kind = KINDS.get(s.kind)
        if kind is None:
            raise bad(f"{k}.kind", f"unknown kind {s.kind!r}: one of {', '.join(KINDS)}")
        for req in kind.needs:   # the checks go by key, whichever kind needs it
            if not getattr(s, req):
                raise bad(f"{k}.{req}", f"a {s.kind} source needs {EXAMPLE.get(req, req)}")
        if kind.entities and s.entity is not None and s.entity not in kind.entities:
            raise bad(f"{k}.entity", f"a {s.kind} source gives {' or '.join(kind.entities)} rows")
        if check_paths and "glob" in kind.needs:
            root = _glob_root(expand(s.glob or ""))
            if not os.path.isdir(root):  # the hint: what to run (quoted as a shell word)
                raise ConfigError(f"{k}.glob: folder {root} does not exist", key=f"{k}.glob", path=path, op="config",
                                  hint=f"create it: mkdir -p {shlex.quote(root)} (or fix the glob)")
        if check_paths and "path" in kind.needs and not os.path.isfile(expand(s.path or "")):
            raise bad(f"{k}.path", f"database {expand(s.path or '')} does not exist")
    for sec in ("forward", "hub"):
        _check_nats(getattr(cfg, sec), sec, bad)
    _validate_phone(cfg, bad)
    if cfg.hook is not None:
        host, sep, port = cfg.hook.listen.rpartition(":")
        # an address, not a name: Claude Code may resolve "localhost" to ::1 while the endpoint binds 127.0.0.1
        if not sep or host.strip("[]") != "::1" and not re.match(r"^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$", host) \
                or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise bad("hook.listen", f"expected a loopback host:port (127.0.0.1:8766), got {cfg.hook.listen!r}")
    if cfg.nudge.enabled and not cfg.nudge.argv:
        raise bad("nudge.argv", "nudge is enabled but has no argv")
    check_launch(cfg, bad)


_TOKEN = r"^[A-Za-z0-9_-]{1,64}$"   # a NATS subject token / stream name, no wildcards


def _check_nats(sec: Forward | Hub | None, name: str, bad) -> None:
    """``[forward]`` / ``[hub]``: server URLs, stream and host names usable as subject tokens."""
    if sec is None:
        return
    urls = [sec.nats] if isinstance(sec.nats, str) else sec.nats
    if not urls:
        raise bad(f"{name}.nats", "needs at least one server URL")
    for u in urls:
        if not re.match(r"^(nats|tls|ws|wss)://[^\s/]+(:\d+)?/?$", u):
            raise bad(f"{name}.nats", f"expected nats://HOST:PORT (or tls://, ws://), got {u!r}")
    if not re.match(_TOKEN, sec.stream):
        raise bad(f"{name}.stream", "letters, digits, - and _ only (1-64)")
    if isinstance(sec, Forward):
        if sec.host and not re.match(_TOKEN, sec.host):
            raise bad(f"{name}.host", "letters, digits, - and _ only (1-64): it is a subject token")
        parse_duration(sec.heartbeat, f"{name}.heartbeat")
    else:
        if sec.consumer and not re.match(_TOKEN, sec.consumer):
            raise bad(f"{name}.consumer", "letters, digits, - and _ only (1-64; unset: one per hub)")
        for k in ("silent_after", "ack_wait"):
            if parse_duration(getattr(sec, k), f"{name}.{k}") <= 0:
                raise bad(f"{name}.{k}", "must be greater than 0")
    if not 1 <= sec.batch <= 10_000:
        raise bad(f"{name}.batch", "must be between 1 and 10000")
    if sec.creds is not None and not os.path.isfile(expand(sec.creds)):
        raise bad(f"{name}.creds", f"credentials file {expand(sec.creds)} does not exist")


def _glob_root(pattern: str) -> str:
    """The longest leading folder of a glob without wildcards."""
    parts = pattern.split(os.sep)
    out = []
    for p in parts[:-1]:
        if any(c in p for c in "*?["):
            break
        out.append(p)
    return os.sep.join(out) or ("/" if pattern.startswith("/") else ".")


def load(explicit: str | None = None, *, required: bool = False, check_paths: bool = True) -> Config:
    """Load the config file; a missing default file gives the defaults (no sources)."""
    path = config_path(explicit)
    try:
        os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):  # a link is there: it was meant to be the config, not "not found"
            raise ConfigError("config is a symlink whose target does not exist", key="", path=path, op="config",
                              hint="point the link at a config (`fleetwatch init` writes one) or remove it") from None
        if required or explicit or os.environ.get("FLEETWATCH_CONFIG"):
            raise ConfigError("config file not found", key="", path=path, op="config",
                              hint="create one with `fleetwatch init`") from None
        return Config()
    except OSError as e:  # a symlink loop, a folder that may not be searched, a path under a file
        raise ConfigError(f"cannot read config: {e.strerror or type(e).__name__}", key="", path=path,
                          op="config", hint="check the path and the links and folders on it") from e
    try:
        text = read_regular(path, MAX_CONFIG_BYTES).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:  # an OSError's own text only ("[Errno None] a FIFO, ..." before)
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise ConfigError(f"cannot read config: {why}", key="", path=path, op="config",
                          hint="the config is a UTF-8 TOML file (`fleetwatch init` writes one)") from e
    return parse(text, path, check_paths=check_paths)


def _validate_phone(cfg: Config, bad) -> None:
    """[web] and the phone-loop keys of [notify] (escalation, quiet hours, routes, heartbeat)."""
    from projections.notify.quiet import parse_window

    n = cfg.notify
    for key in ("notify.escalate_after", "notify.heartbeat_every"):
        cfg.dur(key)
    if n.heartbeat_url and cfg.dur("notify.heartbeat_every") < 1:
        raise bad("notify.heartbeat_every", "must be at least 1s")
    if n.heartbeat_url and not re.match(r"^https?://", n.heartbeat_url):
        raise bad("notify.heartbeat_url", "must be an http:// or https:// URL")
    for i, w in enumerate(n.quiet):
        if not re.match(_QUIET, w):
            raise bad(f"notify.quiet[{i}]", f"expected HH:MM-HH:MM, got {w!r}")
        start, end = parse_window(w)  # minutes after midnight, as quiet hours read them
        if end > 24 * 60:
            raise bad(f"notify.quiet[{i}]", f"{w!r} ends after 24:00")
        if start == end:  # not a day either way: the window would hold no minute at all
            raise bad(f"notify.quiet[{i}]", f"{w!r} starts where it ends, so it is empty "
                                            "(the whole day is \"00:00-24:00\")")
    if n.quiet_tz:
        try:
            import zoneinfo

            zoneinfo.ZoneInfo(n.quiet_tz)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError):
            raise bad("notify.quiet_tz", f"unknown time zone {n.quiet_tz!r} (e.g. Europe/Madrid)") from None
    for i, r in enumerate(n.routes):
        k = f"notify.routes[{i}]"
        unknown = sorted(set(r.match) - {"severity", "class", "subject"})
        if unknown:
            raise bad(f"{k}.match", f"unknown match key {unknown[0]!r} (severity, class or subject)")
        if not r.match:
            raise bad(f"{k}.match", "needs severity, class or subject")
        if "severity" in r.match and r.match["severity"] not in ("info", "warning", "urgent"):
            raise bad(f"{k}.match", "severity is info, warning or urgent")
        if not r.urls:
            raise bad(f"{k}.urls", "a route needs urls")
    if cfg.web is not None:
        host, sep, port = cfg.web.listen.rpartition(":")
        if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:  # 0: any free port; "²" is a digit int() refuses
            raise bad("web.listen", f"expected host:port, got {cfg.web.listen!r}")
        if cfg.web.public_url and not re.match(r"^https?://[^\s/]+", cfg.web.public_url):
            raise bad("web.public_url", "must be an http:// or https:// URL")
        if not 60 <= parse_duration(cfg.web.token_ttl, "web.token_ttl") <= 30 * 86400:
            raise bad("web.token_ttl", "must be between 1m and 30d")


_QUIET = r"^\s*([01][0-9]|2[0-3]):[0-5][0-9]\s*-\s*([01][0-9]|2[0-4]):[0-5][0-9]\s*$"  # ASCII digits only
