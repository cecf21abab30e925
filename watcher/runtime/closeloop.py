"""The closed loop's stages in the watcher, as one object the tick calls (watcher/runtime/loop.py):
the verifier (``[dod] verifier``), acting on verdicts (``[dod] on_met``/``on_failed``) and
following plans (``[launch] follow``). Each runs its slow work in its own worker thread; ``step``
only plans and harvests, in this order, and returns the events to commit."""
from __future__ import annotations

import logging
from typing import Any

from projections.plans import fold as plans

log = logging.getLogger("fleetwatch.closeloop")


class Closing:
    def __init__(self, cfg: Any, db_path: str, checker: Any = None) -> None:
        from watcher.runtime.actions import Actor
        from watcher.runtime.follow import Follower
        from watcher.runtime.verifier import Verifier

        self.verifier = Verifier.from_config(cfg, db_path)
        self.actor = Actor.from_config(cfg)
        self.follower = Follower.from_config(cfg, db_path)
        if checker is not None and self.verifier is not None:
            checker.defer = self.verifier.takes     # what needs judgement goes to the verifier instead

    def step(self, states: dict[str, Any], snap: Any, now: float) -> list[Any]:
        out: list[Any] = []
        for name, stage in (("verifier", self.verifier), ("actions", self.actor), ("follow", self.follower)):
            if stage is None:
                continue
            try:
                out += stage.step(states, snap, now)
            except Exception:   # a bug: logged, the tick goes on
                log.exception("%s stage failed on this tick", name)
        return out

    def amend(self, states: dict[str, Any], events: list[Any]) -> list[Any]:
        st = states.get("plans")
        return plans.amend(st, events) if st is not None else events

    def marks(self) -> dict[str, tuple[float, float]]:
        return self.actor.marks() if self.actor is not None else {}

    def close(self, timeout: float = 1.0) -> None:
        for stage in (self.verifier, self.actor, self.follower):
            if stage is not None:
                stage.close(timeout)
