"""`doctor`'s look at what a hostile fleet can do to the watcher: the log's disk (full: nothing is
recorded), decisions waiting beside the log for the next start, and how DoD checks are isolated
(watcher/runtime/isolated.py). Reads only; writes nothing."""
from __future__ import annotations

from typing import Any


def check_hostile(ck: Any, cfg: Any, db: str | None) -> None:
    from watcher.config import db_path
    from watcher.runtime import spill

    path = db_path(cfg, db)
    free = spill.free_bytes(path)
    if free is not None and free < spill.LOW_FREE:
        ck.bad(f"log: the disk holding {path} is full ({free} bytes free): the watcher cannot record anything",
               "free space there (a DoD check's output? `du -sh` the agents' folders); decisions already made "
               "wait in memory and are appended then")
    waiting = spill.waiting(path)
    if waiting:
        ck.warn(f"log: {waiting} events (watcher.stopped, verdicts) wait in {spill.path_of(path)} for the next "
                "start: the last watcher stopped on a full disk", "free space and start the watcher")
    if cfg.dod.run_checks:
        from watcher.runtime.isolated import isolation

        iso = isolation(cfg.dod.check_isolation)
        if iso.kind == "none":
            ck.warn(f"checks: run without isolation ({iso.why}): a check can signal the watcher (a stop it causes "
                    "is caught at the next start)", "install bubblewrap (apt-get install bubblewrap) or allow "
                    "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)")
        else:
            ck.ok(f"checks: each runs in its own PID namespace ({iso.kind}): it cannot see or signal the watcher")
