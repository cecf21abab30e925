"""The board's only input: the event log, followed (no source polling).

``Feed.poll()`` folds every event committed since the last call into the same projections the
watcher keeps (``Projections.load``: snapshots + tail, then one ``read`` per poll) and keeps the
last events for the event pane. It never creates the log: until it exists, ``poll`` returns 0
and ``note`` says so. One ``EventLog`` connection, used from one thread (the app's).

Invariants: a poll reads at most ``BATCH`` events (the UI stays responsive through a long
backlog; the next poll continues); what is shown is ``views.status_doc`` over the folded states,
so the board agrees with `status` at the same head.
"""
from __future__ import annotations

import os
from collections import deque
from typing import Any

from projections.present import views

BATCH = 5000
RECENT = 200


class Feed:
    def __init__(self, db_path: str, *, durability: str = "normal", max_concurrent: int = 0,
                 max_children: int = 0) -> None:
        self.path = db_path
        self.durability = durability
        self.limits = {"max_concurrent": max_concurrent, "max_children": max_children}
        self.log: Any = None
        self.proj: Any = None
        self.recent: deque[Any] = deque(maxlen=RECENT)
        self.note = ""

    @property
    def seq(self) -> int:
        return self.proj.seq if self.proj is not None else 0

    def _open(self) -> bool:
        from events.log import EventLog
        from watcher.runtime.state import Projections

        from events.errors import FleetwatchError

        if not os.path.exists(self.path):
            self.note = f"no event log yet at {self.path} (start `fleetwatch run`)"
            return False
        try:
            log = EventLog(self.path, durability=self.durability, create=False)
        except FleetwatchError as e:  # not a log (yet): said in the header, tried again next poll
            self.note = str(e)
            return False
        self.log = log
        self.proj = Projections.load(self.log)
        self.recent.extend(self.log.last(50))
        self.note = ""
        return True

    def poll(self) -> int:
        """Fold what was committed since the last poll; how many events."""
        import apsw

        from events.errors import FleetwatchError

        if self.log is not None:
            try:  # the file at the path is still the one followed (a log deleted or replaced: the
                self.log.check_identity()  # restarted watcher's new log is shown, not the old one forever)
            except FleetwatchError:
                self.close()
                self.proj = None
                self.recent.clear()
        if self.log is None and not self._open():
            return 0
        n = 0
        try:
            for rec in self.log.read(self.proj.seq, limit=BATCH):
                self.proj.fold(rec)
                self.recent.append(rec)
                n += 1
        except (FleetwatchError, apsw.Error) as e:  # said in the header; the board keeps what it has
            self.note = f"cannot read the log: {e}"
        else:
            self.note = ""
        return n

    def doc(self, now: float) -> dict[str, Any]:
        """The `status --json` document at the folded head (empty before the log exists)."""
        from watcher.runtime.state import Projections

        from events.lock import writer_running

        states = self.proj.states if self.proj is not None else Projections().states
        doc = views.status_doc(states, self.seq, now, **self.limits)
        running, pid = writer_running(self.path) if self.log is not None else (None, None)
        doc["watcher"] = {"running": running, "pid": pid}  # as `status --json` (False: nobody watches)
        from watcher.hub.health import view

        hub = view(self.path, now)  # a hub's log: the hub's health in the header, as `status` has it
        if hub is not None:
            from projections.present.hub import mark_stale

            doc["hub"] = hub
            mark_stale(doc["agents"], hub)
        return doc

    def known_agents(self) -> dict[str, Any]:
        if self.proj is None:
            return {}
        return (self.proj.states.get("fleet") or {}).get("agents", {})

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None
