"""``fleetwatch hook`` (typer side) and ``fleetwatch hook install``.

The hook itself runs through the fast path in ``watcher/entry.py`` -> ``watcher.hook.adapter.run_hook``;
this module documents its options for ``--help`` and installs the hook entries into a Claude Code
settings.json: idempotent (an entry already there is left alone), everything else preserved,
the difference printed before anything is written.
"""
from __future__ import annotations

import difflib
import enum
import os
import shlex
import shutil
import sys
from typing import Annotated, Any, Optional

import typer

from events.errors import FleetwatchError
from watcher.cli import hookforms
from watcher.cli.util import ConfigOpt, errors
from watcher.hook.goalfile import dumps_exact, loads_exact

# Every event the hook maps (see docs/readme/hook.md and watcher/hook/mapping.py), in the order they
# are written to settings.json. Events whose settings schema has a matcher (tool name, notification
# type, session source/reason, compaction trigger, agent type, MCP server, error type, command) get
# matcher "*" (all); the others take none. Events the mapping treats as noise are not installed.
HOOK_EVENTS = (
    "SessionStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "PermissionRequest",
    "PermissionDenied", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification", "Elicitation",
    "ElicitationResult", "SubagentStart", "SubagentStop", "TaskCreated", "TaskCompleted", "PreCompact",
    "PostCompact", "Stop", "StopFailure", "SessionEnd",
)
MATCHER_EVENTS = frozenset({
    "SessionStart", "UserPromptExpansion", "PreToolUse", "PermissionRequest", "PermissionDenied", "PostToolUse",
    "PostToolUseFailure", "Notification", "Elicitation", "ElicitationResult", "SubagentStart", "SubagentStop",
    "PreCompact", "PostCompact", "StopFailure", "SessionEnd",
})
# Claude Code skips a whole settings.json whose `hooks` names an event it does not know ("Invalid
# key in record" on older versions), so the events added to the hooks reference later are installed
# only for a Claude Code that documents them (`claude --version` >= NEW_EVENTS_SINCE) or on request.
CORE_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
               "PostToolUseFailure", "Notification", "SubagentStart", "SubagentStop", "Stop", "StopFailure",
               "SessionEnd")
NEW_EVENTS_SINCE = (2, 1, 145)   # the hooks reference the mapping was checked against
HOOK_TIMEOUT = 10  # seconds Claude Code allows one hook call


class SettingsError(FleetwatchError):
    """The Claude Code settings.json cannot be read, parsed or written."""

    exit_code = 1


hook_app = typer.Typer(
    help=(
        "A Claude Code hook: reads one hook payload (JSON) on stdin and sets that agent's "
        "goal.json state (busy / waiting / idle / ended) and last_activity, keeping every other "
        "field. Always exits 0. Agent: --agent, else $FLEETWATCH_AGENT, else the goals-dir entry "
        "whose goal.json has the payload's session_id or cwd, else the existing goals-dir folder "
        "named like the project dir / cwd. Wire it with `fleetwatch hook install`."
    ),
    invoke_without_command=True,
    no_args_is_help=False,
)


@hook_app.callback()
def hook(
    ctx: typer.Context,
    agent: Annotated[Optional[str], typer.Option("--agent", help="Agent id (folder under the goals dir); else $FLEETWATCH_AGENT, else mapped from session_id/cwd.")] = None,
    goals_dir: Annotated[Optional[str], typer.Option("--goals-dir", help="Folder of <agent>/goal.json; else $FLEETWATCH_GOALS_DIR, else ~/.fleet/agents.")] = None,
) -> None:
    """Payload on stdin -> the agent's goal.json (state, last_activity). Always exit 0."""
    if ctx.invoked_subcommand is not None:
        return
    from watcher.hook.adapter import run_hook

    argv: list[str] = []  # as given (an empty value is refused there), stdin read by run_hook (bounded)
    if agent is not None:
        argv += ["--agent", agent]
    if goals_dir is not None:
        argv += ["--goals-dir", goals_dir]
    raise typer.Exit(run_hook(argv))


# ---------------------------------------------------------------- install: pure merge

def hook_command(prefix: str, agent: str | None, goals_dir: str | None) -> str:
    """The shell command written into settings.json."""
    cmd = f"{prefix} hook"
    if agent:
        cmd += f" --agent {shlex.quote(agent)}"
    if goals_dir:
        cmd += f" --goals-dir {shlex.quote(goals_dir)}"
    return cmd


def is_ours(command: Any) -> bool:
    """A settings hook command that runs ``fleetwatch hook`` (any path, flags or env prefix)."""
    return hookforms._ours_command(command)


class EventSet(str, enum.Enum):
    auto = "auto"
    all = "all"
    core = "core"


def claude_version(timeout: float = 5.0) -> tuple[int, int, int] | None:
    """The installed Claude Code's version from ``claude --version`` (None: not found or unclear)."""
    import re
    import subprocess

    try:
        r = subprocess.run(["claude", "--version"], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(rb"(\d+)\.(\d+)\.(\d+)", r.stdout[:200]) if r.returncode == 0 else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def events_for(mode: str, version: tuple[int, int, int] | None) -> tuple[str, ...]:
    """Which events to install: ``all`` (every mapped event), ``core`` (the ones every recent Claude
    Code knows), ``auto`` (all when the installed Claude Code is NEW_EVENTS_SINCE or later)."""
    if mode == "all" or (mode == "auto" and version is not None and version >= NEW_EVENTS_SINCE):
        return HOOK_EVENTS
    return tuple(e for e in HOOK_EVENTS if e in CORE_EVENTS)


def merge(settings: dict, command: str | dict[str, tuple[str | None, dict]], *, force: bool = False,
          events: tuple[str, ...] = HOOK_EVENTS) -> tuple[dict, dict[str, str]]:
    """(new settings, {event: "added"|"updated"|"unchanged"|"kept"|"removed"}). Pure: input not mutated.

    ``command``: a shell command (a command entry, matcher ``*`` where the event has one), or per
    event ``(matcher, entry)`` (``hookforms.entry``). Per event: the same entry already there ->
    unchanged; another fleetwatch entry (any form, ``hookforms.is_ours_entry``) -> kept as is, or
    replaced in place with ``force`` (with its group's matcher, when the group holds only it); none
    -> one matcher group appended after the existing groups. With ``force``, fleetwatch's entries of
    events not in ``events`` are removed (an event no longer needed). Other keys, events and hooks
    are untouched.
    """
    if isinstance(command, str):
        command = {e: ("*" if e in MATCHER_EVENTS else None,
                       {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}) for e in events}
    new = loads_exact(dumps_exact(settings, indent=None))  # deep copy, key order and numbers kept
    hooks = new.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("settings.json: `hooks` is not an object", op="hook install",
                            hint="fix the file by hand, then run the install again")
    actions: dict[str, str] = {}
    for event in events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsError(f"settings.json: `hooks.{event}` is not a list", op="hook install",
                                hint="fix the file by hand, then run the install again")
        match, want = command[event]
        mine = [(g, i) for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                for i, h in enumerate(g["hooks"]) if hookforms.is_ours_entry(h)]
        text = dumps_exact(want, indent=None)  # numbers read from the file are Number: compared as written
        if any(dumps_exact(g["hooks"][i], indent=None) == text and g.get("matcher") == match for g, i in mine):
            actions[event] = "unchanged"
        elif mine and not force:
            actions[event] = "kept"
        elif mine:
            g, i = mine[0]
            if not isinstance(g["hooks"][i].get("args"), list) and want.get("type") == "command" \
                    and "args" not in want:
                g["hooks"][i]["command"] = want["command"]   # a shell command: only the command changes
            else:
                g["hooks"][i] = dict(want)
            if len(g["hooks"]) == 1:
                g.pop("matcher", None)
                if match is not None:
                    g.update({"matcher": match, "hooks": g.pop("hooks")})
            actions[event] = "updated"
        else:
            group: dict[str, Any] = {"matcher": match} if match is not None else {}
            group["hooks"] = [dict(want)]
            groups.append(group)
            actions[event] = "added"
    for event in [e for e in hooks if force and e not in events]:
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for g in groups:
            if isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(map(hookforms.is_ours_entry, g["hooks"])):
                g["hooks"] = [h for h in g["hooks"] if not hookforms.is_ours_entry(h)]
                actions[event] = "removed"
                if not g["hooks"]:
                    continue
            kept.append(g)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    return new, actions


def render(settings: dict) -> str:
    return dumps_exact(settings) + "\n"  # each number as it was read (1e400 stays 1e400, not Infinity)


# ---------------------------------------------------------------- install: I/O

def _default_prefix(quoted: bool = True) -> str:
    exe = os.path.abspath(sys.argv[0]) if sys.argv and os.path.basename(sys.argv[0]) == "fleetwatch" else None
    exe = exe or shutil.which("fleetwatch") or os.path.join(os.path.dirname(sys.executable), "fleetwatch")
    return shlex.quote(exe) if quoted else exe


def _endpoint_url(config: str | None) -> str | None:
    """The watcher's hook endpoint from ``[hook] listen`` (None: no config, no [hook], or a config
    that does not load: said on stderr, and command hooks are installed)."""
    from watcher.config import load

    try:
        cfg = load(config, check_paths=False)
    except FleetwatchError as e:
        typer.echo(f"note: the config was not read ({e}): command hooks", err=True)
        return None
    if cfg.hook is None:
        return None
    host, _, port = cfg.hook.listen.rpartition(":")
    return f"http://{host}:{port}/hook"


def _settings_path(settings: str | None, project: bool) -> str:
    if settings:
        return os.path.expanduser(os.path.expandvars(settings))
    if project:
        return os.path.join(os.getcwd(), ".claude", "settings.json")
    return os.path.join(os.path.expanduser("~"), ".claude", "settings.json")


def _load(path: str) -> tuple[str, dict]:
    """(text, object) of the settings file ("", {} when absent). A FIFO, socket, device or folder
    (also behind a symlink) is refused before one byte is read: reading a FIFO would wait for a
    writer forever, a device would never end; so is a file over MAX_CONFIG_BYTES."""
    from watcher.config_limits import MAX_CONFIG_BYTES, NotRegular, TooLarge, read_regular

    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return "", {}
    except NotRegular as e:
        raise SettingsError(f"cannot read settings: {e.strerror}", op="hook install", path=path,
                            hint="--settings takes a Claude Code settings.json file") from None
    except TooLarge as e:
        raise SettingsError(f"cannot read settings: {e.strerror}", op="hook install", path=path,
                            hint="a Claude Code settings.json is a few KB: check the path") from None
    except OSError as e:
        raise SettingsError(f"cannot read settings: {e.strerror}", op="hook install", path=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SettingsError(f"settings.json is not UTF-8 (byte {e.start})", op="hook install", path=path,
                            hint="fix it by hand (Claude Code would not load it either), then run again") from None
    if not text.strip():
        return text, {}
    try:
        data = loads_exact(text, object_pairs_hook=_once)
    except _Twice as e:  # rewritten, the first would be gone, and the diff (of the parsed file) not show it
        raise SettingsError(f"settings.json has the key \"{e.key[:80]}\" twice in one object (Claude Code reads "
                            "only the last)", op="hook install", path=path,
                            hint="merge the two by hand, then run again") from None
    except RecursionError:
        raise SettingsError("settings.json is nested too deeply", op="hook install", path=path,
                            hint="fix it by hand, then run again") from None
    except ValueError as e:
        raise SettingsError(f"settings.json is not valid JSON (line {getattr(e, 'lineno', '?')})", op="hook install",
                            path=path, hint="fix it by hand (Claude Code would not load it either), then run again") from None
    if not isinstance(data, dict):
        raise SettingsError("settings.json is not a JSON object", op="hook install", path=path)
    return text, data


class _Twice(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _once(pairs: list) -> dict:
    """A JSON object whose keys are all distinct (``_Twice`` otherwise)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _Twice(k)
        out[k] = v
    return out


@hook_app.command("install")
@errors
def install(
    settings: Annotated[Optional[str], typer.Option("--settings", help="settings.json to edit (default ~/.claude/settings.json).")] = None,
    project: Annotated[bool, typer.Option("--project", help="Edit ./.claude/settings.json (this project) instead of the user file.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the difference, write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace fleetwatch hook entries whose command differs.")] = False,
    events: Annotated[EventSet, typer.Option("--events", help="auto: every mapped event if `claude --version` is 2.1.145 or later, else the core ones (an older Claude Code rejects a settings file naming events it does not know); all; core.")] = EventSet.auto,
    agent: Annotated[Optional[str], typer.Option("--agent", help="Bake --agent ID into the command (project settings of one agent).")] = None,
    goals_dir: Annotated[Optional[str], typer.Option("--goals-dir", help="Bake --goals-dir DIR into the command.")] = None,
    command: Annotated[Optional[str], typer.Option("--command", help="Program to call instead of this fleetwatch's absolute path.")] = None,
    form: Annotated[str, typer.Option("--form", help="auto: http (a POST to the running watcher's [hook] endpoint, no process) when [hook] is configured and Claude Code is 2.1.145 or later, else exec (one process, no shell) on 2.1.145 or later, else shell; http; exec; shell.")] = "auto",
    url: Annotated[Optional[str], typer.Option("--url", help="The hook endpoint's URL for --form http (default: from [hook] listen in the config).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Merge the fleetwatch hook entries into a Claude Code settings.json (idempotent; diff first)."""
    from projections.text import safe  # the path as inert text

    from watcher.hook.adapter import inert, valid_agent, write_atomic

    for flag, val in (("--agent", agent), ("--goals-dir", goals_dir)):
        if val is not None and not val:  # the hook would refuse every event: not baked in
            raise typer.BadParameter("an empty value: leave the option out instead", param_hint=flag)
    if agent and not valid_agent(agent):
        raise typer.BadParameter(f"'{safe(agent)}' is no agent id the hook takes (no '/', no control "
                                 "character, not '.' or '..'): it would refuse every event", param_hint="--agent")
    path = _settings_path(settings, project)
    before_text, before = _load(path)
    if goals_dir and not goals_dir.startswith(("/", "~", "$")):
        goals_dir = os.path.abspath(goals_dir)  # the hook runs in each session's cwd: ./fleet would be per project
    if form not in hookforms.FORMS:
        raise typer.BadParameter(f"'{safe(form)}' is not one of {', '.join(hookforms.FORMS)}", param_hint="--form")
    mode = EventSet(events).value
    version = claude_version() if mode == "auto" or form == "auto" else None
    chosen = events_for(mode, version)
    if mode == "auto" and chosen != HOOK_EVENTS:
        seen = ".".join(map(str, version)) if version else "not found"
        typer.echo(f"note: Claude Code {seen} (< {'.'.join(map(str, NEW_EVENTS_SINCE))}): only the "
                   f"{len(chosen)} core events; --events all adds the rest", err=True)
    if mode == "auto":
        chosen = hookforms.needed(chosen, version)
    endpoint = url or _endpoint_url(config) if form in ("auto", "http") else None
    how = hookforms.form_for(form, version, endpoint)
    if how == "http" and not endpoint:
        raise typer.BadParameter("http hooks need the watcher's endpoint: set [hook] listen in the config, "
                                 "or give --url", param_hint="--form")
    exe = command or _default_prefix(quoted=False)
    if how == "shell":
        cmd: Any = hook_command(shlex.quote(exe) if not command else command, agent, goals_dir)
    else:
        cmd = {e: (hookforms.matcher(e, MATCHER_EVENTS),
                   hookforms.entry(e, how, exe, url=endpoint, agent=agent, goals_dir=goals_dir, timeout=HOOK_TIMEOUT))
               for e in chosen}
    typer.echo(f"form: {how}" + (f" ({safe(endpoint)}; SessionStart as exec: Claude Code runs no http hook there)"
                                 if how == "http" else ""), err=True)
    after, actions = merge(before, cmd, force=force, events=chosen)
    after_text = render(after)
    changed = after != before
    if changed:
        # diff of the normalised JSON: only what the merge changes, not a reformatting
        diff = difflib.unified_diff(render(before).splitlines(keepends=True) if before_text else [],
                                    after_text.splitlines(keepends=True),
                                    fromfile=f"{safe(path)} (before)", tofile=f"{safe(path)} (after)")
        # the file's own text: a bidi override or C1 control in a value is shown, not obeyed
        sys.stdout.writelines(inert(line[:-1]) + "\n" if line.endswith("\n") else inert(line) for line in diff)
        if before_text and before_text != render(before):
            typer.echo("note: the file is rewritten as 2-space indented JSON (content otherwise unchanged)", err=True)
    kept = sorted(e for e, a in actions.items() if a == "kept")
    counts = {a: sum(1 for v in actions.values() if v == a) for a in ("added", "updated", "unchanged", "kept", "removed")}
    summary = ", ".join(f"{n} {a}" for a, n in counts.items() if n)
    if kept:
        typer.echo(f"note: a different fleetwatch hook command is already set for {', '.join(kept)}; "
                   "--force replaces it", err=True)
    if not changed:
        typer.echo(f"{safe(path)}: already installed ({summary}); nothing to change")
        return
    if dry_run:
        typer.echo(f"dry run: {safe(path)} not written ({summary})")
        return
    # a symlinked settings.json (dotfiles repos) is edited where it points: the link stays a link
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)  # `--settings settings.json`: here
        perm = os.stat(target).st_mode & 0o7777 if before_text else 0o644
        if before_text:
            write_atomic(path + ".fleetwatch.bak", before_text.encode(), perm)
        write_atomic(target, after_text.encode(), perm)
    except OSError as e:
        raise SettingsError(f"cannot write settings: {e.strerror}", op="hook install", path=path) from None
    typer.echo(f"{safe(path)}: written ({summary})" + (f"; previous version in {safe(path)}.fleetwatch.bak" if before_text else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(hook_app, name="hook")
