"""Process-backed sources: ``command`` (an argv printing a JSON array) and ``tmux``.

Both run without a shell, with a timeout, and report failures as values. They poll on full
resync ticks only; between them (inotify wake-ups) the last result is reused.
"""
from __future__ import annotations

from typing import Any

from projections.observations import AgentObs, SourceResult
from watcher.config import Source, parse_duration
# the bounded runner and the command source live in command.py; re-exported for old imports
from watcher.sources.command import MAX_OUTPUT, CommandSource, run_argv  # noqa: F401


TMUX_FORMAT = "#{session_name}\t#{window_index}\t#{window_name}\t#{window_activity}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_index}"


class TmuxSource:
    """Window liveness from ``tmux [-L SOCKET] list-windows -a``. One agent per window, matched by
    the window name (== agent id) or by target ``session:window[.pane]``. ``window_activity`` is
    liveness (output on screen), not progress."""

    kind = "tmux"

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.timeout = parse_duration(spec.timeout)
        self.last: SourceResult | None = None
        self.windows: dict[str, dict[str, Any]] = {}
        self._enriched: dict[str, tuple[AgentObs, tuple, AgentObs]] = {}  # agent -> (input, window, output)

    def argv(self) -> list[str]:
        base = ["tmux"] + (["-L", self.spec.socket] if self.spec.socket else [])
        return base + ["list-windows", "-a", "-F", TMUX_FORMAT]

    def parse(self, raw: bytes) -> dict[str, dict[str, Any]]:
        wins: dict[str, dict[str, Any]] = {}
        for line in raw.decode("utf-8", "replace").splitlines():
            parts = line.split("\t")
            if len(parts) < 6:
                continue
            sess, idx, wname, act, dead, dstat = parts[:6]
            try:
                activity = float(act) if act else None
            except ValueError:
                activity = None
            info = {"target": f"{sess}:{idx}", "activity": activity, "dead": dead == "1",
                    "dead_status": int(dstat) if dstat.lstrip("-").isdigit() else None}
            wins.setdefault(wname, info)
            wins[f"{sess}:{idx}"] = info
        return wins

    def poll(self, now: float, full: bool = True) -> SourceResult:
        if not full and self.last is not None:
            return self.last
        out, err = run_argv(self.argv(), self.timeout)
        if err and ("no server running" in err or "error connecting" in err):
            out, err = b"", None  # no tmux server: nothing to enrich, not a failure
        if err:
            res = SourceResult(name=self.name, kind=self.kind, ok=False, error=err)
        else:
            self.windows = self.parse(out or b"")
            res = SourceResult(name=self.name, kind=self.kind)
        self.last = res
        return res

    def enrich(self, obs: AgentObs) -> AgentObs:
        """The later of goal.json's and the window's activity; a dead pane is reported."""
        w = None
        if obs.target:
            w = self.windows.get(obs.target) or self.windows.get(obs.target.split(".")[0])
        if w is None:
            w = self.windows.get(obs.agent)
        if w is None:
            return obs
        key = (w["activity"], w["target"], w["dead"], w["dead_status"])
        hit = self._enriched.get(obs.agent)
        if hit is not None and hit[0] is obs and hit[1] == key:
            return hit[2]  # same input, same window: the same object (lets detectors skip it)
        import msgspec

        la = obs.last_activity
        if w["activity"] is not None and (la is None or w["activity"] > la):
            la = w["activity"]
        out = msgspec.structs.replace(obs, last_activity=la, target=obs.target or w["target"],
                                      pane_dead=w["dead"], pane_dead_status=w["dead_status"])
        self._enriched[obs.agent] = (obs, key, out)
        return out

    def close(self) -> None:
        pass
