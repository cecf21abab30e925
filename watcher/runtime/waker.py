"""inotify wake-ups for the watch loop (``fleetwatch run``): :class:`Waker`."""
from __future__ import annotations

import errno
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from projections.text import safe

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

log = logging.getLogger("fleetwatch.watcher")
LIMITS = (errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.ENOMEM)  # inotify's limits (watches, instances)


class Waker:
    """inotify wake-ups through watchdog, debounced, without feedback at any fleet size.

    - An event filter passed to watchdog (so to the kernel's watch mask): close-after-write,
      create, move and delete only. Without it watchdog asks for IN_OPEN and IN_CLOSE_NOWRITE
      too, so the watcher's own reads (and watchdog's directory walks) fill the kernel queue
      (``max_queued_events``, 16,384), which overflows, which makes watchdog walk again: a core
      busy on an idle big fleet.
    - A queue overflow (events were lost) means "look everywhere once": the next ``take()``
      returns None and the loop is woken; a burst of overflows within one debounce is one
      resync. watchdog re-adds its recursive watches itself and reports the overflow only in
      its log, so a handler on its logger is the signal.
    - While inotify is healthy (``take()`` gives a set), the loop stats every file only every
      ``watch.resync`` (the safety net); the ticks in between look at the reported paths.

    - A rename's IN_MOVED_FROM never holds the events behind it once its IN_MOVED_TO has come
      (:func:`prompt_moves`): watchdog's queue slept the whole 0.5 s pairing delay whenever it
      saw the first half before the second was queued, and every event behind it waited.

    - A root that is not there at the start, comes back, or is replaced (``rm -rf`` and
      ``mkdir``, a new tree moved into place: the old watch follows the old folder or ends)
      is watched again by :meth:`rearm`, which a thread of its own calls every ``REARM_S``
      (a ``stat`` per root); the tick it wakes looks everywhere once.

    It also collects the paths it was told about (both ends of a move) for partial ticks:
    ``take()`` hands them over and starts a new set; None means "look everywhere" (no inotify,
    an overflow, or more than ``MAX_PATHS`` paths since the last take)."""

    MAX_PATHS = 4096
    REARM_S = 1.0   # s between two looks at the roots (a stat each) by the re-arming thread
    RETRY_S = 60.0  # s before a folder inotify could not watch (its limits) is tried again
    OVERFLOW_LOGGER = "watchdog.observers.inotify_c"

    def __init__(self, roots: list[str], debounce: float, *, start: bool = True):
        self.event = threading.Event()
        self.debounce = debounce
        self.observer: BaseObserver | None = None   # None: polling (no watchdog, or stopped)
        self.overflows = 0
        self._lock = threading.Lock()
        self._paths: set[str] | None = set()
        self._overflow: logging.Handler | None = None
        self._roots = roots
        self._want: list[str] = []           # the roots asked for (watched once there)
        self._armed: dict[str, tuple[Any, tuple[int, int]]] = {}  # root -> (its watch, (dev, ino) watched)
        self._lost: set[str] = set()         # roots whose watch watchdog ended (deleted)
        self._failed: dict[str, tuple[tuple[int, int], float]] = {}  # root -> (key, when) it could not be watched
        self._blind = False                  # a root there is not watched: take() says "everywhere"
        self._why = ""
        self._handler: Any = None
        self._filter: list[Any] = []
        self._arm_lock = threading.Lock()
        self._closed = threading.Event()
        self._rearmer: threading.Thread | None = None
        if start:
            self.start(late=False)

    def start(self, late: bool = True) -> None:
        """Watch the roots (once). watchdog adds one watch per folder, walking each root:
        ~0.4-0.5 s at 10,000 agents, so ``run`` starts it after its first tick rather than
        before (``late``). What changed between that tick's reads and the watches is not lost:
        the first ``take()`` after a late start says "look everywhere" (None). A root that is
        not there yet is watched once it is (:meth:`rearm`)."""
        roots, self._roots = sorted(set(self._roots)), []
        if not roots:
            return
        try:
            from watchdog.events import (DirCreatedEvent, DirDeletedEvent, DirMovedEvent, FileClosedEvent,
                                         FileCreatedEvent, FileDeletedEvent, FileMovedEvent, FileSystemEventHandler)
            from watchdog.observers import Observer
        except ImportError:  # no watchdog: polling every interval, said once
            log.warning("inotify unavailable (watchdog not installed); polling every interval")
            return
        prompt_moves()
        self._filter = [FileClosedEvent, FileCreatedEvent, FileMovedEvent, FileDeletedEvent,
                        DirCreatedEvent, DirDeletedEvent, DirMovedEvent]
        ev = self.event
        note = self.note
        lost = self._lost

        class H(FileSystemEventHandler):
            def __init__(self, root: str):
                self.root = root

            def on_any_event(self, e):  # noqa: N802
                if e.event_type == "deleted" and os.fsdecode(e.src_path) == self.root:
                    lost.add(self.root)  # watchdog ends this root's watch (IN_DELETE_SELF): arm it anew
                note(e.src_path, getattr(e, "dest_path", "") or None)
                ev.set()

        self._handler = H
        self._watch_overflows()
        try:
            obs = Observer()
            obs.daemon = True
            obs.start()
            self.observer = obs
            self._want = roots
            if not self.rearm(first=True) and self._failed:
                raise OSError(self._why)  # inotify's limits: not one root could be watched: polling
            for r in self._failed:  # some could: the others are looked at on every tick
                log.warning("inotify cannot watch %s (%s): its files are looked at on every tick", safe(r), self._why)
            if late:
                with self._lock:
                    self._paths = None  # the first take: look everywhere (see start)
            self._rearmer = threading.Thread(target=self._rearm_loop, name="inotify-rearm", daemon=True)
            self._rearmer.start()
        except Exception as e:  # inotify limits: fall back to polling, say so once
            log.warning("inotify unavailable (%s); polling every interval", self._why or type(e).__name__)
            self._stop_observer()
            self._want = []
            self._unwatch_overflows()

    def rearm(self, first: bool = False) -> bool:
        """Watch again each root that came back, was replaced (another folder at its path: a
        ``rm -rf`` and ``mkdir``, a ``mv`` of a new tree into place) or whose watch watchdog ended
        (the root deleted); a root gone stays unwatched until it is back. One ``stat`` per root:
        the thread ``start`` starts calls it every ``REARM_S``. A root armed anew makes the next ``take()`` None (look
        everywhere once: what changed before its watch is not lost). A root that exists but
        cannot be watched (inotify's limits) keeps ``take()`` None, so nothing in it waits for
        the resync. True if any root was armed."""
        with self._arm_lock:
            return self._rearm(first)

    def _rearm_loop(self) -> None:
        while not self._closed.wait(self.REARM_S):
            try:
                self.rearm()
            except Exception:  # never the end of the watches: the next look tries again
                log.exception("inotify: could not re-arm the watches")

    def _rearm(self, first: bool) -> bool:
        if self.observer is None:
            return False
        armed = False
        blind = False
        now = time.monotonic()
        for root in self._want:
            try:
                st = os.stat(root)
            except OSError:
                continue  # gone (its source says so); armed again when it is back
            key = (st.st_dev, st.st_ino)
            have = self._armed.get(root)
            if have is not None and have[1] == key and root not in self._lost:
                continue
            failed = self._failed.get(root)
            if failed is not None and failed[0] == key and now - failed[1] < self.RETRY_S:
                blind = True  # the same folder could not be watched a moment ago: not every second
                continue
            self._lost.discard(root)
            if have is not None:
                self._armed.pop(root)
                try:
                    self.observer.unschedule(have[0])
                except Exception:
                    pass
            try:
                watch = self.observer.schedule(self._handler(root), root, recursive=True, event_filter=self._filter)
            except Exception as e:  # inotify's limits, or the folder changing under watchdog's walk
                if not os.path.isdir(root):
                    continue  # it went meanwhile: armed when it is back
                blind = True  # until it is watched, every tick looks at all of it
                if isinstance(e, OSError) and e.errno in LIMITS:
                    self._why = e.strerror or type(e).__name__
                    if failed is None and not first:
                        log.warning("inotify cannot watch %s (%s): its files are looked at on every tick",
                                    safe(root), self._why)
                    self._failed[root] = (key, now)
                continue  # anything else (a folder deleted mid-walk): tried again at the next look
            if not first:
                log.info("inotify: watching %s %s", safe(root),
                         "now" if failed is not None else "again (it came back or was replaced)")
            self._failed.pop(root, None)
            self._armed[root] = (watch, key)
            armed = True
        if blind and not self._blind:
            self.event.set()  # a root not watched: the next tick looks everywhere
        self._blind = blind
        if armed and not first:
            with self._lock:
                self._paths = None
            self.event.set()
        return armed

    def _watch_overflows(self) -> None:
        waker = self

        class Overflow(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if str(record.msg).startswith("Inotify queue overflowed"):
                    waker.overflowed()

        wlog = logging.getLogger(self.OVERFLOW_LOGGER)
        if not wlog.isEnabledFor(logging.WARNING):
            wlog.setLevel(logging.WARNING)
        self._overflow = Overflow(logging.WARNING)
        wlog.addHandler(self._overflow)

    def _unwatch_overflows(self) -> None:
        if self._overflow is not None:
            logging.getLogger(self.OVERFLOW_LOGGER).removeHandler(self._overflow)
            self._overflow = None

    def overflowed(self) -> None:
        """The kernel dropped events: the next tick looks everywhere (once)."""
        with self._lock:
            if self._paths is not None:
                self.overflows += 1
                log.warning("inotify queue overflowed: one full resync")
            self._paths = None
        self.event.set()

    @property
    def healthy(self) -> bool:
        """inotify runs and has not lost events since the last take."""
        return self.observer is not None and self._paths is not None and not self._blind

    def note(self, *paths: Any) -> None:
        """Remember paths for the next partial tick (bytes paths are decoded as the OS does)."""
        with self._lock:
            if self._paths is None:
                return
            for p in paths:
                if p:
                    self._paths.add(os.fsdecode(p))
            if len(self._paths) > self.MAX_PATHS:
                self._paths = None

    def take(self) -> set[str] | None:
        """The paths noted since the last take (None: too many, an overflow, or no inotify:
        look everywhere)."""
        with self._lock:
            paths, self._paths = self._paths, set()
        return paths if self.observer is not None and not self._blind else None

    def wait(self, timeout: float, during: Any = None) -> bool:
        """Sleep up to ``timeout`` s; True if a file event woke us (after the debounce).
        ``during()`` (optional) runs at the start of the debounce, which waits only what is
        left of it afterwards."""
        if timeout > 0 and self.event.wait(timeout):
            t = time.monotonic()
            if during is not None:
                during()
            left = self.debounce - (time.monotonic() - t)
            if left > 0:
                time.sleep(left)
            self.event.clear()
            return True
        return False

    def close(self) -> None:
        self._unwatch_overflows()
        self._stop_observer()

    def _stop_observer(self) -> None:
        self._closed.set()
        if self._rearmer is not None and self._rearmer is not threading.current_thread():
            self._rearmer.join(timeout=2)
        with self._arm_lock:
            obs, self.observer = self.observer, None
            self._armed.clear()
        if obs is not None:
            obs.stop()
            obs.join(timeout=2)


# watchdog's modules that queue inotify events through DelayedQueue (7.x; 4.x-6.x)
_MOVE_QUEUE_MODULES = ("watchdog.observers.inotify_move_event_grouper", "watchdog.observers.inotify_buffer")


def prompt_moves() -> bool:
    """Make watchdog's inotify queue stop holding events behind a rename that is already paired.

    watchdog holds each IN_MOVED_FROM up to 0.5 s for its IN_MOVED_TO (to report one move event)
    in a ``DelayedQueue``. Its ``get`` looks at the head and, if that is a delayed IN_MOVED_FROM,
    sleeps until the delay is over; when the IN_MOVED_TO comes meanwhile, the pair is taken out
    and queued again, but ``get`` sleeps on, and every event behind waits. That happens whenever
    the reading thread sees the first half of a rename before the inotify thread has queued the
    second: in a busy fleet's churn a few times a minute, each a half-second gap in which no event
    reached the Waker (docs/bench.md).

    Here the module's ``DelayedQueue`` is replaced by a subclass whose ``get`` waits on the
    queue's own condition (woken by every ``put`` and ``remove``) and looks at the head again: a
    delayed head still waits out its delay (an unpaired IN_MOVED_FROM is still a delete after
    0.5 s), events keep their order, a paired one no longer holds the queue. Groupers made
    after this call use it (the Waker calls it before its Observer). True if a module was
    patched (or already was); False where watchdog is absent or its queue looks different
    (then nothing changes)."""
    import importlib

    done = False
    for name in _MOVE_QUEUE_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        base = getattr(mod, "DelayedQueue", None)
        if base is None:
            continue
        if getattr(base, "_fleetwatch_prompt", False):
            done = True
            continue
        try:
            probe = base(0.5)
            usable = all(hasattr(probe, a) for a in ("_not_empty", "_queue", "_closed", "delay"))
        except Exception:
            usable = False
        if usable:
            mod.DelayedQueue = _prompt_queue(base)  # type: ignore[attr-defined]  # patching a module found by name
            done = True
    return done


def _prompt_queue(base: type) -> type:
    class PromptDelayedQueue(base):  # type: ignore[misc, valid-type]
        """watchdog's DelayedQueue whose ``get`` is woken when its delayed head is taken out."""

        _fleetwatch_prompt = True

        def get(self):  # noqa: ANN201
            with self._not_empty:
                while True:
                    while not self._queue and not self._closed:
                        self._not_empty.wait()
                    if self._closed:
                        return None
                    head, insert_time, delay = self._queue[0]
                    left = insert_time + self.delay - time.monotonic() if delay else 0.0
                    if left <= 0:
                        self._queue.popleft()
                        return head
                    self._not_empty.wait(left)   # its pair (a put), a remove or close: look again

        def remove(self, predicate):  # noqa: ANN001, ANN201
            found = super().remove(predicate)
            if found is not None:
                with self._not_empty:
                    self._not_empty.notify()
            return found

    PromptDelayedQueue.__name__ = PromptDelayedQueue.__qualname__ = f"Prompt{base.__name__}"
    return PromptDelayedQueue
