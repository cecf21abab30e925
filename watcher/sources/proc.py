"""Process-backed sources: ``command`` (an argv printing a JSON array) and ``tmux``.

Both run without a shell, with a timeout, and report failures as values. They poll on full
resync ticks only; between them (inotify wake-ups) the last result is reused.
"""
from __future__ import annotations

import fnmatch
import math
import os
import re
from typing import Any, NamedTuple

from projections.observations import AgentObs, SourceResult
from watcher.config import Source, parse_duration
from watcher.sources import NO_FILES
# the bounded runner and the command source live in command.py; re-exported for old imports
from watcher.sources.command import MAX_OUTPUT, CommandSource, run_argv  # noqa: F401
from watcher.sources.panes import claude_in


# window_name last: it is the one free-text field (a tab in it cannot shift the others). tmux
# prints it raw (a newline, a U+2028 in it too), so each record ends with a nonce drawn for that
# poll, which no window name can predict: "a3\nx" is one window named so, never a window "a3".
TMUX_FORMAT = ("#{session_name}\t#{session_id}\t#{window_index}\t#{window_id}\t#{window_activity}\t#{pane_dead}\t"
               "#{pane_dead_status}\t#{pane_index}\t#{pane_id}\t#{pane_pid}\t#{socket_path}\t#{window_name}")
FIELDS = TMUX_FORMAT.count("\t") + 1
ECHO_S = 5.0          # pane activity this long after a nudge's keys were sent is the echo, not the agent
_WIN_PART = re.compile(r"^(\d+)(\.\d+)?$")


class Win(NamedTuple):
    session: str
    index: str            # type: ignore[assignment]  # tmux's window index; shadows tuple.index (never called)
    wid: str              # "@N": stable for the server's life, survives renames and renumbering
    name: str
    activity: float | None
    dead: bool            # every pane of the window is dead (the agent's pane, whichever it is, too)
    dead_status: int | None
    panes: tuple = ()     # (pane index, dead, exit status, pane id, pane pid) of each pane, in tmux's order

    def pane_dead(self, pane: str) -> tuple[bool, int | None]:
        """(dead, exit status) of the pane a target names (``.N``), else of the window."""
        for index, dead, status, *_ in self.panes if pane else ():
            if index == pane[1:]:
                return dead, status
        return self.dead, self.dead_status

    def exact(self, pane: str = "") -> str:
        """The exact tmux target (``=`` : the session name is not prefix-matched)."""
        return f"={self.session}:{self.index}{pane}"


class TmuxSource:
    """Window liveness from ``tmux [-L SOCKET] list-panes -a``, scoped to the configured socket
    and (``session``) session. Matching is exact, never by prefix:

    0. the pane the hook recorded (goal.json ``tmux``: ``$TMUX_PANE`` and ``$TMUX``'s socket path)
       wins: on this source's server (same socket path) the pane with that id, or none (its pane
       is gone); a pane on another server, or out of the ``session`` scope, is not this source's
       (nothing is said of it);
    1. else a ``target`` in goal.json: ``[=]session:index[.pane]``, ``[=]session:name`` (a name
       that is unique in that session) or ``@window_id``; a target that names no window in scope
       matches nothing (no fallback to a window merely named like the agent);
    2. else the window this agent was linked to before (by window id: a renamed window keeps it);
    3. else the one window in scope whose name is exactly the agent id (two such: none), never a
       window of ``exclude_windows``.
    2 and 3 only on a source scoped to the fleet (a ``socket`` or a ``session``): on the default
    server every window of every session would do, a stranger's too.

    Only 0 and 1 are exact (``tmux_exact``): only they report a dead pane, a pane whose Claude Code
    process is gone (``claude_gone``, ``panes.claude_in``) or a window gone, the facts that close
    an agent. A window matched by its name alone (2, 3) gives activity and a target, never a close:
    a stranger's window named like an agent is not that agent's.

    The agent's target becomes the exact ``=session:index[.pane]``. ``window_activity`` is liveness
    (output on screen), not progress; a window activity later than the poll's ``now`` counts as
    ``now`` (like a goal.json's later than its mtime: no output is seen before it happens);
    activity within ``ECHO_S`` after a nudge's keys were sent (``quiet``, from the notifier) is
    the echo of those keys and is ignored. An agent with no
    window is marked ``tmux_missing``, its unresolved target dropped (the fleet closes it "tmux
    window gone" if it was seen in one).
    """

    kind = "tmux"
    partial = False                  # (the Source protocol, watcher/sources/__init__.py: reads no files)
    cache = NO_FILES
    delta: tuple[Any, Any, Any] | None = None

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.timeout = parse_duration(spec.timeout)
        # tmux names a session 'my_proj' when asked for 'my.proj' (':' and '.' are its separators)
        self.session = None if spec.session is None else spec.session.replace(":", "_").replace(".", "_")
        self.last: SourceResult | None = None
        self.wins: list[Win] = []                       # as of the last poll that succeeded
        self.known = False                              # one poll succeeded: ``wins`` is tmux's word
        self.by_id: dict[str, Win] = {}
        self.links: dict[str, str] = {}                 # agent -> window id it was matched to
        self.accepted: dict[str, float] = {}            # window id -> last pane activity taken as the agent's
        self.quiet: dict[str, tuple[float, float]] = {}  # agent -> (keys sent from, until) of its last nudge
        self._enriched: dict[str, tuple[AgentObs, tuple, AgentObs]] = {}  # agent -> (input, window, output)
        self.excluded = tuple(spec.exclude_windows or ())  # window-name globs never an agent
        self.socket_path = ""                           # this server's, from the last poll
        self.by_pane: dict[str, tuple[Win, str] | None] = {}  # pane id -> (window, ".index"); None: out of scope
        # asked by enrich/orphans, answered by the next poll (in its thread): pane id -> recorded pid,
        # window ids -> is a Claude Code process in one of its panes
        self.want: dict[str, int | None] = {}
        self.want_wins: set[str] = set()
        self.claude: dict[str, bool | None] = {}
        self.win_claude: dict[str, bool] = {}

    def argv(self, end: str = "") -> list[str]:
        """The list-panes command; ``end``: the nonce closing every record (see TMUX_FORMAT)."""
        # -u: names in UTF-8 whatever the locale (under a non-UTF-8 one tmux prints "café" as "caf_")
        base = ["tmux", "-u"] + (["-L", self.spec.socket] if self.spec.socket else [])
        return base + ["list-panes", "-a", "-F", TMUX_FORMAT + (f"\t{end}" if end else "")]

    def parse(self, raw: bytes, end: str = "") -> list[Win]:
        """Windows from list-panes output (one record per pane: a window is dead only when all
        its panes are, whichever has the focus). ``end``: the nonce of ``argv(end)``: a record is
        what lies before ``\t<end>\n``, whatever the window name holds (without it: one a line)."""
        text = raw.decode("utf-8", "replace")
        self._out_of_scope: set[str] = set()
        records = text.split(f"\t{end}\n")[:-1] if end else text.split("\n")
        wins: dict[str, Win] = {}
        for line in records:
            parts = line.split("\t", FIELDS - 1)
            if len(parts) < FIELDS:
                continue
            sess, _sid, idx, wid, act, dead, dstat, pane, pane_id, pane_pid, sock, wname = parts
            self.socket_path = sock or self.socket_path
            if self.session is not None and sess != self.session:
                self._out_of_scope.add(pane_id)
                continue  # out of scope
            try:
                activity = float(act) if act else None
            except ValueError:
                activity = None
            if activity is not None and not math.isfinite(activity):
                activity = None
            one = (pane, dead == "1", int(dstat) if dstat.lstrip("-").isdigit() else None, pane_id,
                   int(pane_pid) if pane_pid.isdigit() else None)
            w = wins.get(wid)
            if w is None:
                wins[wid] = Win(sess, idx, wid, wname, activity, one[1], one[2], (one,))
            else:
                alive = not (w.dead and one[1])
                wins[wid] = w._replace(dead=not alive, dead_status=None if alive else w.dead_status,
                                       panes=w.panes + (one,))
        return list(wins.values())

    def poll(self, now: float, full: bool = True) -> SourceResult:
        if not full and self.last is not None:
            return self.last
        end = os.urandom(8).hex()
        out, err = run_argv(self.argv(end), self.timeout)
        if err and ("no server running" in err or "error connecting" in err):
            out, err = b"", None  # no tmux server: no window at all, not a failure
        if err:
            res = SourceResult(name=self.name, kind=self.kind, ok=False, error=err)
        else:
            self.wins = [w if w.activity is None or w.activity <= now else w._replace(activity=now)
                         for w in self.parse(out or b"", end)]  # no later than this poll (see the class)
            self.by_id = {w.wid: w for w in self.wins}
            by_pane: dict[str, tuple[Win, str] | None] = dict.fromkeys(self._out_of_scope)
            for w in self.wins:
                for index, _dead, _status, pane_id, _pid in w.panes:
                    by_pane[pane_id] = (w, f".{index}")
            self.by_pane = by_pane
            self._ask_procs()
            self.known = True
            res = SourceResult(name=self.name, kind=self.kind)
        self.last = res
        return res

    def _ask_procs(self) -> None:
        """Answer what enrich and orphans asked (in the poll's thread): is Claude Code in each
        wanted pane (with its recorded pid), and in any pane of each wanted window."""
        claude: dict[str, bool | None] = {}
        want, self.want = self.want, {}     # asked again by the next merge, while still wanted
        wins, self.want_wins = self.want_wins, set()
        for pane_id, pid in want.items():
            hit = self.by_pane.get(pane_id)
            if hit is not None:
                w, suffix = hit
                ppid = next((p[4] for p in w.panes if f".{p[0]}" == suffix), None)
                claude[pane_id] = claude_in(ppid, pid)
        self.claude = claude
        self.win_claude = {w.wid: any(claude_in(p[4]) for p in w.panes if not p[1])
                           for w in self.wins if w.wid in wins}

    def same_server(self, socket: str | None) -> bool:
        """The recorded socket path names this source's tmux server."""
        if not socket or not self.socket_path:
            return False
        if socket == self.socket_path:
            return True
        try:
            return os.path.samefile(socket, self.socket_path)
        except (OSError, ValueError):
            return False

    def excluded_name(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, g) for g in self.excluded)

    def resolve(self, target: str) -> tuple[Win | None, str]:
        """(window, pane suffix) of an exact target, or (None, "")."""
        t = target.strip()
        if t.startswith("@"):
            return self.by_id.get(t), ""
        sess, colon, rest = t.lstrip("=").partition(":")
        if not colon or not sess:
            return None, ""
        if self.session is not None and sess != self.session:
            return None, ""
        m = _WIN_PART.match(rest)
        if m:
            hits = [w for w in self.wins if w.session == sess and w.index == m.group(1)]
            return (hits[0], m.group(2) or "") if hits else (None, "")
        if rest.startswith("@"):
            w = self.by_id.get(rest)
            return (w, "") if w is not None and w.session == sess else (None, "")
        hits = [w for w in self.wins if w.session == sess and w.name == rest]
        return (hits[0], "") if len(hits) == 1 else (None, "")

    def find(self, obs: AgentObs) -> tuple[Win | None, str, str]:
        """(window, pane suffix, how): how is "pane" or "target" (exact), "link" or "name" (by a
        name), or "elsewhere" (the recorded pane is not this source's)."""
        if obs.pane and obs.tmux_socket:
            if not self.same_server(obs.tmux_socket):
                return None, "", "elsewhere"
            if obs.pane not in self.by_pane:
                return None, "", "pane"  # gone from this server
            hit = self.by_pane[obs.pane]
            return (None, "", "elsewhere") if hit is None else (hit[0], hit[1], "pane")
        if obs.target:
            return (*self.resolve(obs.target), "target")
        if not (self.spec.socket or self.session):
            return None, "", "name"   # the default server, unscoped: any window of anyone's; no name counts
        wid = self.links.get(obs.agent)
        if wid is not None and wid in self.by_id:
            return self.by_id[wid], "", "link"
        hits = [w for w in self.wins if w.name == obs.agent and not self.excluded_name(w.name)]
        return (hits[0], "", "name") if len(hits) == 1 else (None, "", "name")

    def _activity(self, agent: str, w: Win) -> float | None:
        """The window's activity, minus the echo of the watcher's own nudge keys."""
        act = w.activity
        q = self.quiet.get(agent)
        if act is not None and q is not None and math.floor(q[0]) <= act <= q[1] + ECHO_S:
            return self.accepted.get(w.wid)
        if act is not None:
            self.accepted[w.wid] = act
        return act

    def enrich(self, obs: AgentObs) -> AgentObs:
        """The later of goal.json's and the window's activity, the exact target; a dead pane is
        reported; no window -> ``tmux_missing``."""
        import msgspec

        w, pane, how = self.find(obs)
        exact = how in ("pane", "target")
        hit = self._enriched.get(obs.agent)
        if how == "elsewhere":
            self.links.pop(obs.agent, None)
            return obs  # another server's pane: this source says nothing of it
        if w is None:
            self.links.pop(obs.agent, None)
            if hit is not None and hit[0] is obs and hit[1] == ():
                return hit[2]
            # no window in scope: a target from goal.json that names none is not passed on (a nudge
            # must never type into a pane outside the configured socket/session)
            out = obs if obs.tmux_missing and obs.target is None and obs.tmux_exact == exact else \
                msgspec.structs.replace(obs, tmux_missing=True, target=None, tmux_exact=exact)
            self._enriched[obs.agent] = (obs, (), out)
            return out
        self.links[obs.agent] = w.wid
        act = self._activity(obs.agent, w)
        dead, status = w.pane_dead(pane) if exact else (False, None)  # a namesake's dead pane closes nothing
        gone = False
        if how == "pane" and obs.pane and not dead and not obs.ended:   # "pane": found by obs.pane
            self.want[obs.pane] = obs.claude_pid  # asked again at every poll while the agent is seen
            gone = self.claude.get(obs.pane) is False
        key = (act, w.exact(pane), dead, status, exact, gone)
        if hit is not None and hit[0] is obs and hit[1] == key:
            return hit[2]  # same input, same window: the same object (lets detectors skip it)
        la = obs.last_activity
        if act is not None and (la is None or act > la):
            la = act
        out = msgspec.structs.replace(obs, last_activity=la, target=w.exact(pane), pane_dead=dead,
                                      pane_dead_status=status, tmux_missing=False, tmux_exact=exact,
                                      claude_gone=gone)
        self._enriched[obs.agent] = (obs, key, out)
        return out

    def close(self) -> None:
        pass
