"""What the board's keys do outside the screen: jump to an agent's tmux window, record a silence
or a verdict. Appends go through SQLite's own locking (as `silence` / `verdict` do), so they work
while `fleetwatch run` holds the log. Every failure is a returned message, never an exception
into the UI; messages are escaped by the caller.
"""
from __future__ import annotations

import glob
import os
import subprocess
import time
import uuid
from collections.abc import Mapping
from typing import NamedTuple

TMUX_TIMEOUT = 5.0
VERDICTS = ("met", "failed", "unevaluable")


class Outcome(NamedTuple):
    ok: bool
    message: str


def tmux_base(socket: str | None) -> list[str]:
    return ["tmux"] + (["-L", socket] if socket else [])


def exact_target(target: str) -> str:
    """``fleet:3`` -> ``=fleet:3``: the session name matched exactly (no prefix match of
    ``fleet`` against ``fleet-old``)."""
    return target if target.startswith("=") or ":" not in target else "=" + target


def same_server(socket: str | None, tmux_env: str | None) -> bool:
    """Whether the client running the board ($TMUX) is on the agents' tmux server (-L SOCKET)."""
    if not tmux_env:
        return False
    path = tmux_env.split(",", 1)[0]
    return os.path.basename(path) == (socket or "default")


def jump(target: str | None, socket: str | None, env: Mapping[str, str] | None = None) -> Outcome:
    """Show the agent's window: ``switch-client`` when the board runs in a client of that server,
    else ``select-window`` (attaching then lands there) and say how to attach."""
    if not target:
        return Outcome(False, "no tmux target known for this agent (set `target` in its goal.json)")
    environ = os.environ if env is None else env
    t = exact_target(target)
    inside = same_server(socket, environ.get("TMUX"))
    out = _tmux(tmux_base(socket) + ["switch-client", "-t", t]) if inside else None
    if out is not None and out.ok:
        return Outcome(True, f"switched to {target}")
    sel = _tmux(tmux_base(socket) + ["select-window", "-t", t])  # no client to switch: select it
    if not sel.ok:
        return sel
    sock = f" -L {socket}" if socket else ""
    return Outcome(True, f"selected {target}; attach with: tmux{sock} attach -t {target.split(':')[0]}")


def _tmux(argv: list[str]) -> Outcome:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=TMUX_TIMEOUT,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return Outcome(False, "tmux is not installed")
    except subprocess.TimeoutExpired:
        return Outcome(False, f"tmux did not answer within {TMUX_TIMEOUT:.0f}s")
    if r.returncode != 0:
        return Outcome(False, f"tmux: {(r.stderr or r.stdout).strip()[:200] or 'exit ' + str(r.returncode)}")
    return Outcome(True, "")


def _append(db: str, events: list, durability: str) -> int:
    from events.log import EventLog

    elog = EventLog(db, durability=durability, create=False)
    try:
        return elog.append(events, time.time())[0]
    finally:
        elog.close()


def silence(db: str, agent: str, seconds: float, reason: str = "from the board",
            durability: str = "normal") -> Outcome:
    from events.errors import FleetwatchError
    from events.timefmt import iso
    from events.types import SilenceAdded

    if not seconds > 0:
        return Outcome(False, "a silence needs a duration longer than 0")
    sid = uuid.uuid4().hex[:8]
    # glob-escaped (silences match by glob): an agent id holding * ? [ silences only itself
    ev = SilenceAdded(silence=sid, subject_match=glob.escape(f"agent:{agent}"), class_match=None,
                      until=iso(time.time() + seconds), reason=reason[:200])
    try:
        _append(db, [ev], durability)
    except FleetwatchError as e:
        return Outcome(False, str(e))
    return Outcome(True, f"silence {sid}: agent:{agent} muted until {ev.until} (fleetwatch unsilence {sid})")


def verdict(db: str, agent: str, value: str, verifier: str, evidence: str,
            durability: str = "normal") -> Outcome:
    """Record a verifier's verdict; refused (nothing written) for a self-approval by identity,
    an empty verifier or evidence, or an unknown verdict."""
    from events.errors import FleetwatchError
    from events.types import DodVerdict
    from projections.identity import blank, same_identity

    v = value.strip().lower()
    if v not in VERDICTS:
        return Outcome(False, f"verdict must be one of {', '.join(VERDICTS)}")
    if blank(verifier):
        return Outcome(False, "refused: the verifier id is empty")
    if same_identity(agent, verifier):
        return Outcome(False, "refused: verifier is the agent (no self-approval)")
    if not evidence.strip():
        return Outcome(False, "refused: say what was checked (evidence)")
    ev = DodVerdict(agent=agent, verdict=v, verifier=verifier.strip(), evidence=evidence.strip()[:2000],
                    source="board")
    try:
        seq = _append(db, [ev], durability)
    except FleetwatchError as e:
        return Outcome(False, str(e))
    return Outcome(True, f"recorded dod.verdict {v} by {verifier.strip()} (seq {seq})")
