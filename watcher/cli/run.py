"""`fleetwatch run`: the watcher as a service (signals, sd_notify, SIGHUP reload)."""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from functools import partial
from typing import Annotated

import typer

from watcher.cli.util import ConfigOpt, DbOpt, errors

log = logging.getLogger("fleetwatch.watcher")
TICK_WAIT = 0.25  # seconds a tick waits for slow sources (their last view stands; a late one wakes the loop)


def _notifier(cfg, wake, elog=None):
    from watcher.runtime.notifier import Notifier

    return Notifier(cfg, wake=wake, head_label=elog.head_label if elog is not None else None)


def _web(cfg, db):
    """The [web] endpoint in a thread (None without [web]); a failure to listen is logged, and the
    watcher runs on without it."""
    from events.errors import FleetwatchError

    if cfg.web is None:
        return None
    try:
        from watcher.web.server import start

        return start(cfg, db)
    except ImportError:
        log.error("web: not started: the [web] extra is not installed (pip install 'fleetwatch[web]')")
    except (FleetwatchError, OSError) as e:
        log.error("web: not started: %s", e)
    return None


def _hook_endpoint(cfg, sock=None):
    """The [hook] endpoint for Claude Code's http hooks, in its own threads (None without [hook]);
    a failure to listen is logged, and the watcher runs on without it. ``sock``: the listening
    socket systemd passed (socket activation), served instead of binding ``listen``."""
    if cfg.hook is None:
        return None
    from watcher.hook.endpoint import HookEndpoint, HookEndpointError

    try:
        return HookEndpoint(cfg.hook.listen, os.path.expanduser(cfg.hook.goals_dir) if cfg.hook.goals_dir else None,
                            sock=sock)
    except HookEndpointError as e:
        log.error("hook endpoint: not started: %s", e)
    return None


def _checker(cfg, db_path: str):
    from watcher.runtime.checker import Checker

    return Checker.from_config(cfg, db_path)


def _closing(cfg, db_path: str, checker):
    from watcher.runtime.closeloop import Closing

    return Closing(cfg, db_path, checker)


def _record_last(w) -> None:
    """After ``notifier.close``: step() only harvests outcomes; commit them."""
    try:
        w.commit(w.notifier.step(w.proj.states, time.time()), time.time())
    except Exception:
        log.exception("could not record the last deliveries")


def _bind_launched(w, cfg, old_sources=()) -> None:
    """Each goals source files a launched agent's goal.json under that agent whatever it says
    later (watcher/sources/pins.py), across restarts; a reload keeps what the old sources bound."""
    from projections.classes import CERRADO
    from watcher.sources import pins

    pins.carry(old_sources, w.sources)
    launched = (w.proj.states.get("plans") or {}).get("agents") or {}
    pins.bind_launched(w.sources, list(launched), cfg.launch.goals_dir)
    known = {a: r["source"] for a, r in w.proj["fleet"]["agents"].items() if r["class"] != CERRADO}
    pins.bind_folders(w.sources, known)


UNASKED = "signal-unasked"


def _unasked(asked: threading.Event, once: bool) -> bool:
    """Stopped by a signal under a service manager (``$INVOCATION_ID``) that did not announce it
    with SIGUSR1 (its ExecStop=): something else killed the watcher, said with exit 1."""
    import os

    return not once and not asked.is_set() and bool(os.environ.get("INVOCATION_ID"))


def _spilled(w, path: str) -> None:
    """At start: append what the last watcher could not (a full disk: watcher/runtime/spill.py),
    then reserve the spill file for this one."""
    from events.errors import AppendFailed
    from watcher.runtime import spill

    kept = spill.take(path)
    if kept:
        try:
            w.commit(kept, time.time())
        except AppendFailed:
            log.error("%d events kept by the last watcher are not appended yet (the disk is still full)", len(kept))
            return
        log.warning("appended %d events the last watcher could not record (a full disk)", len(kept))
        spill.clear(path)
    spill.reserve(path)


def _spill(w, path: str, reason: str) -> None:
    """At a stop that could not be recorded: ``watcher.stopped`` and the decisions still pending
    wait in the reserved spill file for the next start."""
    import os

    from watcher.runtime import spill
    from watcher.runtime.loop import version
    from events.types import WatcherStopped

    batch = [*w.pending, WatcherStopped(version=version(), pid=os.getpid(), reason=reason)]
    n = spill.keep(path, batch)
    if n:
        log.warning("kept %d events (watcher.stopped and the decisions not written) in %s for the next start",
                    n, spill.path_of(path))


def _log_gone(cfg, err) -> None:
    """The log vanished or was replaced under the watcher: nothing more is appended. Say so in the
    service log and, best effort, in one direct push (the log cannot record a notice any more)."""
    log.error("%s; nothing more is appended to the old file. Exiting 1 so systemd restarts the watcher "
              "onto the file at the configured path (every current class is recorded again there)", err)
    try:
        from watcher.runtime.deliver import Deliverer

        d = Deliverer(cfg)
        if d.configured:
            d.send("fleetwatch: the event log is gone", f"{err}. The watcher stopped appending and exits; "
                   "systemd restarts it onto the file at the configured path.", "failure")
    except Exception as e:  # the notice is a courtesy: the exit status is what counts
        log.error("could not push the log-gone notice: %s", type(e).__name__)


def _open(db: str, cfg, parents: bool):
    """The log, writer-locked (WriterLocked: exit 3). It cannot be opened for a full disk or an I/O
    error: exit 1, not the 2 of a bad path, which systemd does not restart (RestartPreventExitStatus)
    although freeing space is all it takes."""
    import errno

    from events.errors import StoreError
    from events.log import EventLog

    try:
        return EventLog(db, durability=cfg.store.durability, lock=True, parents=parents)
    except StoreError as e:
        cause = e.__cause__
        if type(cause).__name__ in ("FullError", "IOError") or (
                isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO)):
            e.exit_code = 1
            e.hint = f"{e.hint}; exit 1: systemd starts the watcher again (Restart=on-failure)"
        raise


def serve(cfg, db: str, *, once: bool = False, config_arg: str | None = None, db_arg: str | None = None,
          parents: bool = True) -> int:
    """Hold the writer lock and run ticks until SIGTERM/SIGINT (or one tick with ``once``). The
    lock is the log file's own (events/lock.py). If the file at ``db`` vanishes or is replaced,
    :class:`LogReplaced` ends the run (exit 1). ``parents``: create a missing folder."""
    from events.errors import LogReplaced
    from watcher.config import load
    from watcher.runtime.loop import Waker, Watcher, settle_gc
    from watcher.runtime.sdnotify import SystemdNotifier, status_line
    from watcher.runtime.signals import SignalRelay

    # SIGTERM/SIGINT are honoured from here on: a stop while the log opens, the projections load
    # or the first tick runs ends the start cleanly (watcher.stopped whenever watcher.started)
    stop = threading.Event()
    reload_req = threading.Event()  # and a SIGHUP then is a reload after the first tick, not the end of the process
    waker: Waker | None = None  # set below; a signal wakes the loop through it

    def on_stop() -> None:
        stop.set()
        if waker is not None:
            waker.event.set()

    def on_hup() -> None:
        reload_req.set()
        if waker is not None:
            waker.event.set()

    def on_late_poll() -> None:   # a slow poll that ends late is taken at once
        if waker is not None:
            waker.event.set()

    # the actions run in a thread of their own, never in the signal handler: Event.set() there could
    # wait for a lock the interrupted main thread holds, and the watcher froze (runtime/signals.py)
    asked = threading.Event()   # SIGUSR1: the stop the service unit asks for (its ExecStop=)

    def on_asked() -> None:
        asked.set()
        on_stop()

    relay = SignalRelay({signal.SIGTERM: on_stop, signal.SIGINT: on_stop, signal.SIGHUP: on_hup,
                         signal.SIGUSR1: on_asked})
    try:
        elog = _open(db, cfg, parents)
    except BaseException:
        relay.close()
        raise
    from watcher.hub.forwarder import start as start_forwarder

    fwd = start_forwarder(cfg, db)  # [forward]: its own thread; never blocks the tick
    ckpt = None
    if not once:  # WAL checkpoints in their own thread, not inside a tick's commit (runtime/checkpoint.py)
        from watcher.runtime.checkpoint import BACKSTOP_PAGES, Checkpointer

        elog.set_autocheckpoint(BACKSTOP_PAGES)
        ckpt = Checkpointer(elog.path).start()
    sd = SystemdNotifier.from_env()
    w = Watcher(cfg, elog)
    _bind_launched(w, cfg)
    w.cancel = stop  # a stop cuts the tick's wait for slow sources
    w.snap_budget = cfg.dur("watch.debounce")  # a due snapshot: a debounce's worth of it per tick at most
    w.snap_fork = not once  # ... or none of it in the loop: a forked child encodes, a thread stores (SnapshotRound)
    w.polls.on_done = on_late_poll
    settle_gc()  # after start-up: imports, config and the loaded projections are long-lived
    waker = Waker([] if once else [r for s in w.sources if hasattr(s, "watch_roots") for r in s.watch_roots()],
                  cfg.dur("watch.debounce"), start=False)  # started after the first tick (Waker.start)
    if not once:
        w.notifier = _notifier(cfg, waker.event.set, elog)
        w.checker = _checker(cfg, elog.path)
        w.closing = _closing(cfg, elog.path, w.checker)
    web = None if once else _web(cfg, db)
    hook_sock = None   # the socket systemd passed (socket activation), kept for the process's life
    if not once and "LISTEN_FDS" in os.environ:
        from watcher.hook.endpoint import inherited_socket

        hook_sock = inherited_socket()
    hook_ep = None if once else _hook_endpoint(cfg, hook_sock)
    if reload_req.is_set():  # a SIGHUP during the start: the config is read again after the first tick
        waker.event.set()
    reason = "signal"
    started = False
    try:
        if stop.is_set():  # stopped during start-up, before anything was recorded: a clean exit
            return 0
        _spilled(w, elog.path)   # what the last watcher kept on a full disk, before this start
        w.started(time.time())
        started = True
        if not once:  # after the first tick no source holds the tick longer than this
            w.poll_wait = TICK_WAIT if sd.watchdog_interval is None else min(TICK_WAIT, sd.watchdog_interval / 4)
        w.tick(time.time(), full=True)
        settle_gc()  # and the first tick's records (every agent) are too
        waker.start()  # its watches cost ~0.4 s at 10k agents: after the first tick, which it then re-checks
        last_full = time.monotonic()
        log.info("watching %d sources; %d agents", len(w.sources), len(w.proj["fleet"]["agents"]))
        if once:
            if w.suspects():  # a file failed its first read: give it its second read now
                time.sleep(max(0.05, cfg.dur("watch.debounce")))
                w.tick(time.time(), full=True)
            reason = "once"
            if w.unwritten:  # a full disk: what this tick found is not in the log (there is no next tick)
                log.error("run --once: the tick's transitions were not written (above); exit 1")
                return 1
            return 0
        sd.ready()
        sd.status(status_line(w.class_counts(), 0.0))
        sd.tick_completed(time.monotonic())
        while not stop.is_set():
            interval = cfg.dur("watch.interval")
            mono = time.monotonic()
            due = last_full + interval
            nw = w.next_wake(time.time())
            if nw is not None:
                due = min(due, mono + max(0.0, nw - time.time()))
            woke = waker.wait(max(0.0, due - mono), during=partial(w.snapshot_if_due, waker.debounce))  # in the debounce
            if stop.is_set():
                break
            if reload_req.is_set():
                reload_req.clear()
                sd.reloading()
                try:
                    new = load(config_arg, required=True)
                    old_sources = w.sources
                    w.reload(new, db_arg)  # refuses (before changing anything) what a reload cannot change
                    _bind_launched(w, new, old_sources)
                except Exception as e:  # an invalid new config keeps the old one
                    log.error("reload refused, keeping the running config: %s", e)
                else:
                    if w.notifier is not None:
                        w.notifier.close(2.0)
                        _record_last(w)  # a delivery that just finished is recorded, not re-sent
                    cfg = new
                    waker.close()
                    waker = Waker([r for s in w.sources if hasattr(s, "watch_roots") for r in s.watch_roots()],
                                  cfg.dur("watch.debounce"))
                    w.notifier = _notifier(cfg, waker.event.set, elog)
                    if web is not None:  # [web] may have changed (listen, key, on/off)
                        web.close()
                    web = _web(cfg, db)
                    if hook_ep is not None:  # [hook] may have changed (listen, goals_dir, on/off)
                        hook_ep.close(keep_socket=hook_sock is not None)
                    hook_ep = _hook_endpoint(cfg, hook_sock)
                    old = w.checker
                    if old is not None:
                        old.close()
                    w.checker = _checker(cfg, elog.path)
                    if old is not None and w.checker is not None:
                        w.checker.take_over(old)   # the checks it killed run again, its verdicts stay decided
                    if w.closing is not None:
                        w.closing.close()
                    w.closing = _closing(cfg, elog.path, w.checker)
                    log.info("config reloaded: %d sources", len(w.sources))
                sd.ready_after_reload()
            mono = time.monotonic()
            full = mono - last_full >= interval or not woke
            if full:
                last_full = mono  # after a suspend: one tick now, missed ticks skipped
            paths = waker.take()  # file sources look where inotify pointed (None: everywhere)
            # the safety net for a change inotify never reported (docs/bench.md): each full tick
            # also stats the next interval/resync part of the files, so all of them once per resync,
            # but at most resync_rate files a second (a big fleet's round takes longer)
            w.sweep = min(1.0, interval / max(cfg.dur("watch.resync"), 1e-3))
            w.sweep_most = max(1, int(cfg.watch.resync_rate * interval))
            w.tick(time.time(), full=full, changed=paths)
            sd.tick_completed(time.monotonic())
            sd.status(status_line(w.class_counts(), time.monotonic() - mono))
        if _unasked(asked, once):
            reason = UNASKED
    except LogReplaced as e:
        _log_gone(cfg, e)
        raise
    finally:
        sd.stopping()
        relay.close()
        if w.notifier is not None:
            w.notifier.close(5.0)
            _record_last(w)
        if w.checker is not None:
            w.checker.close(1.0)  # a claim checked but not recorded is checked again at the next start
        if w.closing is not None:
            w.closing.close(1.0)  # a verifier killed is run again at the next start
        if web is not None:
            web.close()
        if hook_ep is not None:
            hook_ep.close()
        if started and not w.stopped(time.time(), reason):
            _spill(w, elog.path, reason)
        if fwd is not None:
            fwd.stop(2.0 if once else 5.0)  # forwards what is left (watcher.stopped too)
        waker.close()
        w.close()
        if ckpt is not None:
            ckpt.close()
        elog.close()  # and the writer lock
    log.info("stopped")
    if reason == UNASKED:   # the unit's ExecStopPost= pushes "stopped" and Restart=always starts it again
        log.error("stopped by a signal the service manager did not announce (ExecStop= sends SIGUSR1 first): "
                  "exit 1")
        return 1
    return 0


def register(app: typer.Typer) -> None:
    @app.command("run")
    @errors
    def run(
        once: Annotated[bool, typer.Option("--once", help="Run one tick, then exit.")] = False,
        log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
        create: Annotated[bool, typer.Option("--create", help="Create the folder of an explicit --db / $FLEETWATCH_DB / [store] path that does not exist (else refused: a typo).")] = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Run the watcher: poll sources, append transitions, push notices. Exit 3 if another
        watcher holds the log, 2 on a bad config or log path, 1 if the log vanished or was
        replaced while running, cannot be opened for a full disk or an I/O error (systemd
        restarts it), or (--once) the tick's transitions could not be written."""
        from watcher.cli.util import context, explicit_db
        from watcher.runtime.deliver import exit_if_deliveries_hang
        from watcher.runtime.logs import setup_logging

        setup_logging(log_level)
        cfg, path = context(config, db, need_config=True, check_paths=True)
        rc = serve(cfg, path, once=once, config_arg=config, db_arg=db, parents=create or not explicit_db(db, cfg))
        exit_if_deliveries_hang(rc)
        raise typer.Exit(rc)
