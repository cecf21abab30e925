"""The tick loop: the only place that reads the clock.

A tick: fold events other writers appended → poll every source → merge into a Snapshot →
``detect`` per projection (pure) → append the transitions in one transaction (with projection
snapshots when due) → fold them → let the notifier plan and record. A tick with no change opens
no write transaction. Sleeping uses the monotonic clock; after a suspend, missed ticks are
skipped (one tick, not a burst). Every ``interval`` a tick runs every source (time alone
changes classes); inotify (watchdog) wakes the loop early for file changes, and such a tick is
partial: file sources look only at the paths the :class:`Waker` collected, the other sources
reuse their last result. While inotify is healthy, file sources stat every file once per
``watch.resync``, a slice of them on each full tick (the rolling resync; once in full after a
queue overflow); without inotify, every ``interval``.
The fleet's, dod's and fanout's detectors look only at the agents that changed or are due
(``Watcher.fleet``, ``Watcher.tickers``: runtime/schedule.py; runs' ticker keeps the runs that
raised on the doc they still hold). Each Snapshot carries the change hint (``gen``, ``dirty``: the agents
whose observation the patched merge changed, runtime/merged.py, plus those whose records this
watcher's folds changed since the last detect; None after another writer's events, a failed
append or a full merge): with it a tick with one changed file costs O(changed), not O(agents).
"""
from __future__ import annotations

import gc
import logging
import os
import threading
import time
from typing import Any, cast

from events.errors import AppendFailed, LogReplaced
from events.log import EventLog
from events.types import WatcherStarted, WatcherStopped
from projections.dod import fold as dod
from projections.fleet import fanout
from projections.fleet import fold as fleet
from projections.base import Detector
from watcher.config import Config
from watcher.runtime.counts import ClassCounts
from watcher.runtime.logs import LineBudget
from watcher.runtime.merged import Merger
from watcher.runtime.schedule import DodTicker, FanoutTicker, FleetTicker, RunsTicker
from watcher.sources import Source, WindowSource, build_sources
from watcher.runtime.polls import Polls
from watcher.runtime import spill
from watcher.runtime.snapcadence import (SNAPSHOT_EVERY_EVENTS, SNAPSHOT_EVERY_SECONDS,  # noqa: F401
                                         SNAPSHOT_SHARE, SnapshotCadence)
from watcher.runtime.snapround import SnapshotRound
from watcher.runtime.state import Projections, gc_paused
from watcher.runtime.waker import Waker  # noqa: F401  (re-exported: run and the tests take it from here)
from watcher.runtime.walquiet import Quiet

log = logging.getLogger("fleetwatch.watcher")

APPEND_FAILED_EVERY_S = 60.0  # a failing append (a full disk) is said again at most this often
SLOW_TICK_S = 5.0  # a tick this long is logged as a warning with where its time went (debug: every tick)
# events the notifier hands back are not re-derivable from sources: keep them until committed
_KEEP_TYPES = ("notice.", "agent.nudged")
# the types the hinted detectors (Snapshot.dirty) fold; of those, the ones that name no agent
# change no agent record (source and fan-out edges)
_HINTED_TYPES = (fleet.TYPES | dod.TYPES | fanout.TYPES) - {"source.failed", "source.recovered", "fleet.fanout"}


GC_GEN0 = 50_000  # allocations between young collections once started (CPython's default: 700)


def settle_gc() -> None:
    """Tune the cyclic GC for a long-running process whose data is long-lived and acyclic
    (projection states are dicts of dicts and strings). Called after start-up and again after
    the first tick: one collection, then ``gc.freeze()`` moves every object alive now to the
    permanent generation (never scanned again; still freed by reference counting, only cycles
    among them would stay), and a higher young threshold so a tick that allocates 50,000
    agents' records runs tens of collections, not thousands (with the defaults, 700, 10, 10, the
    collector rescans the growing state thousands of times in a big first tick)."""
    gc.collect()
    gc.freeze()
    _, g1, g2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0, g1, g2)


def version() -> str:
    try:
        from importlib.metadata import version as v

        return v("fleetwatch")
    except Exception:
        return "0+unknown"


class Watcher(SnapshotCadence):   # snapshot_due, snapshot, snapshot_if_due: snapcadence.py
    def __init__(self, cfg: Config, elog: EventLog, *, notifier: Any = None):
        self.cfg = cfg
        self.log = elog
        self.sources = build_sources(cfg)
        self.proj = Projections.load(elog)
        self.quiet = Quiet(elog.path)        # has the log had a commit since the last catch-up?
        self.fleet = FleetTicker()       # the fleet judge's changed and due agents, and miss counts
        self.tickers: dict[str, DodTicker | FanoutTicker | RunsTicker] = {
            "dod": DodTicker(), "fanout": FanoutTicker(), "runs": RunsTicker()}  # what they keep: runtime/schedule.py
        self.pending: list[Any] = []
        self.notifier = notifier
        self.census_seq: int | None = None   # the log's seq after this process's first complete look
        self.checker: Any = None             # watcher.runtime.checker.Checker when [dod] run_checks
        self.closing: Any = None             # watcher.runtime.closeloop.Closing: verifier, acting on verdicts, plans
        self.polls = Polls(self.poll_one)
        self.sweep = 0.0                     # part of the files a full tick with inotify paths stats too
        self.sweep_most: int | None = None   # and at most this many (run: watch.resync_rate x interval)
        self.poll_wait: float | None = None  # a tick waits this long for sources (None: their deadlines)
        self._polled = False                 # the first tick always waits up to the deadlines
        self.cancel: Any = None              # a threading.Event (the stop request) that cuts the wait
        self.snap_seq = self.proj.seq
        self.snap_mono = time.monotonic()
        self.snap_wanted = False
        self._snap_todo: list[str] = []       # projections the snapshot round in progress has yet to write
        self._snap_low = 0                    # the seq its first write covered
        self._window = False                  # a debounce window ran since the last tick's end
        self.snap_budget: float | None = None  # s a tick's end may spend on a due snapshot (run: the debounce); None: all
        self.snap_fork = False                # run: a due round is encoded in a forked child, stored by a thread
        self._round: SnapshotRound | None = None  # that round, while it runs
        self.write_lock = threading.Lock()    # held around each append (and that round's stores)
        self.log_budget = LineBudget(log)     # transition lines within the journal's rate limit
        self.merger = Merger()                # the last merge, patched where sources changed
        self._touched: set[str] | None = set()  # agents whose folded records changed since the last detect
        self.counts = ClassCounts()           # agents per class at a seq (sd_notify's status line)
        self.unwritten = 0                    # appends failed in a row (a full disk): `run --once` exits 1
        self._failed_since = self._failed_said = 0.0

    # ---- pure-ish stages ------------------------------------------------------------------
    def observe(self, now: float, full: bool, changed: set[str] | None = None):
        """Poll every source. ``changed``: the paths inotify reported; file sources re-stat only
        those and reuse the rest of their cache (None: they stat every file). ``full`` False
        (a wake-up): the other sources reuse their last result too."""
        # each source polls in its own thread under a deadline (watcher/runtime/polls.py): a stuck
        # one is one source.failed "timed out after …", the others and the tick go on
        results, pending = self.polls.poll(self.sources, now, full, changed,
                                           None if self.poll_wait is None or not self._polled else self.poll_wait,
                                           cancel=self.cancel)
        self._polled = True
        marks = getattr(self.notifier, "nudge_marks", None)
        if marks is not None or self.closing is not None:  # the echo of the watcher's own keys is not activity
            quiet = {**(marks() if marks is not None else {}), **(self.closing.marks() if self.closing else {})}
            for s in self.sources:
                if isinstance(s, WindowSource):
                    s.quiet = quiet
        snap = self.merger.merge(self.sources, results)  # patched where a file changed (runtime/merged.py)
        if pending:
            snap.failed = dict(snap.failed)
        for name in pending:  # slow first poll: nothing known yet, nothing concluded from it
            snap.failed.setdefault(name, "pending")
        touched, self._touched = self._touched, set()
        if snap.dirty is not None:  # the change hint: what the files changed, and what the folds did
            snap.dirty = None if touched is None else snap.dirty | touched
        return snap

    def _note(self, recs: list[Any]) -> None:
        """Remember whose folded records these events change (for the next tick's change hint):
        each event's own agent; an event of a type the hinted detectors fold that names no agent
        (none today but the source and fan-out edges, which change no agent record) makes it
        unknown. (One pass over the batch when every event names an agent, as a first tick's do.)"""
        t = self._touched
        if t is None:
            return
        aids = [getattr(r.event, "agent", None) for r in recs]
        if set(map(type, aids)) <= {str}:
            t.update(cast(list[str], aids))
            return
        for rec, aid in zip(recs, aids):
            if isinstance(aid, str):
                t.add(aid)
            elif rec.type in _HINTED_TYPES:
                self._touched = None
                return

    def poll_one(self, s: Source, now: float, full: bool, changed: set[str] | None):
        """One source's poll (run in that source's worker thread by :class:`Polls`). A file
        source on a tick with inotify's paths looks only there; on a full tick (every
        ``interval``) it also stats its next ``sweep`` part of the files (the rolling resync)."""
        if changed is not None and s.partial:
            files: Any = s   # a partial source's poll takes changed=, sweep=, most= (GlobSource.poll)
            if full and self.sweep > 0:
                return files.poll(now, False, changed=changed, sweep=self.sweep, most=self.sweep_most)
            return files.poll(now, False, changed=changed)
        return s.poll(now, full)

    def detect(self, snap, now: float) -> list[Any]:
        """Every projection's pure detector on this tick's snapshot. A detector that raises is
        a bug: it is logged and skipped for this tick, the others (and the loop) go on."""
        c = self.cfg
        evs: list[Any] = []
        try:  # isolated like every other detector below
            evs = self.fleet.tick(self.proj["fleet"], snap, now, fleet.Limits(
                c.dur("classify.stall_after"), c.dur("classify.busy_silence"), c.dur("classify.busy_silence_tool")))
        except Exception:
            log.exception("detector fleet failed on this tick's snapshot; skipped")
            evs = []
        policy: dict[str, dict[str, Any]] = {
            "dod": {"claim_unverified_after": c.dur("classify.claim_unverified_after")},
            "runs": {"default_deadline": c.dur("steps.deadline"),
                     "deadlines": {k: c.dur(f"steps.deadlines.{k}") for k in c.steps.deadlines},
                     "board_daily_quota": c.steps.board_daily_quota, "sessions_per_day": c.steps.sessions_per_day,
                     "inactive_boards": tuple(c.steps.inactive_boards)},
            "missions": {"max_children_active": c.missions.max_children_active},
            "swarms": {"max_concurrent": c.swarm.max_concurrent, "max_children": c.swarm.max_children,
                       "max_total": c.swarm.max_total},
            "fanout": {"fanout_max": c.classify.fanout_max, "fanout_window": c.dur("classify.fanout_window"),
                       "census": self.census_seq is None, "census_seq": self.census_seq or 0},
        }
        for name, kw in policy.items():
            mod = self.proj.mods.get(name)
            if mod is None:
                continue
            try:
                if name in self.tickers:   # on the changed and due entities (runtime/schedule.py)
                    evs += self.tickers[name].tick(self.proj[name], snap, now, **kw)
                else:
                    evs += cast(Detector, mod).detect(self.proj[name], snap, now, **kw)   # policy names detectors
            except Exception:
                log.exception("detector %s failed on this tick's snapshot; skipped", name)
        return evs

    # ---- the edge: commit -----------------------------------------------------------------
    def commit(self, events: list[Any], now: float, *, force_snapshot: bool = False) -> int:
        """Append ``events`` (plus kept notifier records) in one transaction and fold them.
        The batch is folded once it is committed; on failure nothing of it is folded (the states
        are loaded again from the log): level-based transitions are found again next tick and
        notifier records stay pending. Snapshots are not written here (see :meth:`snapshot`)
        unless ``force_snapshot``."""
        batch = self.pending + list(events)
        if batch:
            proj = self.proj
            mine: list[Any] = []

            def foreign(recs):  # in the transaction: the log's events that landed before ours
                mine[:] = recs
                if recs:
                    first = recs[0].seq
                    for r in self.log.read(proj.seq, limit=max(0, first - 1 - proj.seq)):
                        self._touched = None  # foreign events: whose records they change is not tracked
                        proj.fold(r)
                return None

            try:
                with self.write_lock:
                    self.log.append(batch, now, snapshot=foreign)
                    self._note(mine)
                    before = self.counts.before(mine, proj)
                    proj.fold_many(mine)  # one projection at a time over the batch
                    if before is not None:
                        self.counts.moved(before, proj)
            except AppendFailed as e:
                self._append_failed(len(batch), e)
                self.proj = Projections.load(self.log)
                self._touched = None  # every record is a new object now
                self.counts.reset()  # counted past a batch that is not in the log
                self.pending = [e for e in batch if _keep(e)]
                raise
            self.pending = []
            if self.unwritten:
                log.warning("appends work again after %d failed (%.0f s)", self.unwritten,
                            time.monotonic() - self._failed_since)
                self.unwritten = 0
            if log.isEnabledFor(logging.INFO):
                self._log_lines(batch)
        if force_snapshot:
            self.snapshot()
        return len(batch)

    def _append_failed(self, n: int, e: AppendFailed) -> None:
        """One ERROR line for the first failed append (a full disk fails every tick until there is
        room), then one a minute; the transitions are found again by the next tick that commits
        (they are levels), the notifier's records are kept."""
        now = time.monotonic()
        self.unwritten += 1
        if self.unwritten == 1:
            self._failed_since = self._failed_said = now
            spill.push_if_full(self.cfg, self.log.path, e)   # once per outage: the log cannot record a notice
            hint = (e.hint or "check the disk").split(", then run the command again")[0]  # (a command's wording)
            log.error("%d transitions not written: %s; %s. Each tick tries again; the first that commits records "
                      "every class as it is then (a change that came and went meanwhile is not)", n, e, hint)
        elif now - self._failed_said >= APPEND_FAILED_EVERY_S:
            self._failed_said = now
            log.error("appends still failing (%d in %.0f s, %d transitions this time): %s", self.unwritten,
                      now - self._failed_since, n, e)

    def _log_lines(self, batch: list[Any]) -> None:
        """One INFO line per transition; those naming an agent (as many as the fleet has) within
        the journal's rate limit (runtime/logs.py LineBudget), the others (sources, the watcher,
        deliveries) always."""
        from events.log import Pending

        evs = [e.event if isinstance(e, Pending) else e for e in batch]
        many = [isinstance(getattr(e, "agent", None), str) for e in evs]
        allowed = self.log_budget.take(sum(many))
        for e, m in zip(evs, many):
            if m:
                if allowed <= 0:
                    continue
                allowed -= 1
            log.info("%s", describe(e))

    def tick(self, now: float, full: bool = True, changed: set[str] | None = None) -> int:
        """One tick. Returns how many events this tick appended. ``changed`` (the paths a
        :class:`Waker` collected): file sources look only there; None: they stat every file.
        ``full`` False (woken early): command, tmux and sqlite sources are not run again.
        A snapshot that came due in one tick is written before the next one (in the debounce,
        :meth:`snapshot_if_due`) or at its end, so the tick that made it due (the first tick of
        a big fleet above all) commits without encoding every projection. The cyclic GC is
        paused for the tick (``gc_paused``: what a tick makes is observations, records and
        events, trees that reference counting frees; a first tick at 50,000 agents ran ~13 young
        collections, ~0.2 s, that found nothing), and runs after it as usual."""
        with gc_paused():
            return self._tick(now, full, changed)

    def _tick(self, now: float, full: bool, changed: set[str] | None) -> int:
        t0 = time.perf_counter()
        self.log.check_identity()  # the log vanished or was replaced: LogReplaced, nothing appended
        if self.quiet.maybe_changed() and self.proj.catch_up(self.log):  # (walquiet.py: a stat, not a query, when idle)
            self._touched = None  # another writer's events: no hint this tick
        snap = self.observe(now, full, changed)
        t1 = t2 = time.perf_counter()
        n = 0
        try:
            evs = self.detect(snap, now) if self.closing is None else \
                self.closing.amend(self.proj.states, self.detect(snap, now))   # a close's CERRADO: "verified met"
            t2 = time.perf_counter()
            n += self.commit(evs, now)
            if self.census_seq is None and not snap.failed:   # every source answered: the census is taken
                self.census_seq = self.proj.seq
            if self.notifier is not None:
                n += self.commit(self.notifier.step(self.proj.states, now), now)
            for stage in (self.checker, self.closing):  # DoD checks; verifier, verdicts acted on, plans
                if stage is not None:                   # (their workers run them: only events come back)
                    n += self.commit(stage.step(self.proj.states, snap, now), now)
        except AppendFailed:
            pass
        t3 = time.perf_counter()
        if not self._window:   # no debounce window since the last tick (idle, no inotify, a loop behind)
            self.snapshot_if_due(self.snap_budget)
        self._window = False
        if not self.snap_wanted:
            self.snap_wanted = self.snapshot_due()
        t4 = time.perf_counter()
        if t4 - t0 >= SLOW_TICK_S or log.isEnabledFor(logging.DEBUG):  # where a tick's time went
            log.log(logging.WARNING if t4 - t0 >= SLOW_TICK_S else logging.DEBUG,
                    "tick %.0f ms (%s): observe %.0f, detect %.0f, commit %.0f, snapshot %.0f; %d events",
                    (t4 - t0) * 1e3, "full" if full else f"{len(changed or ())} paths", (t1 - t0) * 1e3,
                    (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3, n)
        return n

    def suspects(self) -> bool:
        """True when a file failed its first read (the two-read rule wants a second one)."""
        return any(e.fails == 1 for s in self.sources if not self.polls.busy(s)
                   for e in list(s.cache.values()))

    def next_wake(self, now: float) -> float | None:
        if self.notifier is None:
            return None
        try:
            return self.notifier.next_wake(self.proj.states, now)
        except Exception:
            log.exception("notifier.next_wake failed")
            return None

    def class_counts(self) -> dict[str, int]:
        """Agents per class (sd_notify's status line, every tick): kept by this watcher's commits
        (watcher/runtime/counts.py), counted in full when the log moved otherwise."""
        return self.counts.of(self.proj)

    def started(self, now: float) -> None:
        self.commit([WatcherStarted(version=version(), pid=os.getpid())], now)

    def stopped(self, now: float, reason: str = "signal") -> bool:
        """Record ``watcher.stopped``; False when it could not be (a full disk: runtime/spill.py)."""
        try:
            self.commit([WatcherStopped(version=version(), pid=os.getpid(), reason=reason)], now,
                        force_snapshot=True)
            return True
        except AppendFailed:
            log.error("could not record watcher.stopped")
        except LogReplaced:
            log.error("the event log is gone: watcher.stopped not recorded")
        return False

    def reload(self, cfg: Config, db: str | None = None) -> None:
        """Take a new config (SIGHUP): the sources are rebuilt and every ticker reset
        (they hold the old policy). What a running watcher cannot change — the log's path and
        durability, fixed when the log was opened — is refused with a :class:`ConfigError`
        before anything changes; the caller keeps the running config. The path is the file the
        new config names as `run` would open it (``db``: its --db, which wins over [store] path,
        as $FLEETWATCH_DB does), resolved: another spelling of the open log is no move."""
        from events.errors import ConfigError
        from watcher.config import db_path

        for what, old, new in (("store.path", self.log.path, os.path.realpath(db_path(cfg, db))),
                               ("store.durability", self.cfg.store.durability, cfg.store.durability)):
            if old != new:
                raise ConfigError(f"{what} changed ({old!r} -> {new!r}): a reload cannot move the event log",
                                  op="reload", key=what, hint="restart the service to use the new value")
        self.close()
        self.cfg = cfg
        self.sources = build_sources(cfg)
        self.merger.forget()
        self.fleet.sched.reset()  # the fleet's miss counts survive (the grace of an absent agent)
        for t in self.tickers.values():
            t.reset()

    def close(self) -> None:
        self._end_round()
        self.polls.close()
        for s in self.sources:
            try:
                s.close()
            except Exception:
                pass


def describe(ev: Any) -> str:
    """One log line per transition, from the one event renderer (projections.present.render): ids,
    classes and short reasons, escaped (an id cannot forge a line), never content."""
    from events.log import Pending
    from projections.present.render import event_text

    return event_text(ev.event if isinstance(ev, Pending) else ev)


def _keep(ev: Any) -> bool:
    """Kept when an append fails: notifier records, checker verdicts (``checks:`` ids: decided once)."""
    from events.log import Pending

    if isinstance(ev, Pending) and isinstance(ev.id, str) and ev.id.startswith("checks:"):
        return True
    e = ev.event if isinstance(ev, Pending) else ev
    tag = type(e).__struct_config__.tag
    return any(tag.startswith(k) for k in _KEEP_TYPES)
