"""Signals acted on outside the signal handler (`fleetwatch run`).

Why: a Python signal handler runs in the main thread between two bytecodes, wherever that thread
is. The watcher's handlers used to call ``threading.Event.set()`` (stop, reload, wake the loop);
``Event`` guards its flag with a non-reentrant lock that the main thread itself takes in
``wait``/``clear``/``set``. A SIGHUP or SIGTERM landing while the main thread held it made the
handler wait for a lock its own thread holds: the watcher froze for good (no tick, no watchdog
ping, no RELOADING=1; CI saw it once in `test_run_under_a_fake_manager`). Any handler that takes
a lock (logging, a queue, an Event) has that fault.

How: :class:`SignalRelay` installs a handler that does nothing and points
``signal.set_wakeup_fd`` at a pipe, so CPython's C-level handler writes the signal's number to it;
a daemon thread reads the pipe and runs each signal's action there. The action may take any lock:
when the main thread holds it, it is released in a moment, and the relay thread waits for it.

Invariants: the actions run in the relay thread, in the order the signals came, never in the main
thread; a signal that comes twice before the thread reads runs its action twice (actions are
idempotent: set a flag, wake the loop); an action that raises is logged and the relay goes on.
``close`` restores the handlers and the wakeup fd that were
there before and ends the thread. Only the main thread can make one (``signal``'s own rule).
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

log = logging.getLogger("fleetwatch.watcher")


class SignalRelay:
    """``actions``: signal number -> what to do when it comes (run in the relay thread)."""

    def __init__(self, actions: dict[int, Callable[[], None]]):
        self.actions = dict(actions)
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)  # the C handler must never block on a full pipe
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        self._old = {s: signal.signal(s, _noop) for s in self.actions}
        self._thread = threading.Thread(target=self._relay, name="signal-relay", daemon=True)
        self._thread.start()

    def _relay(self) -> None:
        while True:
            try:
                data = os.read(self._r, 512)
            except OSError:
                return
            if not data:  # close(): the write end is gone
                return
            for signum in data:
                act = self.actions.get(signum)
                if act is None:
                    continue
                try:
                    act()
                except Exception:  # one failed action must not end the relay: the next SIGTERM still stops
                    log.exception("signal %d: its action failed", signum)

    def close(self) -> None:
        """Restore the previous handlers and wakeup fd; end the relay thread."""
        for s, h in self._old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(self._old_fd)
        os.close(self._w)
        self._thread.join(1.0)
        os.close(self._r)

    def __enter__(self) -> SignalRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _noop(signum: int, frame: object) -> None:
    """The Python-level handler: the work is the relay thread's (a handler here must take no lock)."""
