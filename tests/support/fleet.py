"""Helpers for tests that drive a real watcher over real goal.json files."""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable


def write_goal(root: Any, agent: str, **fields: Any) -> None:
    """``root/agent/goal.json`` written atomically (temp file + rename), busy by default."""
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    doc = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": "c",
           "last_activity": time.time(), **fields}
    (d / "g.tmp").write_text(json.dumps(doc))
    os.replace(d / "g.tmp", d / "goal.json")


def tick_until(w: Any, pred: Callable[[], bool], timeout: float = 30.0) -> None:
    """Tick the watcher until ``pred()`` holds (generous timeout: a loaded machine is slow)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        w.tick(time.time())
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, step: float = 0.1) -> Any:
    """Poll ``pred()`` until it is truthy; its value (AssertionError on timeout)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    v = pred()
    if not v:
        raise AssertionError("timed out waiting")
    return v
