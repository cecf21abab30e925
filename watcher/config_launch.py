"""``[launch]``: where ``fleetwatch launch`` writes goal.json and opens windows
(watcher/runtime/launcher.py); kept apart so watcher/config.py stays small. Imports nothing of
fleetwatch (watcher/config.py imports it)."""
# No `from __future__ import annotations`: msgspec would compile each string annotation at start
# (tests/watcher/cli/test_cli_start.py: a fast path compiles no source text)
import re

import msgspec

_TOKEN = r"^[A-Za-z0-9_-]{1,64}$"


class Launch(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    socket: str = "fleet"                      # tmux -L socket
    session: str = "fleet"
    goals_dir: str = "~/.fleet/agents"         # AGENT/goal.json under it (a goals source must read it)
    argv: list[str] = msgspec.field(default_factory=lambda: ["claude", "{prompt}"])
    follow: bool = False                       # the watcher launches a plan's next tasks when their deps are met


def check(cfg, bad) -> None:
    """``[launch]`` and the closed loop's ``[dod]`` keys; ``bad(key, msg)`` makes the error."""
    cfg.dur("dod.verifier_timeout")
    if not cfg.launch.argv or not cfg.launch.argv[0]:
        raise bad("launch.argv", "needs a program")
    for key in ("socket", "session"):
        if not re.match(_TOKEN, getattr(cfg.launch, key)):
            raise bad(f"launch.{key}", "letters, digits, - and _ only (1-64)")
    if isinstance(cfg.dod.on_met, list) and (not cfg.dod.on_met or not cfg.dod.on_met[0]):
        raise bad("dod.on_met", "an argv needs a program")
