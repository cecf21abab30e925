"""`doctor`'s look at what a hostile fleet can do to the watcher: the log's disk (full: nothing is
recorded), decisions waiting beside the log for the next start, how DoD checks are isolated
(watcher/runtime/isolated.py), and whether a hub's consumer is another hub's. Reads only; writes
nothing."""
from __future__ import annotations

import os
from typing import Any


def check_hostile(ck: Any, cfg: Any, db: str | None) -> None:
    check_hub_consumer(ck, cfg, db)
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
        elif iso.kind == "bwrap":
            ck.ok("checks: each runs in its own PID namespace (bwrap): it cannot see or signal the watcher, "
                  "and the log's folder is read-only to it")
        else:
            ck.ok(f"checks: each runs in its own PID namespace ({iso.kind}): it cannot see or signal the watcher; "
                  "the log's folder stays writable to it (with bubblewrap installed it is read-only)")


def check_hub_consumer(ck: Any, cfg: Any, db: str | None) -> None:
    """``[hub]``: the durable consumer this hub would use, and whether another hub owns it (that
    hub refuses it: watcher/hub/guard.py). Silent when NATS cannot be reached (check_nats says)."""
    if cfg.hub is None:
        return
    try:
        consumer, me, owner = _consumer_owner(cfg, db)
    except Exception:   # no client, no server, no stream: check_nats and check_extras say so
        return
    if owner.startswith("fleetwatch hub ") and owner != me:
        ck.bad(f"hub: consumer {consumer} belongs to another hub ({owner}): this hub does not consume from it",
               "give each hub its own [hub] consumer, or leave it unset (one per hub)")
    else:
        ck.ok(f"hub: consumer {consumer} is this hub's" + ("" if owner else " (created at its first connection)"))


def _consumer_owner(cfg: Any, db: str | None) -> tuple[str, str, str]:
    import asyncio

    from events.log import EventLog
    from watcher.config import db_path
    from watcher.hub import store, wire
    from watcher.hub.forwarder import connect
    from watcher.hub.guard import OWNER

    chain = ""
    path = db_path(cfg, db)
    if os.path.exists(path):
        with EventLog(path, create=False, readonly=True) as elog:
            chain = store.chain_id(elog.db)
    host = wire.host_name("")[:32]
    consumer = cfg.hub.consumer or f"fleetwatch-hub-{host}-{chain}"
    me = f"{OWNER}{host} log {chain}"

    async def look() -> str:
        from nats.js.errors import NotFoundError

        nc = await connect(cfg.hub.nats, cfg.hub.creds, "fleetwatch-doctor", timeout=3.0, once=True)
        try:
            info = await asyncio.wait_for(nc.jetstream().consumer_info(cfg.hub.stream, consumer), 3.0)
            return info.config.description or ""
        except NotFoundError:
            return ""
        finally:
            await nc.close()

    return consumer, me, asyncio.run(look())
