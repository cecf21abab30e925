"""``kind = "claude"``: Claude Code's own session list as a source.

``claude agents --json`` (Claude Code v2.1.145 and later: "list live Claude sessions as JSON for
scripting", CHANGELOG 2.1.145) prints one JSON array; each entry has ``pid``, ``cwd``, ``kind`` and
``startedAt``, plus ``sessionId``, ``name``, ``status`` (busy | waiting | idle) and ``state``
(working | blocked | done) when set. Each entry becomes one agent:

- id: ``name``, else ``sessionId``, else ``id`` (entries with none are skipped);
- state: ``status`` when set, else from ``state`` (working -> busy, blocked -> waiting, done -> idle);
- phase: from ``state`` (working -> haciendo, blocked -> bloqueado, done -> hecho);
- no ``dod_contract`` (the list has none): a session that no goal.json describes is MAL_LANZADO
  "no dod_contract", as the termination machine says. Name a session like its goal.json agent
  (``claude --bg --name a7``) and the goals source, listed first, gives the agent; an entry that
  leaves the list is CERRADO by absence like any other.

The command runs bounded (``run_argv``: timeout, output cap, process group killed); ``argv``
overrides the default ``["claude", "agents", "--json"]``.
"""
from __future__ import annotations

from projections.observations import AgentObs, SourceResult
from watcher.config import Source, expand, parse_duration
from watcher.sources.command import MAX_OUTPUT, run_argv
from watcher.sources.parse import clamp_activity
from watcher.sources.parse import ParseError, decode_json

DEFAULT_ARGV = ["claude", "agents", "--json"]
STATE_FROM = {"working": "busy", "blocked": "waiting", "done": "idle"}
PHASE_FROM = {"working": "haciendo", "blocked": "bloqueado", "done": "hecho"}
STATUSES = ("busy", "waiting", "idle")


def entry_to_obs(item: object, source: str) -> AgentObs | None:
    """One ``claude agents --json`` entry -> AgentObs (None: not an entry, or no id)."""
    if not isinstance(item, dict):
        return None
    aid = next((v.strip()[:200] for k in ("name", "sessionId", "id")
                if isinstance(v := item.get(k), str) and v.strip()), None)
    if aid is None:
        return None
    status, state = item.get("status"), item.get("state")
    st = status if status in STATUSES else STATE_FROM.get(state) if isinstance(state, str) else None
    phase = PHASE_FROM.get(state) if isinstance(state, str) else None
    return AgentObs(agent=aid, source=source, state=st, phase=phase,
                    error=None if st is not None else "claude agents: no status or state")


class ClaudeSource:
    kind = "claude"

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.argv = [expand(a) for a in (spec.argv or DEFAULT_ARGV)]
        self.timeout = parse_duration(spec.timeout)
        self.max_bytes = spec.max_bytes or MAX_OUTPUT
        self.last: SourceResult | None = None

    def parse(self, raw: bytes) -> SourceResult:
        try:
            doc = decode_json(raw)
        except ParseError as e:
            return SourceResult(name=self.name, kind=self.kind, ok=False, error=f"bad output: {e.reason}")
        if not isinstance(doc, list):
            return SourceResult(name=self.name, kind=self.kind, ok=False, error="bad output: not a JSON array")
        agents = [o for o in (entry_to_obs(x, self.name) for x in doc) if o is not None]
        return SourceResult(name=self.name, kind=self.kind, agents=agents)

    def poll(self, now: float, full: bool = True) -> SourceResult:
        if not full and self.last is not None:
            return self.last
        out, err = run_argv(self.argv, self.timeout, self.max_bytes)
        res = SourceResult(name=self.name, kind=self.kind, ok=False, error=err) if err \
            else clamp_activity(self.parse(out or b""), now)  # no activity after this poll
        self.last = res
        return res

    def close(self) -> None:
        pass
