"""Event types of missions (work packages, their circuits) and swarms. Part of the one union in
``events.types`` (same tag field and rules: stable tags, every later field with a default); kept
apart so events/types.py stays small."""
# No `from __future__ import annotations`: msgspec would compile each string annotation at start
# (tests/watcher/cli/test_cli_start.py: a fast path compiles no source text)
from msgspec import Struct, field


class _M(Struct, frozen=True, tag_field="type", forbid_unknown_fields=False, omit_defaults=False):
    pass


class WpChanged(_M, frozen=True, tag="wp.changed"):
    mission: str
    wp: str
    from_: str | None = field(name="from", default=None)
    to: str | None = None  # None: the work package disappeared
    deps: list[str] = []
    attempts: int = 0
    last_error_sig: str | None = None
    same_sig_count: int = 0
    source: str = ""
    risk: str | None = None  # the row's `risk` when the query selects it (CRITICAL needs approval)

    @property
    def subject(self) -> str:
        return f"mission:{self.mission}"


class WpViolated(_M, frozen=True, tag="wp.violated"):
    """An orchestrator rule broken by a WP (projections/missions/rules.py); count/limit: a cap's level."""

    mission: str
    wp: str
    rule: str
    detail: str = ""
    count: int = 0
    limit: int = 0

    @property
    def subject(self) -> str:
        return f"mission:{self.mission}"


class WpFlagged(_M, frozen=True, tag="wp.flagged"):
    """A WP crossed a retry limit (flag: retries = attempts > 3, same-error = same signature > 2)."""

    mission: str
    wp: str
    flag: str
    detail: str = ""

    @property
    def subject(self) -> str:
        return f"mission:{self.mission}"


class CircuitChanged(_M, frozen=True, tag="circuit.changed"):
    scope: str
    from_: str | None = field(name="from", default=None)
    to: str | None = None
    source: str = ""

    @property
    def subject(self) -> str:
        return f"circuit:{self.scope}"


class MissionCompleted(_M, frozen=True, tag="mission.completed"):
    mission: str
    wps: int = 0

    @property
    def subject(self) -> str:
        return f"mission:{self.mission}"


class SwarmChanged(_M, frozen=True, tag="swarm.changed"):
    group: str
    child: str
    from_: str | None = field(name="from", default=None)
    to: str | None = None
    label: str = ""
    source: str = ""

    @property
    def subject(self) -> str:
        return f"swarm:{self.group}"


class SwarmCapped(_M, frozen=True, tag="swarm.capped"):
    """A group over a cap (max-concurrent, max-children, max-total), once per episode."""

    group: str
    cap: str
    count: int = 0
    limit: int = 0

    @property
    def subject(self) -> str:
        return f"swarm:{self.group}"
