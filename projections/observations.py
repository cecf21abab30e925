"""What sources observe in one tick (level-based: the full current set, every tick).

Pure data, built by ``watcher/sources`` and read by the pure ``detect`` functions of the
projections. Observations never carry session content: the ``dod`` text is reduced to nothing,
the contract to its sha256 and length.
"""
from __future__ import annotations

from typing import Any

import msgspec


class AgentObs(msgspec.Struct, kw_only=True):
    agent: str
    source: str                       # source name
    path: str | None = None           # goal.json path (goals source)
    error: str | None = None          # set -> MAL_LANZADO with this reason (unreadable, not JSON, ...)
    state: str | None = None          # busy | idle | waiting (anything else -> MAL_LANZADO)
    phase: str | None = None          # normalised to Spanish: haciendo testeando hecho preguntando bloqueado
    contract_sha256: str | None = None  # None: no/empty dod_contract
    contract_len: int = 0
    checks: list[dict[str, Any]] | None = None  # a structured dod_contract (validated), None for free text
    cwd: str | None = None            # goal.json `cwd`: where cmd checks run
    dod_status: str | None = None     # pending | met | failed | (other, kept)
    dod_verifier: str | None = None
    last_activity: float | None = None  # epoch seconds: later of goal.json and tmux window
    ended: bool = False               # goal.json marked ended (hook SessionEnd) -> CERRADO
    target: str | None = None         # tmux target, e.g. "fleet:1.0"
    task: str | None = None           # goal.json `task` (a short title; shown escaped)
    pane_dead: bool = False
    pane_dead_status: int | None = None
    tool_open: bool = False           # goal.json tools_open (hook): a tool call began and has not ended
    tmux_missing: bool = False        # a tmux source looked and found no window for this agent
    # the exact pane the hook recorded (goal.json `tmux`: $TMUX_PANE, $TMUX's socket) and Claude Code's pid
    pane: str | None = None           # "%N": the tmux pane id (unique for the server's life)
    tmux_socket: str | None = None    # the tmux server's socket path
    claude_pid: int | None = None
    session_id: str | None = None     # goal.json `session_id` (the hook records it): joins Claude Code's session list
    hook_at: float | None = None      # goal.json `hook_at`: epoch seconds of the hook's last activity write
    stop_error: str | None = None     # goal.json `stop_error`: the API error that ended the last turn (hook StopFailure)
    tmux_exact: bool = False          # set by a tmux source: matched by recorded pane or goal.json target, not by name
    claude_gone: bool = False         # set by a tmux source: the recorded pane lives, no claude process runs in it
    waiting_for: dict[str, Any] | None = None  # {"kind", "tool"}: projections.fleet.waiting.clean (metadata only)


class RunObs(msgspec.Struct, kw_only=True):
    run: str                          # `run` field, else the folder name
    source: str
    path: str | None = None
    doc: dict[str, Any] | None = None  # the parsed steps.json (None when error)
    error: str | None = None


class RowObs(msgspec.Struct, kw_only=True):
    """One row of a sqlite or command source: ``entity`` is wp | circuit | swarm."""

    entity: str
    source: str
    key: tuple[str, ...]
    row: dict[str, Any]


class SourceResult(msgspec.Struct, kw_only=True):
    name: str
    kind: str
    ok: bool = True
    error: str | None = None          # why the source failed this tick (no secrets, no content)
    error_class: str = ""             # typed cause: timeout, too-large, exit-status, root-missing, ...
    exit_code: int | None = None      # a command source's exit status, when it had one
    agents: list[AgentObs] = []
    runs: list[RunObs] = []
    rows: list[RowObs] = []
    # files of a file source not in this result because their first read failed and they never
    # read well before (the two-read rule): their runs are not gone (projections.runs.fold._gone)
    held: int = 0


class Snapshot(msgspec.Struct, kw_only=True):
    """One tick's merged view. ``failed`` names sources that failed this tick: whatever they
    used to report keeps its last known state (a broken source never closes the fleet)."""

    results: list[SourceResult] = []
    agents: dict[str, AgentObs] = {}
    runs: dict[str, RunObs] = {}
    rows: dict[str, list[RowObs]] = {}     # entity -> rows
    failed: dict[str, str] = {}            # source name -> error
    # a tmux source failed and never answered in this process: what it adds (a dead pane, a
    # window's activity, the exact target) is unknown this tick; the log's record of it stands
    tmux_unknown: bool = False
    # The watcher's change hint (set at the edge, watcher/runtime/loop.py; read by its scheduler,
    # watcher/runtime/schedule.py, never by a detector): ``gen`` numbers the snapshots one watcher
    # hands out; ``dirty`` names the agents whose observation or folded state records may differ
    # from those of snapshot ``gen - 1`` (None: any may).
    gen: int = 0
    dirty: frozenset[str] | None = None
