"""Event types: frozen msgspec Structs, one tagged union.

Every type has a stable string tag (``agent.classified``, ...), never a Python import path.
Invariant: a field added in a later version always has a default, so old rows keep decoding.
Events carry ids, states, classes, reasons and digests only, never session content or secrets.
"""
# No `from __future__ import annotations`: msgspec would compile each string annotation (test_cli_start.py)

from typing import Any, Union, cast

import msgspec
from msgspec import Struct, field
from events.types_checks import DodCheckStarted  # noqa: I001  (the checker's record)
from events.types_hub import (HostEvent, HostGap, HostRefused, HostResumed, HostSilent,  # noqa: I001  (the hub's types)
                              HubConsumerTaken)
from events.types_launch import AgentLaunched, DodActed, PlanRecorded, PlanStopped  # noqa: I001  (launch/verify/act)
from events.types_missions import (CircuitChanged, MissionCompleted, SwarmCapped, SwarmChanged,  # noqa: I001
                                   WpChanged, WpFlagged, WpViolated)  # (missions and swarms)


class _E(Struct, frozen=True, tag_field="type", forbid_unknown_fields=False, omit_defaults=False):
    """Base of every event. ``subject`` is derived, never stored twice."""

    @property
    def subject(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


# ---- fleet ---------------------------------------------------------------------------------
class AgentClassified(_E, frozen=True, tag="agent.classified"):
    agent: str
    from_: str | None = field(name="from", default=None)
    to: str = ""
    state: str | None = None
    phase: str | None = None
    reason: str = ""
    source: str = ""
    contract_sha256: str | None = None
    contract_len: int = 0
    task: str | None = None
    target: str | None = None
    last_activity: str | None = None  # ISO, as observed this tick
    waiting_for: dict[str, Any] | None = None  # {"kind", "tool"} while the agent waits (metadata only)

    @property
    def subject(self) -> str:
        return f"agent:{self.agent}"


class AgentUpdated(_E, frozen=True, tag="agent.updated"):
    """State, phase, task, target, last activity or the reason's cause changed within the class
    (edge-triggered: one event per observed change, none while nothing changes). ``changed`` names
    the fields that differ from the last recorded values; ``reason``: this tick's (None: an old row)."""

    agent: str
    state: str | None = None
    phase: str | None = None
    task: str | None = None
    target: str | None = None
    last_activity: str | None = None
    source: str = ""
    changed: list[str] = []
    reason: str | None = None
    waiting_for: dict[str, Any] | None = None  # {"kind", "tool"} while the agent waits (metadata only)

    @property
    def subject(self) -> str:
        return f"agent:{self.agent}"


class AgentNudged(_E, frozen=True, tag="agent.nudged"):
    agent: str
    attempt: int = 1
    ok: bool = True
    error: str = ""
    stall_seq: int = 0  # seq of the ESTANCADO classification this nudge belongs to

    @property
    def subject(self) -> str:
        return f"agent:{self.agent}"


# ---- DoD -----------------------------------------------------------------------------------
class DodVerdict(_E, frozen=True, tag="dod.verdict"):
    agent: str
    verdict: str  # met | failed | unevaluable
    verifier: str
    evidence: str = ""
    source: str = "cli"  # cli | goal.json | checks
    checks: list[dict[str, Any]] = []  # the checker's per-check results (id, status, exit, duration_s, comparison, digest, lines)

    @property
    def subject(self) -> str:
        return f"dod:{self.agent}"


class DodContractChanged(_E, frozen=True, tag="dod.contract_changed"):
    agent: str
    old_sha256: str | None = None
    new_sha256: str | None = None
    new_len: int = 0

    @property
    def subject(self) -> str:
        return f"dod:{self.agent}"


class DodFlagged(_E, frozen=True, tag="dod.flagged"):
    """A DoD condition worth a human: ``self-approved`` or ``claim-unverified``."""

    agent: str
    flag: str
    detail: str = ""

    @property
    def subject(self) -> str:
        return f"dod:{self.agent}"


# ---- runs (steps.json) ---------------------------------------------------------------------
class RunChanged(_E, frozen=True, tag="run.changed"):
    """Run-level fields of a steps.json changed (or first sight)."""

    run: str
    branch: str | None = None
    kind: str | None = None
    failures: int = 0
    last_failure_at: str | None = None
    work_complete: bool = False
    continue_from: str | None = None
    error: str = ""
    source: str = ""      # the steps source that reported the run
    gone: bool = False    # the steps.json is no longer seen (its source did not fail)
    board: str | None = None  # steps.json's top-level `board` (cross-run rules: quota, duplicates)

    @property
    def subject(self) -> str:
        return f"run:{self.run}"


class StepChanged(_E, frozen=True, tag="step.changed"):
    run: str
    step: str
    from_: str | None = field(name="from", default=None)
    to: str = ""
    at: str | None = None
    data: dict[str, Any] = {}
    reason: str = ""
    attempt: int = 0      # the step's attempt number after this change (1 = first)

    @property
    def subject(self) -> str:
        return f"run:{self.run}"


class RuleViolated(_E, frozen=True, tag="rule.violated"):
    run: str
    rule: str
    detail: str = ""
    step: str | None = None
    key: str = ""         # the occurrence (e.g. "no-redo:apply#2"): reported once per key

    @property
    def subject(self) -> str:
        return f"run:{self.run}"


class StepOverdue(_E, frozen=True, tag="step.overdue"):
    run: str
    step: str
    since: str | None = None
    deadline_s: float = 0
    attempt: int = 0      # which begin of the step was overdue (reported once per begin)

    @property
    def subject(self) -> str:
        return f"run:{self.run}"


class RunAbandoned(_E, frozen=True, tag="run.abandoned"):
    run: str
    failures: int = 0

    @property
    def subject(self) -> str:
        return f"run:{self.run}"


# ---- fleet fan-out (missions and swarms: events/types_missions.py) ----------------------------
class FleetFanout(_E, frozen=True, tag="fleet.fanout"):
    """More than ``[classify] fanout_max`` agents first seen within ``window`` seconds."""

    count: int
    window: float = 60.0
    agents: list[str] = []   # the first few new agents (ids)
    upto: int = 0            # first sights counted up to this one (the next episode starts after it)

    @property
    def subject(self) -> str:
        return "fleet"


# ---- sources -------------------------------------------------------------------------------
class SourceFailed(_E, frozen=True, tag="source.failed"):
    source: str
    error: str = ""
    error_class: str = ""       # typed cause (timeout, too-large, exit-status, root-missing, ...)
    exit_code: int | None = None  # a command's exit status; never the child's stderr

    @property
    def subject(self) -> str:
        return f"source:{self.source}"


class SourceRecovered(_E, frozen=True, tag="source.recovered"):
    source: str
    error: str = ""  # the error that cleared

    @property
    def subject(self) -> str:
        return f"source:{self.source}"


# ---- notifications -------------------------------------------------------------------------
class NoticeSent(_E, frozen=True, tag="notice.sent"):
    notice: str
    covers: list[int] = []
    attempt: int = 1
    title: str = ""
    severity: str = ""
    keys: list[str] = []

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class NoticeFailed(_E, frozen=True, tag="notice.failed"):
    notice: str
    covers: list[int] = []
    attempt: int = 1
    error: str = ""
    retry_at: str | None = None
    keys: list[str] = []  # the notify projection's condition ids (``cid@rev``) this notice covers

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class NoticeAbandoned(_E, frozen=True, tag="notice.abandoned"):
    notice: str
    covers: list[int] = []
    attempt: int = 1
    error: str = ""
    keys: list[str] = []

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class NoticeSilenced(_E, frozen=True, tag="notice.silenced"):
    """A notice that matched a silence: recorded, not sent."""

    notice: str
    covers: list[int] = []
    silence: str = ""
    keys: list[str] = []

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class NoticeAcked(_E, frozen=True, tag="notice.acked"):
    """A person acknowledged a pushed condition (from the phone page or `fleetwatch ack`): it is
    not repeated and does not escalate; ``until`` (empty = until it clears) makes it a snooze."""

    notice: str
    conditions: list[str] = []   # the notify projection's condition ids
    via: str = "cli"             # web | cli
    until: str = ""
    by: str = ""                 # who: the unix user (cli), "phone" (web)

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class NoticeEscalated(_E, frozen=True, tag="notice.escalated"):
    """An urgent condition nobody acked or cleared within ``after`` seconds was pushed again
    (once per condition) to the escalation URLs; ``delivered`` False: given up after retries."""

    notice: str
    conditions: list[str] = []
    after: float = 0.0
    covers: list[int] = []
    attempt: int = 1
    delivered: bool = True

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class NoticeHeld(_E, frozen=True, tag="notice.held"):
    """Conditions held back (``reason`` "quiet": quiet hours) until ``until``; sent then as one
    summary."""

    notice: str
    keys: list[str] = []
    covers: list[int] = []
    reason: str = "quiet"
    until: str = ""

    @property
    def subject(self) -> str:
        return f"notice:{self.notice}"


class SilenceAdded(_E, frozen=True, tag="silence.added"):
    silence: str
    subject_match: str | None = None
    class_match: str | None = None
    until: str = ""
    reason: str = ""

    @property
    def subject(self) -> str:
        return f"silence:{self.silence}"


class SilenceRemoved(_E, frozen=True, tag="silence.removed"):
    silence: str

    @property
    def subject(self) -> str:
        return f"silence:{self.silence}"


# ---- watcher -------------------------------------------------------------------------------
class WatcherStarted(_E, frozen=True, tag="watcher.started"):
    version: str
    pid: int

    @property
    def subject(self) -> str:
        return "watcher"


class WatcherStopped(_E, frozen=True, tag="watcher.stopped"):
    version: str
    pid: int
    reason: str = ""

    @property
    def subject(self) -> str:
        return "watcher"


Event = Union[
    AgentClassified, AgentUpdated, AgentNudged,
    DodVerdict, DodContractChanged, DodFlagged, DodCheckStarted,
    RunChanged, StepChanged, RuleViolated, StepOverdue, RunAbandoned,
    WpChanged, CircuitChanged, MissionCompleted, SwarmChanged,
    WpViolated, WpFlagged, SwarmCapped, FleetFanout,
    SourceFailed, SourceRecovered,
    NoticeSent, NoticeFailed, NoticeAbandoned, NoticeSilenced, SilenceAdded, SilenceRemoved,
    NoticeAcked, NoticeEscalated, NoticeHeld,
    WatcherStarted, WatcherStopped, HostSilent, HostResumed, HostEvent, HostGap, HostRefused, HubConsumerTaken,
    AgentLaunched, PlanRecorded, PlanStopped, DodActed,
]

EVENT_TYPES: dict[str, type[_E]] = {t.__struct_config__.tag: t for t in Event.__args__}  # type: ignore[attr-defined]
_TAGS: dict[type, str] = {t: tag for tag, t in EVENT_TYPES.items()}  # the Struct config is rebuilt per look-up


class Unknown(Struct, frozen=True):
    """An event of a type this version does not know (written by a newer fleetwatch)."""

    type: str
    raw: dict[str, Any]

    @property
    def subject(self) -> str:
        return ""


def tag_of(event: _E) -> str:
    return _TAGS.get(type(event)) or cast(str, type(event).__struct_config__.tag)


_encoder = msgspec.json.Encoder()
_decoders: dict[str, msgspec.json.Decoder[Any]] = {}  # per type on its first decode (not all at import: every start would pay)
_any = msgspec.json.Decoder()


def encode_data(event: _E) -> bytes:
    """The stored ``data`` bytes: the Struct's fields as JSON, without the type tag."""
    return _encoder.encode(event)


def decode_data(type_: str, data: bytes | str) -> _E | Unknown:
    dec = _decoders.get(type_)
    if dec is None:
        if type_ not in EVENT_TYPES:
            return Unknown(type=type_, raw=_any.decode(data))
        dec = _decoders[type_] = msgspec.json.Decoder(EVENT_TYPES[type_])
    return dec.decode(data)


def data_dict(data: bytes | str) -> dict[str, Any]:
    """The ``data`` column as a plain dict without the tag (as `tail --json` prints it)."""
    d = _any.decode(data)
    d.pop("type", None)
    return d
