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

No signal is lost to a full pipe. CPython drops the byte of a signal when the pipe is full (64 KiB
unread: a relay held up in an action while signals flood in), and that SIGTERM would then never
stop the watcher. So the Python-level handler, which runs later in the main thread, marks its
signal pending (a plain store: no lock) and writes a byte 0 (non-blocking; dropped too when the
pipe is full, which then has bytes the relay will read anyway). After each read the relay runs
the action of a pending signal whose own byte it has not seen since the signal was last marked
(``_seen``): a dropped byte costs a delay, never the action; a byte that came costs nothing more.
``tests/watcher/runtime/test_signal_handler_takes_no_lock.py`` fills the pipe for real and sends SIGTERM into it.
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
        self._pending = dict.fromkeys(self.actions, False)   # set by the handler (main thread)
        self._seen = dict.fromkeys(self.actions, False)      # the relay read this signal's byte
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        self._old = {s: signal.signal(s, self._mark) for s in self.actions}
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
                if signum in self._seen:
                    self._seen[signum] = True
                    self._run(signum)
            for signum, marked in self._pending.items():
                if marked:
                    self._pending[signum] = False
                    if self._seen[signum]:
                        self._seen[signum] = False
                    else:   # its byte was dropped (a full pipe): run it now
                        self._run(signum)

    def _run(self, signum: int) -> None:
        try:
            self.actions[signum]()
        except Exception:  # one failed action must not end the relay: the next SIGTERM still stops
            log.exception("signal %d: its action failed", signum)

    def _mark(self, signum: int, frame: object) -> None:
        """The Python-level handler (main thread): takes no lock. Marks the signal pending and
        wakes the relay to look (byte 0, no signal's), in case the signal's own byte was dropped."""
        self._pending[signum] = True
        try:
            os.write(self._w, b"\0")
        except OSError:   # full (the relay has bytes to read: it looks then) or closed
            pass

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

