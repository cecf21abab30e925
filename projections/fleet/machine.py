"""The termination machine (pure): an agent's observation and the clock give its class and the
reason. One rule per class (``RULES``), tried in the class table's order (``classes.MATCH``):
the first that answers wins (the contract's "first matching row"). Adding a class is a row of
``projections.classes.TABLE`` and its rule here.
"""
from typing import Any, cast

from projections.classes import MATCH, Cls
from projections.observations import AgentObs
from projections.text import age as fmt_age

STATES = ("busy", "idle", "waiting")
CLAUDE_GONE = "claude exited: no claude process left in its tmux pane"
PHASES = {"working": "haciendo", "testing": "testeando", "done": "hecho", "asking": "preguntando",
          "blocked": "bloqueado"}
AGEING = ("idle, no activity for ", "busy, silent for ")  # ESTANCADO's reasons: these + an age


def normalise_phase(phase: Any) -> Any:
    return PHASES.get(phase, phase) if isinstance(phase, str) else phase


def silence_limit(obs: AgentObs, busy_silence: float | None, busy_silence_tool: float | None) -> float | None:
    """How long a busy agent may stay silent (no hook event, no pane activity) before it is
    ESTANCADO: ``busy_silence``, or ``busy_silence_tool`` (if longer) while a tool call is open.
    None: no backstop."""
    if busy_silence is None:
        return None
    return max(busy_silence, busy_silence_tool) if obs.tool_open and busy_silence_tool is not None else busy_silence


# The termination machine's rules, one per class: each answers (class, reason) or None, and may
# assume every rule before it in ``classes.MATCH`` (the table's order) answered None.
def _closed(obs: AgentObs, now: float, stall_after: float, limit: float | None) -> tuple[Cls, str] | None:
    if obs.ended:
        return Cls.CERRADO, "session ended"
    if obs.pane_dead:
        st = "" if obs.pane_dead_status is None else f" (exit {obs.pane_dead_status})"
        return Cls.CERRADO, f"tmux pane dead{st}"
    if obs.claude_gone:
        return Cls.CERRADO, CLAUDE_GONE
    return None


def _mislaunched(obs: AgentObs, now: float, stall_after: float, limit: float | None) -> tuple[Cls, str] | None:
    if obs.error:
        return Cls.MAL_LANZADO, obs.error
    if obs.state not in STATES:
        return Cls.MAL_LANZADO, f"unknown state {str(obs.state)[:40]!r}"
    if not obs.contract_sha256:
        return Cls.MAL_LANZADO, "no dod_contract"
    return None


def _needs_human(obs: AgentObs, now: float, stall_after: float, limit: float | None) -> tuple[Cls, str] | None:
    if obs.state == "waiting":
        return Cls.RECLAMA, "waiting for the human"
    phase = normalise_phase(obs.phase)
    if phase in ("preguntando", "bloqueado"):
        return Cls.RECLAMA, f"phase {phase}"
    return None


def _claims_done(obs: AgentObs, now: float, stall_after: float, limit: float | None) -> tuple[Cls, str] | None:
    if obs.state == "idle" and normalise_phase(obs.phase) == "hecho":
        return Cls.DICE_TERMINADO, "idle, phase hecho: claims done"
    return None


def _stalled(obs: AgentObs, now: float, stall_after: float, limit: float | None) -> tuple[Cls, str] | None:
    la, idle = obs.last_activity, obs.state == "idle"
    bound = stall_after if idle else limit   # busy here: its silence backstop (None: none)
    if la is None or bound is None or not now - la >= bound:
        return None
    return Cls.ESTANCADO, f"{AGEING[0] if idle else AGEING[1]}{fmt_age(now - la)}"


def _working(obs: AgentObs, now: float, stall_after: float, limit: float | None) -> tuple[Cls, str] | None:
    if obs.state == "idle" and obs.stop_error:  # the last turn ended on an API error (hook StopFailure)
        return Cls.TRABAJANDO, f"idle after an API error: {obs.stop_error}"
    return Cls.TRABAJANDO, "idle within stall_after" if obs.state == "idle" else cast(str, obs.state)  # one of STATES here


RULES = {Cls.CERRADO: _closed, Cls.MAL_LANZADO: _mislaunched, Cls.RECLAMA: _needs_human,
         Cls.DICE_TERMINADO: _claims_done, Cls.ESTANCADO: _stalled, Cls.TRABAJANDO: _working}
_MACHINE = tuple(RULES[c] for c in MATCH)


def classify(obs: AgentObs | None, now: float, stall_after: float, busy_silence: float | None = None,
             busy_silence_tool: float | None = None) -> tuple[Cls, str]:
    """The termination machine of the contract (docs/contract.md): its rules (``RULES``) in the
    class table's order (``classes.MATCH``), the first that answers wins. With ``busy_silence``
    (``[classify] busy_silence``), a busy agent silent that long is ESTANCADO too: an aborted turn
    can fire no hook at all, and a background task may never end."""
    if obs is None:
        return Cls.CERRADO, "no longer seen by any source"
    limit = silence_limit(obs, busy_silence, busy_silence_tool)
    for rule in _MACHINE:
        got = rule(obs, now, stall_after, limit)
        if got is not None:
            return got
    raise AssertionError("the last rule of the machine answers every observation")
