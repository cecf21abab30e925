"""Helpers for tests that wait on real processes and files."""
from __future__ import annotations

import time
from typing import Any, Callable


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


def tick_until(w, pred: Callable[[], Any], timeout: float = 60.0) -> None:
    """Tick the in-process watcher ``w`` on the real clock until ``pred()`` is truthy
    (AssertionError on timeout)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        w.tick(time.time())
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")
