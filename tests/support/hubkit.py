"""The hub's test kit: a hub in a thread over a real nats-server, the configs of a hub and of a
forwarder, the hub log's ids (tests/test_hub*.py, the drills; the ``nats_server`` fixture is in
tests/conftest.py)."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import apsw
import pytest

from events.log import EventLog
from events.types import AgentClassified
from tests.support.natsserver import MISSING, binary
from watcher.config import parse
from watcher.hub.hub import Hub

T0 = 1_800_000_000.0
needs_nats = pytest.mark.skipif(binary() is None, reason=MISSING)


def until(pred, timeout: float = 30.0, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def classified(agent: str, to: str, frm: str | None = None) -> AgentClassified:
    return AgentClassified(agent=agent, from_=frm, to=to, state="waiting" if to == "RECLAMA" else "busy",
                           phase="haciendo", reason="r", source="fleet")


class HubThread:
    """The hub's asyncio loop in a thread that owns the hub's EventLog (one connection, one thread)."""

    def __init__(self, cfg, db: str):
        self.stop = threading.Event()
        self.hub: Hub | None = None
        self.ready = threading.Event()
        self.error: BaseException | None = None

        def main():
            elog = EventLog(db, durability="normal")
            try:
                self.hub = Hub(cfg, elog)
                self.ready.set()
                asyncio.run(self.hub.run(self.stop))
            except BaseException as e:  # surfaced by close()
                self.error = e
            finally:
                elog.close()

        self.t = threading.Thread(target=main, daemon=True)
        self.t.start()
        self.ready.wait(10)

    def close(self):
        self.stop.set()
        self.t.join(15)
        assert self.error is None, self.error


def hub_cfg(tmp_path: Path, url: str, **kw) -> object:
    kw.setdefault("ack_wait", "2s")
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in kw.items())
    return parse(f'[store]\npath = "{tmp_path}/hub.db"\ndurability = "normal"\n'
                 f'[hub]\nnats = "{url}"\n{extra}')


def fwd_cfg(url: str, host: str, batch: int = 100):
    return parse(f'[forward]\nnats = "{url}"\nhost = "{host}"\nbatch = {batch}\nheartbeat = "1s"\n').forward


def hub_rows(db: str) -> dict[str, int]:
    """hub event id -> count (every id should be there once)."""
    with apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY) as c:
        return dict(c.execute("SELECT id, count(*) FROM events GROUP BY id").fetchall())
