"""``kind = "claude"``: Claude Code's own session list as a source.

Where the list comes from:
- ``glob`` set (e.g. ``~/.claude/sessions/*.json``): Claude Code's per-process session files, read
  directly (no process; each file bounded by ``max_bytes``, opened non-blocking, never through a
  symlink; read again only when its lstat changed, or while its coarse mtime is within its grain:
  ``filestat.racy``). Each holds ``pid``, ``sessionId``, ``cwd``, ``name``, ``status`` (busy |
  waiting | idle), ``waitingFor`` and ``statusUpdatedAt`` (epoch ms), written by the running client.
- else ``argv`` (default ``claude agents --json``, Claude Code v2.1.145 and later): one JSON array,
  entries with ``pid``, ``cwd``, ``kind``, ``startedAt``, ``sessionId``, ``name``, ``status``
  (busy | waiting | idle), ``waitingFor``, ``state`` (working | blocked | done) when set. Run
  bounded (``run_argv``: timeout, output cap, process group killed).

A session joins its agent, never a second one (``join``, after every source's poll):
1. the agent whose goal.json records the session's id (the hook writes ``session_id``), else
2. the agent whose goal.json records the session's pid (``claude_pid`` / ``tmux.pid``), else
3. the agent whose goal.json ``cwd`` is the session's cwd (only one such agent), else
4. the agent named like the session (``claude --name a7``).
A joined session adds what the hooks cannot see. An approved permission fires no hook; Claude Code
2.1.145 fires none for a denial or an Esc either (2.1.337 fires ``Interrupt``). So the session's
own status wins over goal.json's when it was set after the hook's last write (its time later than
goal.json's ``hook_at``, the hook's last activity write to the millisecond; without one,
``last_activity`` + 1 s): ``waiting`` becomes ``busy`` (approved) or ``idle`` (denied,
interrupted), ``busy`` becomes ``idle``; ``idle`` never becomes ``busy`` (the hooks say so first).
The status's time is ``statusUpdatedAt`` where the session says it, else the poll that first saw
that status (2.1.145's files and ``claude agents --json`` carry none). The session's pid fills a
missing ``claude_pid``. A session no agent claims is an agent of
its own (id: ``name``, else ``sessionId``; state from ``status``, else ``state``; phase working ->
haciendo, blocked -> bloqueado, done -> hecho), with no ``dod_contract`` -- unless its session file
says it runs in tmux: its window is then the tmux source's to report (a window running claude is
an agent named after the window), never a second agent beside it.
"""
from __future__ import annotations

import glob as _glob
import os
import stat
import time

from typing import Any

import msgspec

from projections.observations import AgentObs, SourceResult, Snapshot
from watcher.config import Source, expand, parse_duration
from watcher.sources import NO_FILES
from watcher.sources.command import MAX_OUTPUT, run_argv
from watcher.sources.filestat import racy
from watcher.sources.parse import ParseError, clamp_activity, decode_json

DEFAULT_ARGV = ["claude", "agents", "--json"]
STATE_FROM = {"working": "busy", "blocked": "waiting", "done": "idle"}
PHASE_FROM = {"working": "haciendo", "blocked": "bloqueado", "done": "hecho"}
STATUSES = ("busy", "waiting", "idle")
MAX_SESSION_FILES = 1024      # session files read per poll (one per live Claude Code process)
SESSION_FILE_BYTES = 65536    # default cap per session file
FRESH_AFTER = 1.0             # s: without hook_at, a status is newer than last_activity (whole seconds) past this


class Session(msgspec.Struct, frozen=True):
    """The metadata of one live Claude Code session (no content)."""

    sid: str | None
    pid: int | None
    cwd: str | None
    name: str | None
    status: str | None
    state: str | None
    updated: float | None     # epoch seconds of the status, when the list says
    in_tmux: bool = False     # the session runs in a tmux pane (its file's ``tmux``, 2.1.337 on)


def _s(v, cap: int = 200) -> str | None:
    return v.strip()[:cap] if isinstance(v, str) and v.strip() else None


def session_of(item: object) -> Session | None:
    """One session-list entry or session file -> Session (None: not an object)."""
    if not isinstance(item, dict):
        return None
    pid = item.get("pid")
    upd = item.get("statusUpdatedAt")
    status, state = item.get("status"), item.get("state")
    return Session(sid=_s(item.get("sessionId")), pid=pid if type(pid) is int and 0 < pid < 1 << 31 else None,
                   cwd=_s(item.get("cwd"), 4096), name=_s(item.get("name")),
                   status=status if status in STATUSES else None,
                   state=state if isinstance(state, str) else None,
                   updated=upd / 1000.0 if isinstance(upd, (int, float)) and type(upd) is not bool and 0 < upd < 1e14
                   else None,
                   in_tmux=isinstance(item.get("tmux"), str) and bool(item.get("tmux")))


def own_agent(s: Session, source: str) -> AgentObs | None:
    """A session no agent claims, as an agent of its own (None: it has no id)."""
    aid = s.name or s.sid
    if aid is None:
        return None
    st = s.status or (STATE_FROM.get(s.state) if s.state else None)
    return AgentObs(agent=aid, source=source, state=st, phase=PHASE_FROM.get(s.state) if s.state else None,
                    session_id=s.sid, claude_pid=s.pid,
                    error=None if st is not None else "claude agents: no status or state")


def entry_to_obs(item: object, source: str) -> AgentObs | None:
    """One ``claude agents --json`` entry -> AgentObs (None: not an entry, or no id)."""
    s = session_of(item)
    return own_agent(s, source) if s is not None else None


OVERRIDES = {("waiting", "busy"), ("waiting", "idle"), ("busy", "idle")}  # (goal.json's, the session's)


def reconcile(obs: AgentObs, s: Session) -> AgentObs:
    """The agent ``obs`` (goal.json's) with what its session ``s`` adds: the session's status where
    it is newer than the hook's last write (see the module doc), and the pid."""
    changes: dict = {}
    ref = obs.hook_at if obs.hook_at is not None else \
        obs.last_activity + FRESH_AFTER if obs.last_activity is not None else None
    if (obs.state, s.status) in OVERRIDES and s.updated is not None and (ref is None or s.updated > ref):
        changes.update(state=s.status, waiting_for=None)
    if obs.claude_pid is None and s.pid is not None:
        changes["claude_pid"] = s.pid
    return msgspec.structs.replace(obs, **changes) if changes else obs


def _read_session_file(path: str, cap: int) -> object:
    """A session file's JSON, or None (absent, not a regular file, a symlink, over ``cap``, not JSON)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        raw = os.read(fd, cap + 1)
        if len(raw) > cap:
            return None
        return decode_json(raw)
    except (OSError, ParseError):
        return None
    finally:
        os.close(fd)


class ClaudeSource:
    kind = "claude"
    partial = False                  # (the Source protocol, watcher/sources/__init__.py: reads no files)
    cache = NO_FILES
    delta: tuple[Any, Any, Any] | None = None

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.glob = expand(spec.glob) if spec.glob else None
        self.argv = [expand(a) for a in (spec.argv or DEFAULT_ARGV)]
        self.timeout = parse_duration(spec.timeout)
        self.max_bytes = spec.max_bytes or (SESSION_FILE_BYTES if self.glob else MAX_OUTPUT)
        self.last: SourceResult | None = None
        self.sessions: list[Session] = []
        # session (its id, else its pid) -> (status, poll that first saw it)
        self.seen: dict[str | int | None, tuple[str | None, float]] = {}
        self._files: dict[str, tuple[tuple, Session | None]] = {}  # path -> (its lstat key, its session)

    def parse(self, raw: bytes) -> SourceResult:
        try:
            doc = decode_json(raw)
        except ParseError as e:
            return SourceResult(name=self.name, kind=self.kind, ok=False, error=f"bad output: {e.reason}")
        if not isinstance(doc, list):
            return SourceResult(name=self.name, kind=self.kind, ok=False, error="bad output: not a JSON array")
        self.sessions = [s for s in (session_of(x) for x in doc) if s is not None]
        return SourceResult(name=self.name, kind=self.kind)

    def _read_files(self) -> SourceResult:
        paths = sorted(p for p in _glob.glob(self.glob) if not p.endswith(".key"))[:MAX_SESSION_FILES] \
            if self.glob else []
        self.sessions = []
        files: dict[str, tuple[tuple, Session | None]] = {}
        now_ns = time.time_ns()
        for p in paths:
            try:
                st = os.lstat(p)
            except OSError:
                continue  # gone since the glob: read as absent
            k = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
            hit = self._files.get(p)
            if hit is None or hit[0] != k:
                hit = (k, session_of(_read_session_file(p, self.max_bytes)))
            if not racy(st.st_mtime_ns, now_ns):  # a coarse mtime within its grain: read again next poll
                files[p] = hit
            if hit[1] is not None:
                self.sessions.append(hit[1])
        self._files = files
        return SourceResult(name=self.name, kind=self.kind)

    def _timed(self, now: float) -> None:
        """Each session without a status time gets the time of the poll that first saw its status."""
        seen: dict[str | int | None, tuple[str | None, float]] = {}
        out = []
        for s in self.sessions:
            key = s.sid or s.pid
            old = self.seen.get(key)
            first = old[1] if old is not None and old[0] == s.status else now
            seen[key] = (s.status, first)
            out.append(s if s.updated is not None else msgspec.structs.replace(s, updated=first))
        self.seen, self.sessions = seen, out

    def poll(self, now: float, full: bool = True) -> SourceResult:
        """The sessions are kept for ``join``; the result itself lists no agent (``join`` adds the
        sessions no agent claims once every source has answered)."""
        if self.glob:
            self.last = self._read_files()
            self._timed(now)
            return self.last
        if not full and self.last is not None:
            return self.last
        out, err = run_argv(self.argv, self.timeout, self.max_bytes)
        if err:
            self.sessions = []
            res = SourceResult(name=self.name, kind=self.kind, ok=False, error=err)
        else:
            res = clamp_activity(self.parse(out or b""), now)
            self._timed(now)
        self.last = res
        return res

    def join(self, snap: Snapshot) -> None:
        """Each session of the last poll joins its agent in ``snap`` (see the module doc), or is an
        agent of its own. Nothing when this source failed this tick."""
        if self.name in snap.failed or self.last is None or not self.last.ok:
            return
        by_sid: dict[str, str] = {}
        by_pid: dict[int, str] = {}
        by_cwd: dict[str, list[str]] = {}
        for known, obs in snap.agents.items():
            if obs.session_id:
                by_sid.setdefault(obs.session_id, known)
            if obs.claude_pid:
                by_pid.setdefault(obs.claude_pid, known)
            if obs.cwd:
                by_cwd.setdefault(os.path.normpath(obs.cwd), []).append(known)
        for s in self.sessions:
            aid = (by_sid.get(s.sid) if s.sid else None) or (by_pid.get(s.pid) if s.pid else None)
            if aid is None and s.cwd:
                near = by_cwd.get(os.path.normpath(s.cwd), [])
                aid = near[0] if len(near) == 1 else None
            if aid is None and s.name in snap.agents and snap.agents[s.name].source != self.name:
                aid = s.name
            if aid is not None:
                snap.agents[aid] = reconcile(snap.agents[aid], s)
                continue
            if s.in_tmux:  # its window is the tmux source's to call an agent (a claude runs in it): not twice
                continue
            own = own_agent(s, self.name)
            if own is not None and own.agent not in snap.agents:
                snap.agents[own.agent] = own
                if own.session_id:
                    by_sid[own.session_id] = own.agent

    def close(self) -> None:
        pass
