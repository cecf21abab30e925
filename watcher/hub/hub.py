"""`fleetwatch hub`: every host's events from JetStream into one log, one fleet, one notifier.

A durable pull consumer (``[hub] consumer``, one per hub) fetches up to ``batch`` messages; each
becomes an :class:`~watcher.hub.wire.Origin` and a hub event (host-prefixed identities) appended
with id ``<host>/<chain>/<event id>`` in ONE transaction together with the origin rows
(``hub_origin``) and the projection snapshots; only then is each message acked (AckPolicy.EXPLICIT: an
ack never covers a message this hub did not commit). So a hub killed at any point re-receives
what it had not acked and finds the ids already stored: exactly once in the hub's log.
``max_ack_pending = batch`` keeps one fetch in flight, and a consumer found with unacked
messages at connect is recreated at its ack floor (:meth:`Hub._rewind`): what a killed hub had
fetched is redelivered before anything newer, so each host's rows are folded in order.

The same projections and notifier as `fleetwatch run` then run over the whole fleet (agents
``host/agent``; one grouped push across hosts). Liveness: every message and every heartbeat
(core NATS ``fleetwatch-hb.<host>``) marks its host seen; a known host unseen for
``silent_after`` gets a ``host.silent`` event (a HOST_SILENT condition), ``host.resumed`` when it
is heard again (:func:`silent_changes`, pure, monotonic time passed in).

No host speaks for another: a message whose ``Nats-Msg-Id`` names another host or chain than its
subject and headers is refused and said (``host.refused``, once per host and reason per run), and
nothing relies on the stream's dedupe (the hub event id is per host, chain and event). A hole in a
host's chain is said as it is found (``host.gap``): rows arrived past it, or the host's heartbeat
names a position beyond the hub's last row of that chain once a fetch found the stream drained
(rows the stream acknowledged but never delivered). ``verify`` fails on either.

Each hub has its own durable consumer: ``[hub] consumer`` unset is ``fleetwatch-hub-<host>-<log
chain>``, and the consumer's description names the hub that owns it; a hub that finds its
consumer owned by another refuses to consume from it (``hub.consumer_taken``, logged, retried):
two hubs on one consumer would each get part of the stream and neither would know.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from enum import Enum
from typing import Any

from events.errors import AppendFailed
from events.log import EventLog, Pending
from events.types_hub import HostEvent, HostResumed, HostSilent
from watcher.config import Config, parse_duration
from watcher.hub import store, wire
from watcher.hub.forwarder import connect, ensure_stream, servers
from watcher.hub.health import HealthFile, host_times
from watcher.hub.guard import ConsumerTaken, Guard

log = logging.getLogger("fleetwatch.hub")


class Seen(str, Enum):
    """A host's liveness transition (:func:`silent_changes`)."""

    SILENT = "silent"
    RESUMED = "resumed"


def silent_changes(last_seen: dict[str, float], silent: set[str], mono: float,
                   silent_after: float) -> list[tuple[str, Seen, float]]:
    """(host, transition, seconds) for every host whose liveness changed at ``mono``: unseen for
    ``silent_after`` -> SILENT (seconds unseen); silent but seen since -> RESUMED. Hosts never
    seen since the hub started are in ``silent`` or absent from ``last_seen``: no change."""
    out = []
    for h, seen in sorted(last_seen.items()):
        quiet = mono - seen
        if h not in silent and quiet >= silent_after:
            out.append((h, Seen.SILENT, quiet))
        elif h in silent and quiet < silent_after:
            out.append((h, Seen.RESUMED, quiet))
    return out


class OriginLog:
    """The hub's EventLog with one addition: rows staged by :meth:`stage` are written to
    ``hub_origin`` inside the same append transaction (through the snapshot hook, which the
    log calls inside its transaction with the new records). Everything else is delegated, append's
    other arguments as given."""

    def __init__(self, elog: EventLog):
        self._elog = elog
        self._staged: dict[str, wire.Origin] = {}
        elog.db.execute(store.ORIGIN_DDL)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._elog, name)

    def stage(self, origins: list[wire.Origin]) -> None:
        self._staged = {o.hub_id: o for o in origins}

    def append(self, events: Any, now: Any, snapshot: Any = None, **kw: Any) -> list[int]:
        staged = self._staged

        def both(recs: list[Any]) -> Any:
            rows = []
            for r in recs:
                o = staged.get(r.id)
                if o is not None:
                    rows.append((o.host, o.chain, o.seq, r.seq, o.id, o.time, o.type, o.subject, o.version,
                                 o.data, o.hash))
            if rows:
                store.insert_origins(self._elog.db, rows)
            return snapshot(recs) if snapshot is not None else None

        try:
            return self._elog.append(events, now, snapshot=both if staged or snapshot else None, **kw)
        finally:
            self._staged = {}


class Hub(Guard):
    """The hub's state around a :class:`watcher.runtime.loop.Watcher` that has no sources: its
    ``commit`` appends, folds and snapshots; its notifier plans and delivers."""

    def __init__(self, cfg: Config, elog: EventLog, *, notifier: Any = None, mono: float | None = None):
        from watcher.runtime.loop import Watcher

        assert cfg.hub is not None
        self.cfg, self.hc = cfg, cfg.hub
        self.olog: OriginLog = OriginLog(elog)
        self.w = Watcher(cfg, self.olog, notifier=notifier)  # type: ignore[arg-type]
        self.silent_after = parse_duration(self.hc.silent_after, "hub.silent_after")
        self.last = store.last_seqs(elog.db)
        self.tips = store.tips(elog.db, self.last)       # (host, chain) -> hash of its last row
        self.chains = store.chains_by_recency(elog.db)   # host -> chains, the latest last
        self._shared_logged: set[str] = set()
        start = time.monotonic() if mono is None else mono
        self.silent = {k[5:] for k in self.w.proj["notify"]["index"] if k.startswith("host:")}
        self.last_seen = {h: start for h, _ in self.last if h not in self.silent}
        self.wall_seen: dict[str, float] = {}
        self.stats: dict[str, int] = {"received": 0, "appended": 0, "duplicates": 0, "rejected": 0, "gaps": 0,
                                      "batches": 0, "failed": 0, "shared_name": 0, "refused_other": 0,
                                      "consumer_taken": 0}
        self._rejects_logged: set[str] = set()
        self.notes: list[Pending] = []            # host.gap / host.refused not recorded yet
        self._noted: set[tuple[object, ...]] = set()
        self.hb: dict[str, tuple[str, int, float]] = {}   # host -> (chain, seq, mono) of its last heartbeat
        self.drained_at = 0.0                     # mono when the last fetch that came back empty began
        self.consumer = self.hc.consumer

    # ---- pure-ish stages ------------------------------------------------------------------
    health: Any = None   # watcher.hub.health.HealthFile (serve sets it): what `status` shows of the hub

    def seen(self, host: str, mono: float, now: float) -> None:
        if self.health is not None:
            self.health.heard(host, now)
        self.last_seen[host] = mono
        self.wall_seen[host] = now

    def accept(self, msgs: list[tuple[str, dict | None, bytes]], mono: float, now: float
               ) -> tuple[list[wire.Origin], list[int]]:
        """Parse a fetched batch: (origins in order, indexes of rejected messages)."""
        origins, rejected = [], []
        batch: dict[tuple[str, str, int], bytes] = {}   # hashes accepted in this batch, not yet stored
        for i, (subj, hdrs, data) in enumerate(msgs):
            o = wire.parse(subj, hdrs, data)
            if not isinstance(o, wire.Reject):
                o = self._linked(o, batch)
            if isinstance(o, wire.Reject):
                rejected.append(i)
                self.stats["rejected"] += 1
                if o in (wire.Reject.MSG_ID, wire.Reject.HOST_MISMATCH):
                    self._refused(subj.split(".")[1] if subj.count(".") >= 2 else "?", o, hdrs)
                if o.value not in self._rejects_logged:
                    self._rejects_logged.add(o.value)
                    log.warning("message on %s refused: %s (further ones counted, not logged)",
                                wire.PREFIX + ".<...>", o.value)
                continue
            self.seen(o.host, mono, now)
            key = (o.host, o.chain)
            last = self.last.get(key, 0)
            if o.seq > last + 1:
                self._gap(o.host, o.chain, last + 1, o.seq - 1, f"before seq {o.seq}")
            if o.seq > last:
                self.last[key], self.tips[key] = o.seq, o.hash
                self._interleaved(o)
            batch[(o.host, o.chain, o.seq)] = o.hash
            origins.append(o)
        return origins, rejected

    def _interleaved(self, o: wire.Origin) -> None:
        """A new row of a chain that an other chain of the same host had followed: two logs
        speak as one host (two machines with one ``[forward] host``: their agents merge into
        one ``host/agent`` each). A recreated log never does that (its old chain stops). Counted
        (``shared_name``) and logged once per host, loudly: only renaming a host cures it."""
        seen = self.chains.setdefault(o.host, [])
        if seen and seen[-1] == o.chain:
            return
        if o.chain in seen:
            self.stats["shared_name"] += 1
            if o.host not in self._shared_logged:
                self._shared_logged.add(o.host)
                log.error("host %s: rows of two logs interleave (chains %s and %s): two machines forward "
                          "as %s and their agents are merged; give each its own [forward] host",
                          o.host, o.chain, seen[-1], o.host)
            seen.remove(o.chain)
        seen.append(o.chain)

    def _linked(self, o: wire.Origin, batch: dict[tuple[str, str, int], bytes]) -> wire.Origin | wire.Reject:
        """``o`` if it can be its host's row: its hash follows from the row before it (when the
        hub holds that one; seq 1 from the genesis) and no other row holds its seq. A forged or
        altered row is refused before anything folds it (``verify`` would only find it later,
        and a new id at a seq already held was folded while verify saw nothing wrong)."""
        db, key = self.olog.db, (o.host, o.chain)
        last = self.last.get(key, 0)
        if o.seq > last:   # the usual case, a row beyond the last one: nothing holds its seq
            held, prev = None, self.tips.get(key) if o.seq == last + 1 else None
        else:              # a redelivery, or a row filling an old gap: look in the batch, then stored
            held = batch.get((o.host, o.chain, o.seq)) or store.held_hash(db, o.host, o.chain, o.seq)
            prev = None
            if held is None and o.seq > 1:
                prev = batch.get((o.host, o.chain, o.seq - 1)) or store.held_hash(db, o.host, o.chain, o.seq - 1)
        why = store.link_problem(o, prev, held)
        outcome: dict[str, wire.Origin | wire.Reject] = {"": o, "conflict": wire.Reject.CONFLICT,
                                                         "chain": wire.Reject.CHAIN}
        return outcome[why]

    def commit(self, origins: list[wire.Origin], now: float) -> int:
        """Append the batch (events + origins + snapshots, one transaction). Returns how many
        were new. Raises AppendFailed (nothing written; the caller naks)."""
        if not origins:
            self.record_notes(now)
            return 0
        pend = [Pending(_hub_event(o), id=o.hub_id, time=t)  # each event at its host's time, not its arrival's
                for o, t in zip(origins, host_times(origins, now))]
        self.olog.stage(origins)
        before = self.w.proj.seq
        self.w.commit(pend, now)
        if self.health is not None:
            self.health.arrived(origins, now)
        new = self.w.proj.seq - before
        self.stats["appended"] += new
        self.stats["duplicates"] += len(origins) - new
        self.record_notes(now)
        return new

    def liveness(self, mono: float, now: float) -> int:
        """Record host.silent / host.resumed transitions due at ``mono``."""
        evs: list[Any] = []
        for h, what, quiet in silent_changes(self.last_seen, self.silent, mono, self.silent_after):
            if what is Seen.SILENT:
                seen = self.wall_seen.get(h)
                evs.append(HostSilent(host=h, after=round(quiet, 3),
                                      last_seen=_iso(seen) if seen is not None else None))
                self.silent.add(h)
                log.warning("host %s silent for %.0fs", h, quiet)
            else:
                evs.append(HostResumed(host=h))
                self.silent.discard(h)
                log.info("host %s heard again", h)
        return self.w.commit(evs, now) if evs else 0

    def notify(self, now: float) -> int:
        if self.w.notifier is None:
            return 0
        return self.w.commit(self.w.notifier.step(self.w.proj.states, now), now)

    def next_wake(self, now: float) -> float | None:
        return self.w.next_wake(now)

    # ---- the edge: NATS -------------------------------------------------------------------
    async def run(self, stop: Any, on_tick: Any = None) -> None:
        """Consume until ``stop`` (a threading.Event) is set; reconnects with backoff."""
        attempt = 0
        while not stop.is_set():
            try:
                nc = await connect(self.hc.nats, self.hc.creds, "fleetwatch-hub")
                if self.health is not None:
                    self.health.nc = nc
            except Exception as e:
                if attempt == 0:
                    log.warning("cannot connect to NATS (%s); retrying", type(e).__name__)
                attempt += 1
                await self._idle(stop, min(5.0, 0.2 * 2 ** attempt), on_tick)
                continue
            try:
                await self._consume(nc, stop, on_tick)
                attempt = 0
            except ConsumerTaken as e:
                self._taken(e)
                attempt += 1
                await self._idle(stop, 5.0, on_tick)
            except Exception as e:
                log.warning("consuming interrupted (%s: %s); reconnecting", type(e).__name__, e)
                attempt += 1
                await self._idle(stop, min(5.0, 0.2 * 2 ** attempt), on_tick)
            finally:
                try:
                    if self.health is not None:
                        self.health.nc = None
                    await asyncio.wait_for(nc.close(), 2.0)
                except Exception:
                    pass

    async def _idle(self, stop: Any, seconds: float, on_tick: Any) -> None:
        """While NATS is away the hub still marks silent hosts and delivers notices."""
        end = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < end:
            self._housekeeping(on_tick)
            await asyncio.sleep(min(0.2, seconds))

    def _housekeeping(self, on_tick: Any) -> None:
        if self.health is not None:
            self.health.round(self.silent, time.time())
        try:
            self.tail_gaps()
            self.record_notes(time.time())
            self.liveness(time.monotonic(), time.time())
            self.notify(time.time())
        except AppendFailed as e:
            log.error("append failed, retried next round: %s", e)
        if on_tick is not None:
            on_tick()

    async def _consume(self, nc: Any, stop: Any, on_tick: Any) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        js = nc.jetstream()
        await ensure_stream(js, self.hc.stream)
        ack_wait = parse_duration(self.hc.ack_wait, "hub.ack_wait")
        self.consumer, me = self.identity()
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
                                ack_wait=ack_wait, max_ack_pending=self.hc.batch, max_deliver=-1, description=me)
        await self._claim(js, config, me)
        log.info("connected to NATS; consuming stream %s as %s", self.hc.stream, self.consumer)
        await self._rewind(js, config)
        psub = await js.pull_subscribe(f"{wire.PREFIX}.>", durable=self.consumer, stream=self.hc.stream,
                                       config=config)

        async def on_hb(msg: Any) -> None:
            host = msg.subject.rpartition(".")[2]
            if wire.is_host(host):
                self.heartbeat(host, msg.data or b"", time.monotonic())

        hb = await nc.subscribe(f"{wire.HEARTBEAT}.*", cb=on_hb)
        reconnects = nc.stats["reconnects"]
        try:
            while not stop.is_set():
                if nc.stats["reconnects"] != reconnects:  # what was in flight on the dropped connection
                    raise ConnectionError("reconnected")  # is pending: start over, rewinding in order
                now = time.time()
                nw = self.next_wake(now)
                wait = 1.0 if nw is None else max(0.05, min(1.0, nw - now))
                began = time.monotonic()
                try:
                    msgs = await psub.fetch(self.hc.batch, timeout=wait)
                except (asyncio.TimeoutError, TimeoutError):
                    msgs = []
                if not msgs:
                    self.drained_at = began
                if msgs:
                    await self._ingest(msgs)
                self._housekeeping(on_tick)
        finally:
            try:
                await hb.unsubscribe()
            except Exception:
                pass

    async def _rewind(self, js: Any, config: Any) -> None:
        """Before consuming: a durable consumer that still has messages delivered but unacked
        (fetched by a hub killed before its commit, or lost with a dropped connection) is
        recreated at its ack floor, so they come again at once and IN ORDER, before anything
        newer (otherwise the window serves newer rows first and each host's rows are folded
        out of order until ack_wait). Rows already committed come again as known ids (no-ops).
        A consumer with another ack policy (AckPolicy.ALL, where one ack covered rows never
        committed) is recreated the same way. A hub killed between the delete and the create
        finds no consumer: a new one delivers the whole stream again (known ids: no-ops)."""
        from nats.js.api import AckPolicy, DeliverPolicy
        from nats.js.errors import NotFoundError

        try:
            info = await js.consumer_info(self.hc.stream, self.consumer)
        except NotFoundError:
            return
        if not info.num_ack_pending and info.config.ack_policy == AckPolicy.EXPLICIT:
            return
        start = (info.ack_floor.stream_seq if info.ack_floor else 0) + 1
        await js.delete_consumer(self.hc.stream, self.consumer)
        config.deliver_policy, config.opt_start_seq = DeliverPolicy.BY_START_SEQUENCE, start
        log.info("consumer %s: %d unacked, redelivering from stream seq %d", self.consumer,
                 info.num_ack_pending or 0, start)

    async def _ingest(self, msgs: list[Any]) -> None:
        self.stats["received"] += len(msgs)
        self.stats["batches"] += 1
        origins, rejected = self.accept([(m.subject, m.headers, m.data) for m in msgs], time.monotonic(), time.time())
        try:
            self.commit(origins, time.time())
        except AppendFailed as e:
            self.stats["failed"] += 1
            log.error("append failed, %d messages left for redelivery: %s", len(msgs), e)
            self.last = store.last_seqs(self.olog.db)
            self.tips = store.tips(self.olog.db, self.last)
            self.chains = store.chains_by_recency(self.olog.db)
            for m in msgs:
                await m.nak(delay=1.0)
            return
        bad = set(rejected)  # every message acked by itself (AckPolicy.EXPLICIT): an ack never
        for i, m in enumerate(msgs[:-1]):  # covers a message this hub did not commit
            await (m.term() if i in bad else m.ack())
        try:  # the last one confirmed, so all are applied before the next fetch (max_ack_pending
            # = batch: otherwise that fetch would find the window full); refused ones are never retried
            await msgs[-1].ack_sync(timeout=2.0)
        except Exception as e:  # unconfirmed: redelivered after ack_wait, a no-op (known id)
            log.debug("ack not confirmed: %s", type(e).__name__)


def _hub_event(o: wire.Origin) -> Any:
    """``wire.to_hub``, and a row it cannot turn into an event (a bug met by a hostile payload)
    kept as a ``host.event``: a message that raised here came back at every redelivery and the
    hub consumed nothing after it, from any host."""
    try:
        return wire.to_hub(o)
    except Exception:
        log.exception("host %s seq %d: kept as host.event (could not be read as %r)", o.host, o.seq, o.type[:40])
        return HostEvent(host=o.host, kind=o.type, ref=o.subject[:200], seq=o.seq)


def _iso(t: float) -> str:
    from events.log import iso

    return iso(t)


def serve(cfg: Config, db: str, parents: bool = True) -> int:
    """Hold the hub's writer lock, consume until SIGTERM/SIGINT. Exit codes as `run`.
    ``parents`` False (the path was given: --db, $FLEETWATCH_DB, [store] path): a missing folder
    is refused, not made."""
    import signal
    import threading

    from watcher.runtime.notifier import Notifier
    from watcher.runtime.sdnotify import SystemdNotifier, status_line
    from watcher.runtime.signals import SignalRelay

    elog = EventLog(db, durability=cfg.store.durability, lock=True, parents=parents)  # WriterLocked: exit 3
    stop = threading.Event()
    sd = SystemdNotifier.from_env()
    hub = Hub(cfg, elog)
    hub.health = HealthFile(db, servers(hub.hc.nats), hub.silent_after)
    hub.w.notifier = Notifier(cfg)
    relay = SignalRelay({signal.SIGTERM: stop.set, signal.SIGINT: stop.set})  # not in the handler (runtime/signals.py)

    def on_tick() -> None:
        sd.tick_completed(time.monotonic())

    reason = "signal"
    try:
        hub.w.started(time.time())
        sd.ready()
        sd.status(status_line(hub.w.class_counts(), 0.0))
        log.info("hub: %d hosts known, %d agents", len(hub.last_seen) + len(hub.silent),
                 len(hub.w.proj["fleet"]["agents"]))
        asyncio.run(hub.run(stop, on_tick))
    finally:
        sd.stopping()
        relay.close()
        hub.w.notifier.close(5.0)
        try:
            hub.notify(time.time())  # record the last deliveries
        except Exception:
            log.exception("could not record the last deliveries")
        hub.w.stopped(time.time(), reason)
        elog.close()
    log.info("hub stopped (pid %d)", os.getpid())
    return 0
