"""The forwarder: this host's committed events -> NATS JetStream, from inside `fleetwatch run`.

It runs in its own thread with its own asyncio loop and its own connection to the log, so the
tick never waits for the network. The local log is the buffer: the forwarder reads rows after
its position (``fw_position``, watcher/hub/store.py), publishes them in order (``batch`` at a
time, acks awaited together), and advances the position over the longest acknowledged prefix
only. After a crash, a NATS outage or a network cut it resumes from the recorded position:
at-least-once on the wire, exactly once at the hub (the hub event id; watcher/hub/hub.py); the
stream's ``Nats-Msg-Id`` dedupe only spares it copies (the id holds the row's hash: no other host
can name it first, watcher/hub/wire.py). An ack that calls a row never published before a
duplicate means another publisher used this host's ids: logged as an error (the hub says the gap).
The heartbeat carries the position and the chain (``{"seq", "chain"}``): the hub compares it
with what it received.

States it logs (transitions only, never content): connected, disconnected, stream created,
publish failed (with the seq it resumes from).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from events.log import EventLog
from watcher.config import Forward, parse_duration
from watcher.hub import store, wire

log = logging.getLogger("fleetwatch.forward")

ACK_TIMEOUT = 5.0            # s to wait for the stream's acks of one round
POLL = 0.05                  # s between looks at the log (PRAGMA data_version) while idle
POSITION_EVERY = 0.2         # s: the position is written at most this often (and at stop)
DUPLICATE_WINDOW = 20 * 60.0  # s: the stream's dedupe window when the forwarder creates it
MAX_AGE = 7 * 86400.0         # s: the stream keeps a week (a hub down longer must re-sync)
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)


def servers(urls: str | list[str]) -> list[str]:
    return [urls] if isinstance(urls, str) else list(urls)


def connect_options(urls: str | list[str], creds: str | None, name: str) -> dict[str, Any]:
    from watcher.config import expand

    opts: dict[str, Any] = {"servers": servers(urls), "name": name, "connect_timeout": 2,
                            "allow_reconnect": True, "max_reconnect_attempts": -1, "reconnect_time_wait": 0.5,
                            "ping_interval": 10, "max_outstanding_pings": 3}
    if creds:
        opts["user_credentials"] = expand(creds)

    async def quiet(e: Exception) -> None:  # nats-py prints tracebacks by default; we log states
        log.debug("nats: %s", type(e).__name__)

    opts["error_cb"] = quiet
    return opts


async def connect(urls: str | list[str], creds: str | None, name: str, timeout: float = 5.0,
                  once: bool = False) -> Any:
    """A connected nats-py client, or an exception within ``timeout`` s (nats-py alone would
    retry an unreachable server forever, and a stop could not end that). Once connected, nats-py
    reconnects by itself after a blip; the callers' loops handle everything longer. ``once``
    (a one-shot probe): each server is tried twice, so a refused connection is an answer at once
    (nats-py's NoServersError: refused, unreachable or silent) instead of retries until ``timeout``."""
    from nats.aio.client import Client

    nc = Client()
    opts = connect_options(urls, creds, name)
    if once:
        opts["max_reconnect_attempts"] = 1
    try:
        await asyncio.wait_for(nc.connect(**opts), timeout)
    except BaseException:
        try:
            await asyncio.wait_for(nc.close(), 1.0)
        except Exception:
            pass
        raise
    return nc


async def ensure_stream(js: Any, name: str) -> None:
    """Create the stream if missing (file storage, limits retention, a week, dedupe window);
    an existing stream is used as it is (its owner may have tuned it)."""
    from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    try:
        await js.stream_info(name)
        return
    except NotFoundError:
        pass
    await js.add_stream(StreamConfig(name=name, subjects=wire.STREAM_SUBJECTS, storage=StorageType.FILE,
                                     retention=RetentionPolicy.LIMITS, discard=DiscardPolicy.OLD,
                                     max_age=MAX_AGE, duplicate_window=DUPLICATE_WINDOW,
                                     max_msg_size=wire.MAX_PAYLOAD + 4096))
    log.info("stream %s created", name)


class Forwarder:
    """``start()`` spawns the thread; ``stop(timeout)`` lets it publish what is left for up to
    ``timeout`` s, records the position and joins. ``stats`` (read by tests and the bench):
    published, acked, position, head, rounds, failures, connected."""

    def __init__(self, fwd: Forward, db_path: str, *, durability: str = "full"):
        self.fwd = fwd
        self.db_path = db_path
        self.durability = durability
        self.host = wire.host_name(fwd.host)
        self.stream = fwd.stream
        self.batch = fwd.batch
        self.heartbeat = parse_duration(fwd.heartbeat, "forward.heartbeat")
        self.stats: dict[str, Any] = {"published": 0, "acked": 0, "position": 0, "head": 0, "rounds": 0,
                                      "failures": 0, "connected": False}
        self._stop = threading.Event()
        self._drain_until = 0.0
        self._thread: threading.Thread | None = None
        self._elog: EventLog | None = None  # the thread's own connection
        self.chain, self.pos = "", 0        # the acknowledged prefix: (chain id, last acked seq)
        self.stream_seq = 0                 # the highest stream seq an ack of ours named (this run)
        self.first_new = 0                  # rows above this seq were never published before (this run)

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> Forwarder:
        self._thread = threading.Thread(target=self._main, name="fleetwatch-forward", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._drain_until = time.monotonic() + timeout
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout + 3.0)

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except ImportError as e:
            log.error("[forward] needs the NATS client (%s): pip install 'fleetwatch[hub]'; events stay in "
                      "the local log and are forwarded once it is installed", e.name)
        except Exception:  # the watcher goes on without forwarding; the log keeps everything
            log.exception("forwarder stopped by an internal error; events stay in the local log")

    def _done(self) -> bool:
        """Stopped, and either everything committed is acknowledged or the drain time is up."""
        if not self._stop.is_set():
            return False
        if time.monotonic() >= self._drain_until:
            return True
        if self._elog is not None:
            self.stats["head"] = self._elog.head()[0]
        return self.stats["position"] >= self.stats["head"]

    # ---- the loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        elog = self._elog = EventLog(self.db_path, durability=self.durability, create=False)
        try:
            self.chain, self.pos = store.read_position(elog.db, self.stream, self.host)
            self.stats["position"] = self.first_new = self.pos
            attempt = 0
            while not self._done():
                try:
                    nc = await connect(self.fwd.nats, self.fwd.creds, f"fleetwatch-forward-{self.host}")
                except Exception as e:
                    await self._backoff(attempt, f"cannot connect to NATS ({type(e).__name__})")
                    attempt += 1
                    continue
                self.stats["connected"] = True
                log.info("connected to NATS; forwarding from seq %d", self.pos)
                try:
                    js = nc.jetstream(publish_async_max_pending=max(256, 2 * self.batch))
                    await ensure_stream(js, self.stream)
                    await self._lost(js)
                    await self._forward(elog, nc, js)
                    attempt = 0
                except Exception as e:
                    self.stats["failures"] += 1
                    await self._backoff(attempt, f"forwarding interrupted ({type(e).__name__}: {e}); "
                                                 f"resuming from seq {self.pos}")
                    attempt += 1
                finally:
                    self.stats["connected"] = False
                    try:
                        await asyncio.wait_for(nc.close(), 2.0)
                    except Exception:
                        pass
        finally:
            self._elog = None
            elog.close()

    async def _lost(self, js: Any) -> None:
        """A stream that came back with fewer messages than an ack of ours named (its server
        lost its store, or it was deleted and created again) lost rows we had counted as
        forwarded: forward the chain again from seq 1 (the stream and the hub drop what they
        still have by id). Without this a hub down during the loss never got them at all."""
        if not self.stream_seq:
            return
        info = await js.stream_info(self.stream)
        if info.state.last_seq < self.stream_seq:
            log.warning("stream %s holds fewer messages (last seq %d) than it acknowledged to us (%d): it lost "
                        "them; forwarding again from seq 1", self.stream, info.state.last_seq, self.stream_seq)
            self.pos = self.stats["position"] = 0
            self.stream_seq = info.state.last_seq

    async def _backoff(self, attempt: int, why: str) -> None:
        if attempt == 0:
            log.warning("%s", why)
        delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
        end = time.monotonic() + delay
        while time.monotonic() < end and not self._done():
            await asyncio.sleep(min(POLL, delay))

    async def _forward(self, elog: EventLog, nc: Any, js: Any) -> None:
        """Publish rounds until stopped, keeping ``self.chain``/``self.pos`` (the acknowledged
        prefix). Raises on a failed round (the caller reconnects and resumes from the position)."""
        dv = None
        last_hb = 0.0
        written = (self.chain, self.pos)
        last_write = time.monotonic()
        try:
            while not self._done():
                cur = store.chain_id(elog.db)
                if not cur:  # an empty log: nothing to forward yet
                    await asyncio.sleep(POLL)
                    continue
                if cur != self.chain:
                    if self.chain:
                        log.warning("the log's chain changed (recreated?): forwarding the new chain from seq 1")
                    self.chain, self.pos, self.first_new = cur, 0, 0
                    self.stats["position"] = 0
                self.stats["head"] = elog.head()[0]
                recs = list(elog.read(self.pos, limit=self.batch, decode=False))
                if recs:
                    await self._round(js, self.chain, recs)
                else:
                    now = time.monotonic()
                    if now - last_hb >= self.heartbeat:
                        await nc.publish(f"{wire.HEARTBEAT}.{self.host}",
                                         b'{"seq":%d,"chain":"%s"}' % (self.pos, self.chain.encode()))
                        last_hb = now
                    while not self._done() and elog.data_version() == dv and time.monotonic() - last_hb < self.heartbeat:
                        await asyncio.sleep(POLL)
                    dv = elog.data_version()
                if (self.chain, self.pos) != written and (time.monotonic() - last_write >= POSITION_EVERY
                                                          or self._done()):
                    store.write_position(elog.db, self.stream, self.host, self.chain, self.pos)
                    written, last_write = (self.chain, self.pos), time.monotonic()
        finally:
            if (self.chain, self.pos) != written and self.chain:
                store.write_position(elog.db, self.stream, self.host, self.chain, self.pos)

    async def _round(self, js: Any, chain: str, recs: list[Any]) -> None:
        """Publish ``recs`` in order, await their acks; the position advances over the
        acknowledged prefix. A row too large for the stream is skipped with a warning (it stays
        in the local log)."""
        self.stats["rounds"] += 1
        futs: list[Any] = []
        for r in recs:
            if len(r.data) > wire.MAX_PAYLOAD:
                log.warning("seq %d is larger than %d bytes: not forwarded", r.seq, wire.MAX_PAYLOAD)
                futs.append(None)
                continue
            futs.append(await js.publish_async(wire.subject(self.host, r.type), r.data,
                                               headers=wire.headers(self.host, chain, r)))
            self.stats["published"] += 1
        pending = [f for f in futs if f is not None]
        if pending:
            await asyncio.wait(pending, timeout=ACK_TIMEOUT)
        failed, pos = None, self.pos
        for r, f in zip(recs, futs):
            if f is not None and not (f.done() and not f.cancelled() and f.exception() is None):
                failed = r.seq
                break
            pos = r.seq
            if f is not None:
                self.stats["acked"] += 1
                ack = f.result()
                self.stream_seq = max(self.stream_seq, getattr(ack, "seq", 0) or 0)
                if getattr(ack, "duplicate", False) and r.seq > self.first_new:
                    self._stolen(r.seq)
        for f in pending:
            if not f.done():
                f.cancel()
        self.pos = self.stats["position"] = pos
        if failed is not None:
            raise ConnectionError(f"no stream ack for seq {failed}")


    def _stolen(self, seq: int) -> None:
        """The stream called a row it never had from us a duplicate: a message with its id came
        from elsewhere (with today's ids, the row's hash, only a replay of our own can)."""
        self.stats["stolen"] = self.stats.get("stolen", 0) + 1
        if self.stats["stolen"] == 1:
            log.error("the stream dropped seq %d as a duplicate of a message this host never sent: another "
                      "publisher uses this host's message ids; the hub says the gap", seq)


def start(cfg: Any, db_path: str) -> Forwarder | None:
    """The hook for `fleetwatch run`: a started forwarder when ``[forward]`` is set, else None."""
    if cfg.forward is None:
        return None
    return Forwarder(cfg.forward, db_path, durability=cfg.store.durability).start()
