"""First run and the service: ``install-service``, ``init``, ``doctor``.

- install-service renders the unit templates (``systemd/*`` in the checkout, ``watcher/systemd/`` in
  a wheel) with this install's absolute ``fleetwatch`` path and writes them to
  ``$XDG_CONFIG_HOME/systemd/user/``. Each written unit starts with a checksum line: a unit whose
  body no longer matches it was edited by hand, and is only replaced with ``--force`` (the diff is
  shown either way). Idempotent: identical units are left alone.
- init writes a commented default config (mode 0600: notify URLs carry tokens); refuses to
  overwrite without ``--force`` (the old file is kept as ``.bak``).
- doctor prints a checklist (✓ ok, ! warning, ✗ failure + hint) and exits 1 on any ✗. It never
  prints notification URLs, only their count and schemes.
"""

import difflib
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import typer

from events.errors import FleetwatchError

UNITS = ("fleetwatch.service", "fleetwatch-verify.service", "fleetwatch-verify.timer",
         "fleetwatch-onfailure.service")  # OnFailure= of fleetwatch.service: the "stopped" push
HUB_UNITS = ("fleetwatch-hub.service",)  # `install-service --hub`: the hub (watcher/hub/)
_HEADER_RE = re.compile(r"^# fleetwatch-managed sha256=([0-9a-f]{64})\n")


class ServiceError(FleetwatchError):
    """install-service cannot proceed (hand-edited unit, no templates, no fleetwatch binary)."""


# ---- install-service ------------------------------------------------------------------------
def units_dir(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(os.path.expanduser(base)) / "systemd" / "user"


def templates_dir() -> Path:
    here = Path(__file__).resolve().parent          # watcher/service/
    for cand in (here.parent / "systemd", here.parent.parent / "systemd"):   # wheel, checkout
        if (cand / UNITS[0]).is_file():
            return cand
    raise ServiceError("the unit templates are missing from this install", op="install-service",
                       path=str(here.parent / "systemd"), hint="reinstall fleetwatch (pip install --force-reinstall .)")


def fleetwatch_bin() -> str:
    """Absolute path of this install's ``fleetwatch`` console script."""
    argv0 = sys.argv[0] if sys.argv else ""
    cands = []
    if os.path.basename(argv0) == "fleetwatch":
        cands.append(argv0 if os.sep in argv0 else (shutil.which(argv0) or ""))
    cands.append(os.path.join(os.path.dirname(sys.executable), "fleetwatch"))
    cands.append(shutil.which("fleetwatch") or "")
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return str(Path(c).resolve())
    raise ServiceError("cannot find the `fleetwatch` executable of this install", op="install-service",
                       hint="install with pip or pipx so the console script exists")


def sd_quote(word: str) -> str:
    """One ExecStart word: ``%`` and ``$`` escaped, double-quoted when needed."""
    w = word.replace("%", "%%").replace("$", "$$")
    if re.search(r"[\s\"'\\;]", w) or not w:
        w = '"' + w.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return w


def _checksum(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def render_units(binary: str, extra_args: list[str] | None = None, names: tuple[str, ...] = UNITS) -> dict[str, str]:
    """{unit name: text} with the placeholders filled and the checksum header on top."""
    tdir = templates_dir()
    args = "".join(" " + sd_quote(a) for a in (extra_args or []))
    out = {}
    for name in names:
        body = (tdir / name).read_text()
        body = (body.replace("@FLEETWATCH@", sd_quote(binary)).replace("@ARGS@", args)
                .replace("@DOCDIR@", str(tdir).replace("%", "%%").replace(" ", "%20")))
        out[name] = f"# fleetwatch-managed sha256={_checksum(body)}\n{body}"
    return out


def is_pristine(text: str) -> bool:
    """True if ``text`` is a unit install-service wrote and nobody edited since."""
    m = _HEADER_RE.match(text)
    return m is not None and _checksum(text[m.end():]) == m.group(1)


def _diff(old: str, new: str, path: Path) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        fromfile=f"{path} (on disk)" if old else "/dev/null",
                                        tofile=f"{path} (install-service)"))


def _write_atomic(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def daemon_reload(echo) -> bool:
    """``systemctl --user daemon-reload`` if a user manager answers. Never fails the command."""
    sc = shutil.which("systemctl")
    if sc is None:
        echo("! systemctl not found (not a systemd machine?): the units are written but not loaded")
        return False
    try:
        probe = subprocess.run([sc, "--user", "show-environment"], capture_output=True, text=True, timeout=15)
        if probe.returncode != 0:
            why = (probe.stderr.strip().splitlines() or ["no answer"])[0]
            echo(f"! no systemd user manager reachable ({why}); once logged in run: systemctl --user daemon-reload")
            return False
        r = subprocess.run([sc, "--user", "daemon-reload"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        echo(f"! systemctl --user did not answer ({type(e).__name__}); run: systemctl --user daemon-reload")
        return False
    if r.returncode != 0:
        echo(f"! systemctl --user daemon-reload failed: {(r.stderr.strip().splitlines() or ['?'])[0]}")
        return False
    echo("✓ systemctl --user daemon-reload")
    return True


UNIT_MAX_BYTES = 1 << 20


def read_unit(p: Path) -> str:
    """An installed unit's text: a regular file of at most 1 MiB, read without blocking (a FIFO at
    the unit's name hung `doctor` and `install-service`, a symlink to /dev/zero ate memory).
    OSError (``NotRegular``, ``TooLarge``, ...) otherwise."""
    from watcher.config_limits import read_regular

    return read_regular(str(p), UNIT_MAX_BYTES).decode("utf-8", "replace")


def install_service(*, dry_run: bool, force: bool, extra_args: list[str], echo=typer.echo, hub: bool = False) -> int:
    binary = fleetwatch_bin()
    target = units_dir()
    rendered = render_units(binary, extra_args, HUB_UNITS if hub else UNITS)
    plan: list[tuple[str, Path, str, str]] = []  # (action, path, new text, diff)
    for name, text in rendered.items():
        p = target / name
        try:
            old = read_unit(p) if os.path.lexists(p) else None
        except OSError as e:
            raise FleetwatchError(f"cannot read the installed unit: {e.strerror or e}; nothing was written", op="install",
                                  path=str(p), hint="move it away, then rerun `fleetwatch install-service`") from e
        if old is None:
            plan.append(("create", p, text, _diff("", text, p)))
        elif old == text:
            plan.append(("unchanged", p, text, ""))
        else:
            plan.append(("update" if is_pristine(old) else "edited", p, text, _diff(old, text, p)))
    edited = [x for x in plan if x[0] == "edited"]
    for action, p, _, diff in plan:
        if diff and (action == "edited" or dry_run):
            echo(diff.rstrip("\n"))
    if edited and not force:
        names = ", ".join(x[1].name for x in edited)
        raise ServiceError(f"{names} edited by hand; nothing was written", op="install-service",
                           path=str(target), hint="keep your changes in a drop-in (`systemctl --user edit "
                           "fleetwatch`) and rerun with --force to replace the unit")
    verb = dict(zip(("create", "update", "edited", "unchanged"), (
        ("would write", "would update", "would overwrite (--force)", "unchanged") if dry_run else
        ("wrote", "updated", "overwrote (--force)", "unchanged"))))
    changed = False
    for action, p, text, _ in plan:
        if action != "unchanged" and not dry_run:
            _write_atomic(p, text, 0o644)
            changed = True
        echo(f"{'✓' if action == 'unchanged' or not dry_run else '-'} {verb[action]} {p}")
    echo(f"  ExecStart={sd_quote(binary)} {'hub' if hub else 'run'}{''.join(' ' + sd_quote(a) for a in extra_args)}")
    if dry_run:
        echo("dry run: nothing written")
        return 0
    if changed:
        daemon_reload(echo)
    if hub:
        echo("next:\n  systemctl --user enable --now fleetwatch-hub.service")
    else:
        echo("next:\n  systemctl --user enable --now fleetwatch.service fleetwatch-verify.timer")
    echo("  loginctl enable-linger \"$USER\"   # keep it running while you are logged out")
    return 0


# ---- init -----------------------------------------------------------------------------------
DEFAULT_CONFIG = '''\
# fleetwatch configuration (TOML). Written by `fleetwatch init`; check it with `fleetwatch doctor`.
# Durations: an integer and a unit: ms, s, m, h, d. `~` and $VARS are expanded in paths and globs.
# Unknown keys are errors (exit 2) naming the key.

[store]
# path = "~/.local/state/fleetwatch/events.db"   # default: $XDG_STATE_HOME/fleetwatch/events.db
durability = "full"              # "full": fsync every commit | "normal": faster, may lose the last tick

[watch]
interval = "2s"                  # a tick of every source; file sources also wake on inotify
debounce = "100ms"               # coalesce bursts of file changes
resync = "30s"                   # stat every file this often while inotify is healthy (else every interval)
resync_rate = 100                # ...but at most this many files a second (10,000 files: once per 100 s)

[classify]
stall_after = "15m"              # idle, not done, no activity this long -> ESTANCADO
claim_unverified_after = "30m"   # DICE_TERMINADO without a verifier verdict this long -> reminder
fanout_max = 8                   # more agents first seen than this within fanout_window -> fleet.fanout
fanout_window = "1m"
busy_silence = "10m"             # busy, no hook event and no pane activity this long -> ESTANCADO
busy_silence_tool = "1h"         # the same while a tool call is open (PreToolUse without PostToolUse)

# ---- sources: any number of [[sources]], each with a unique name. Examples (uncomment one):
{sources}
[steps]
deadline = "45m"                 # a step still in `begin` after this long is overdue
# deadlines = {{ deploy = "2h", validate = "1h" }}
deadlines = {{}}
board_daily_quota = 3            # confirmed uploads per board per UTC day (rule board-daily-quota)
sessions_per_day = 12            # outer-loop events per UTC day (rule session-daily-cap)
inactive_boards = []             # a launch_intent on one of these breaks inactive-board

[missions]
max_children_active = 3          # WPs RUNNING/CHECKING at once per mission (rule children-active-cap)

[swarm]                          # the swarm design's caps; a breach is pushed once per episode (0 = no cap)
max_concurrent = 8               # running children per group
max_children = 50                # active (queued + running) children per group
max_total = 200                  # distinct children a group ever had

[notify]
urls = []                        # apprise URLs, e.g. ["tgram://BOT_TOKEN/CHAT_ID"]: secrets, never logged
# config = "~/.config/apprise/apprise.yml"   # or an apprise config file
group_wait = "10s"               # everything due in this window goes out as ONE message
group_interval = "5m"            # paces non-urgent updates (never holds back urgent ones)
repeat_interval = "4h"           # a condition already pushed is not pushed again before this
min_severity = "warning"         # info | warning | urgent
tags = {{}}                       # severity -> apprise tag, e.g. {{ urgent = "phone" }}
retry = ["10s", "30s", "2m", "10m"]
timeout = "10s"
flap_high = 50.0                 # flapping: class changes above this % of recent observations
flap_low = 25.0                  # ... and no longer flapping below this %
source_failed_after = "1m"       # a source failing this long -> a notice
escalate_after = "0s"            # urgent, not acked, not cleared this long -> pushed again once (0s = off)
escalate_urls = []               # where escalations go; empty: the same urls at top priority
quiet = []                       # quiet hours, local time, e.g. ["22:00-07:00"]: warnings held, one summary after
quiet_tz = ""                    # e.g. "Europe/Madrid"; empty: the system zone
quiet_urgent = true              # urgent still pushed during quiet hours
send_resolved = false            # one grouped "all clear" for pushed conditions that cleared
heartbeat_url = ""               # dead-man's switch: GET this (healthchecks-style) while ticks are healthy
heartbeat_every = "5m"
# routes = [...]                 # or, after this section: [[notify.routes]] match = {{ severity = "urgent" }} urls = ["..."]

# [web]                          # the phone page: a link in every push to Acknowledge / Snooze / Silence
# listen = "127.0.0.1:8765"      # host:port (loopback; put a TLS reverse proxy in front for the phone)
# public_url = "https://fleet.example.net"   # how the phone reaches it; default http://<listen>
# key_file = ""                  # HMAC key of the links (0600); default $XDG_STATE_HOME/fleetwatch/web.key
# token_ttl = "24h"              # links expire after this

# [hook]                         # Claude Code's http hooks POST here (no process per event); `hook install` uses it
# listen = "127.0.0.1:8766"      # loopback only: only this user's processes are served
# goals_dir = ""                 # default $FLEETWATCH_GOALS_DIR, else ~/.fleet/agents

# [forward]                      # several machines: publish this host's events to NATS JetStream
# nats = "nats://127.0.0.1:4222" # or a list of cluster URLs
# stream = "FLEETWATCH"          # created if missing (file storage)
# host = ""                      # default: the hostname (letters, digits, - and _)
# creds = "~/.config/fleetwatch/fleet.creds"   # a NATS credentials file

# [hub]                          # only `fleetwatch hub` reads it (its own config, see the README)
# nats = "nats://127.0.0.1:4222"
# stream = "FLEETWATCH"
# silent_after = "5m"            # a host with no event or heartbeat this long -> host.silent

[nudge]
enabled = false                  # poke a stalled agent's tmux pane
argv = []                        # e.g. ["tmux", "-L", "fleet", "send-keys", "-t", "{{target}}", "close your DoD", "Enter"]
max_per_stall = 1
after = "0s"
gap = "5m"                       # at least this between two nudges of one stall

[dod]
run_checks = false               # run a structured dod_contract's cmd checks when an agent claims done
check_timeout = "5m"             # per check; its whole process group is killed at the limit
check_max_bytes = 1048576        # stdout kept per check (beyond: killed, unevaluable)
check_max_file_bytes = 1000000000  # any one file a check writes (RLIMIT_FSIZE; beyond: unevaluable)
check_isolation = "auto"         # each check in its own PID namespace: bwrap, else unshare (none: a warning)
check_output_lines = 0           # last stdout lines kept as evidence (0: a digest and the exit status only)
verifier = []                    # argv judging what checks cannot (docs/guide/launch.md: Claude Code as verifier)
verifier_timeout = "10m"
on_met = "keep"                  # "close": the agent's window closed, CERRADO "verified met"
on_failed = "keep"               # "nudge": one message into its pane naming the failed checks

[launch]                         # fleetwatch launch AGENT --task TEXT --contract JSON|@FILE
socket = "fleet"                 # tmux -L socket of the agents' windows
session = "fleet"
goals_dir = "~/.fleet/agents"    # AGENT/goal.json is written here: a goals source must read it
argv = ["claude", "{{prompt}}"]  # {{prompt}}: the task, the contract and how to claim done
follow = false                   # the watcher launches a plan's next tasks when their deps are met
'''

SOURCE_EXAMPLES = '''\
[[sources]]
name = "fleet"
kind = "goals"                 # one goal.json per agent
glob = "~/.fleet/agents/*/goal.json"

[[sources]]
name = "fleetview"
kind = "command"               # a program printing agents as JSON
argv = ["fleetview", "list", "--json"]
entity = "agent"
timeout = "10s"

[[sources]]
name = "tmux"
kind = "tmux"                  # pane activity and dead panes
# socket = "fleet"             # tmux -L SOCKET
# session = "fleet"            # only this session's windows (exact name)
# agent_windows = ["exec-*"]   # window names that are agents without a goal.json (else: a claude process in it)
# exclude_windows = ["board"]  # window names never an agent (the board's, a scratch shell)

[[sources]]
name = "claude"
kind = "claude"                # Claude Code's own session status: an approved permission shows at once
glob = "~/.claude/sessions/*.json"

[[sources]]
name = "runs"
kind = "steps"                 # one steps.json per run
glob = "~/runs/*/steps.json"

[[sources]]
name = "missions"
kind = "sqlite"                # rows of an external database, opened read-only
entity = "wp"                  # wp | circuit | swarm
path = "~/red-queen/missions.db"
query = "SELECT mission_id AS mission, id AS wp, state, deps, attempts, last_error_sig, same_sig_count FROM work_packages"
key = ["mission", "wp"]
'''


def default_config_text(db: str | None = None) -> str:
    """The commented default config; ``db``: that log path set in ``[store] path`` (init --db)."""
    commented = "".join(f"# {ln}\n" if ln.strip() else "#\n" for ln in SOURCE_EXAMPLES.splitlines())
    text = DEFAULT_CONFIG.format(sources=commented)
    if db is not None:
        import json

        value = json.dumps(db).replace("\x7f", "\\u007f")  # a TOML basic string (JSON's escapes; DEL too)
        default = '# path = "~/.local/state/fleetwatch/events.db"   # default: $XDG_STATE_HOME/fleetwatch/events.db'
        text = text.replace(default, f"path = {value}   # from `fleetwatch init --db`", 1)
    return text


def write_config(path: str, *, force: bool, db: str | None = None) -> str | None:
    """Write the default config; returns the backup path when an old file was replaced.

    Refused (ConfigError, exit 2; nothing written): a path that is a folder, a FIFO or a device,
    or under a file, a symlink loop. A symlink is written through: the file it names is replaced
    (its backup beside it) or made (a dangling link), the link stays. An existing config without ``force`` is exit 1; with it the old file is kept
    as ``PATH.bak`` or, when that name is taken (a backup of an earlier ``--force``), the first
    free ``PATH.bak.N``: a second ``init --force`` never replaces the first one's backup with the
    defaults, and the backup is a new file (``O_EXCL``), never written through a symlink."""
    import stat

    from events.errors import ConfigError

    p = Path(path)
    anc = p.parent
    while not os.path.lexists(anc) and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise ConfigError(f"cannot write the config: {anc} is not a directory; nothing was written", key="--config",
                          op="init", path=path, hint="name a config file in a folder with --config")
    backup = None
    linked = p.is_symlink()
    if linked:  # a config kept elsewhere (dotfiles): the file it names is written, the link stays
        try:
            p = Path(os.path.realpath(p, strict=True))
        except FileNotFoundError:  # a dangling link: the file it names is made
            p = Path(os.path.realpath(p))
        except OSError as e:  # a loop: there is no file to write
            raise ConfigError(f"the config path is a symlink that leads nowhere ({e.strerror or e}); nothing was "
                              "written", key="--config", op="init", path=path,
                              hint="fix or remove the link, or name another file with --config") from None
    if p.exists():
        if not stat.S_ISREG(p.stat().st_mode):
            raise ConfigError("the config path is not a regular file (a folder, FIFO or device); nothing was "
                              "written", key="--config", op="init", path=path,
                              hint="name a config file with --config")
        if not force:
            raise FleetwatchError("a config already exists; nothing was written", op="init", path=path,
                                  hint="check it with `fleetwatch doctor`, or rerun with --force "
                                       f"(the old file is kept as {p.name}.bak, or .bak.N when that is taken)")
        backup = _keep_copy(p)
    from events.private import private_dir

    try:
        if not linked:  # the folder a link leads to is the user's own: its mode is left as it is
            private_dir(str(p.parent))  # 0700 whatever the umask, parents too (issue 13)
        _write_atomic(p, default_config_text(db), 0o600)
    except OSError as e:
        raise ConfigError(f"cannot write the config: {e.strerror or e}; nothing was written", key="--config",
                          op="init", path=path, hint="choose a writable place with --config") from e
    return backup


def _keep_copy(p: Path) -> str:
    """Copy ``p`` to the first free name of ``p.bak``, ``p.bak.1``, … (a new 0600 file)."""
    from events.errors import ConfigError

    try:
        data = p.read_bytes()
        for n in range(1000):
            backup = f"{p}.bak" + (f".{n}" if n else "")
            try:
                fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return backup
    except OSError as e:
        raise ConfigError(f"cannot keep a copy of the old config: {e.strerror or e}; nothing was written",
                          key="--config", op="init", path=str(p), hint="check the folder's owner and mode") from e
    raise ConfigError("cannot keep a copy of the old config: 1000 backups exist; nothing was written",
                      key="--config", op="init", path=str(p), hint=f"delete old {p.name}.bak.N files")
