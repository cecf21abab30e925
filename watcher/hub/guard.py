"""What keeps one host from speaking for another at the hub (mixed into watcher.hub.hub.Hub).

- A message on ``fleetwatch.<host>.*`` whose ``Nats-Msg-Id`` names another host or chain is refused
  (watcher.hub.wire.parse) and said here: an error line and one ``host.refused`` per host and
  reason per run (:meth:`Guard._refused`).
- A hole in a host's chain is said once (:meth:`Guard._gap`: a warning and a ``host.gap``, id
  ``hub-gap:<host>/<chain>/<first>``): found when rows arrive past it, or (:meth:`Guard.tail_gaps`)
  when the host's heartbeat, received before a fetch that found the stream drained, names a seq
  beyond the hub's last row of that chain.
- The hub's durable consumer (:meth:`Guard.identity`) is its own by default, and its description
  names its owner; :meth:`Guard._claim` refuses one owned by another hub (``ConsumerTaken``).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from events.errors import AppendFailed
from events.log import Pending
from events.types_hub import HostGap, HostRefused, HubConsumerTaken
from watcher.hub import store, wire

if TYPE_CHECKING:
    import apsw

    from watcher.config import Hub as HubConfig
    from watcher.runtime.loop import Watcher

log = logging.getLogger("fleetwatch.hub")

OWNER = "fleetwatch hub "   # a consumer's description: "fleetwatch hub <host> log <chain>"


class ConsumerTaken(Exception):
    """The durable consumer this hub would use is owned by another hub (its description)."""

    def __init__(self, consumer: str, owner: str):
        super().__init__(f"consumer {consumer} belongs to another hub ({owner})")
        self.consumer, self.owner = consumer, owner


class _Log(Protocol):
    """What the guard reads of the hub's log (watcher.hub.hub.OriginLog): its connection."""

    @property
    def db(self) -> apsw.Connection: ...


class Guard:
    """State it expects on ``self`` (set by the Hub, declared here): ``w`` (the Watcher),
    ``olog``, ``hc``, ``last``, ``stats``, ``notes``, ``_noted``, ``hb``, ``drained_at``,
    ``consumer``, ``seen``."""

    w: Watcher
    olog: _Log
    hc: HubConfig
    last: dict[tuple[str, str], int]                # (host, chain) -> the hub's last seq of it
    stats: dict[str, int]
    notes: list[Pending]                            # host.gap / host.refused not recorded yet
    _noted: set[tuple[object, ...]]                 # gaps, refusals and taken consumers said once
    hb: dict[str, tuple[str, int, float]]           # host -> (chain, seq, mono) of its last heartbeat
    drained_at: float
    consumer: str

    def seen(self, host: str, mono: float, now: float) -> None:
        """``host`` was heard from at ``mono`` (monotonic) and ``now`` (wall clock)."""
        raise NotImplementedError

    def _gap(self, host: str, chain: str, first: int, last: int, why: str) -> None:
        """Say a hole in ``host``'s chain once: logged, and a ``host.gap`` with the next commit."""
        if (host, chain, first) in self._noted:
            return
        self._noted.add((host, chain, first))
        self.stats["gaps"] += 1
        log.warning("host %s: seqs %d..%d never received (%s)", host, first, last, why)
        self.notes.append(Pending(HostGap(host=host, chain=chain, first=first, last=last),
                                  id=f"hub-gap:{host}/{chain}/{first}"))

    def _refused(self, host: str, why: wire.Reject, hdrs: dict | None) -> None:
        """A message on ``host``'s subject speaking for another host or chain: said once per host
        and reason (an error line and a ``host.refused``), counted always."""
        self.stats["refused_other"] += 1
        if not wire.is_host(host) or ("refused", host, why) in self._noted:
            return
        self._noted.add(("refused", host, why))
        names = wire.named_host(hdrs)
        log.error("host %s published a message that speaks for %s (%s): refused; its NATS credentials are used "
                  "to silence another host (revoke them; further ones are counted)", host, names or "?", why.value)
        self.notes.append(Pending(HostRefused(host=host, why=why.value, names=names if wire.is_host(names) else "")))

    def heartbeat(self, host: str, payload: bytes, mono: float) -> None:
        """A host's heartbeat: it is alive, and its forwarder's position (``{"seq", "chain"}``)."""
        self.seen(host, mono, time.time())
        try:
            doc = msgspec.json.decode(payload[:512])
            chain, seq = doc.get("chain"), doc.get("seq")
        except (msgspec.DecodeError, AttributeError):
            return
        if isinstance(chain, str) and wire.is_host(chain) and isinstance(seq, int) and 0 < seq < 1 << 62:
            self.hb[host] = (chain, seq, mono)

    def tail_gaps(self) -> None:
        """A host whose heartbeat (received before the last empty fetch began: the stream was
        drained since) names a seq beyond the hub's last row of that chain lost those rows."""
        for host, (chain, seq, at) in list(self.hb.items()):
            last = self.last.get((host, chain), 0)
            if at < self.drained_at and seq > last:
                self._gap(host, chain, last + 1, seq, f"the host forwarded up to seq {seq}; the stream never "
                                                      "delivered them")

    def record_notes(self, now: float) -> int:
        """Append the gaps and refusals found (kept for the next round when the append fails)."""
        if not self.notes:
            return 0
        notes, self.notes = self.notes, []
        try:
            return self.w.commit(notes, now)
        except AppendFailed:
            self.notes = notes + self.notes
            raise

    def identity(self) -> tuple[str, str]:
        """(the consumer this hub uses, the description that names this hub as its owner). Unset
        ``[hub] consumer``: one per hub, from its host name and its log's chain id (a log that is
        still empty gets its ``watcher.started`` first)."""
        chain = store.chain_id(self.olog.db)
        if not chain:
            self.w.started(time.time())
            chain = store.chain_id(self.olog.db)
        host = wire.host_name("")[:32]
        return self.hc.consumer or f"fleetwatch-hub-{host}-{chain}", f"{OWNER}{host} log {chain}"

    async def _claim(self, js: Any, config: Any, me: str) -> None:
        """Refuse a consumer another hub owns (ConsumerTaken); one of ours without an owner (made
        by an older hub) is marked ours."""
        from nats.js.errors import NotFoundError

        try:
            info = await js.consumer_info(self.hc.stream, self.consumer)
        except NotFoundError:
            return
        owner = info.config.description or ""
        if owner.startswith(OWNER) and owner != me:
            raise ConsumerTaken(self.consumer, owner)
        if owner != me:
            info.config.description = me
            await js.add_consumer(self.hc.stream, info.config)

    def _taken(self, e: ConsumerTaken) -> None:
        self.stats["consumer_taken"] += 1
        if ("taken", e.consumer) in self._noted:
            return
        self._noted.add(("taken", e.consumer))
        log.error("%s: two hubs on one consumer each get part of the stream; this hub does not consume. Give "
                  "each hub its own [hub] consumer (unset: one per hub) and restart it", e)
        try:
            self.w.commit([HubConsumerTaken(consumer=e.consumer, owner=e.owner[:200])], time.time())
        except AppendFailed:
            self._noted.discard(("taken", e.consumer))

