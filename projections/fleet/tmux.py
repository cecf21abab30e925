"""What the tmux source told the fleet, as the log recorded it (pure): a window gone, and the facts
an agent keeps while a tmux source has not answered yet."""
from __future__ import annotations

from typing import Any

import msgspec

from events.timefmt import parse_iso as _parse_iso
from projections.classes import Cls
from projections.observations import AgentObs


def tmux_gone(obs: AgentObs, old: dict[str, Any] | None) -> bool:
    """The agent's tmux window or session is gone: a tmux source found no window for the agent's
    own pane (``tmux_exact``: the pane its hook recorded, or its goal.json target) although the log
    records a window it was seen in (targets recorded by the tmux source are exact,
    ``=session:index``). A window matched by name alone closes nothing when it goes."""
    return obs.tmux_missing and obs.tmux_exact and old is not None and str(old.get("target") or "").startswith("=")


def recorded_tmux(obs: AgentObs, old: dict[str, Any] | None) -> AgentObs | None:
    """While a tmux source has not answered (``Snapshot.tmux_unknown``), an agent the log saw in
    tmux keeps what tmux said: None (no event) for a dead pane or a gone window, else ``obs`` with
    the recorded exact target and the later activity."""
    if old is None or not str(old.get("target") or "").startswith("="):
        return obs
    if old["class"] == Cls.CERRADO.value and str(old.get("reason") or "").startswith("tmux "):
        return None
    try:
        rec = _parse_iso(old["last_activity"])
    except (KeyError, ValueError, TypeError, AttributeError):
        return msgspec.structs.replace(obs, target=old["target"])
    la = obs.last_activity if obs.last_activity is not None and obs.last_activity > rec else rec
    return msgspec.structs.replace(obs, target=old["target"], last_activity=la)
