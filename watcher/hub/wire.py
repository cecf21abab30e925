"""What travels between a host and the hub (pure: no I/O, no clock).

One host event = one JetStream message on ``fleetwatch.<host>.<type>``: the payload is the row's
``data`` bytes unchanged; headers carry the rest of the row (seq, id, time, subject, version, hash)
and the host's chain id (the hex of its seq-1 hash: a host whose log was recreated starts a new
chain, verified on its own). ``Nats-Msg-Id`` is ``<host>/<chain>/<seq>/<row hash>``: JetStream's
duplicate window is per stream, not per subject, and a host may read another's messages, so an id
another host could compute ahead (the event id) let it publish a host's next ids first and have the
stream drop that host's real rows as duplicates. A row's hash follows from its content and time:
nobody can name it before the row exists. The hub refuses a message whose ``Nats-Msg-Id`` does not
begin with its subject's host and the chain in its headers (:attr:`Reject.MSG_ID`), and does not rely
on the stream's dedupe at all: its own idempotence is per (host, chain, seq) (watcher/hub/hub.py).

At the hub a message becomes an :class:`Origin` (checked field by field; anything malformed is a
:class:`Reject` reason, never an exception) and then one hub event (:func:`to_hub`): identity
fields are prefixed ``<host>/`` so every projection sees ``vm1/a7`` as one agent of one fleet;
host-local types (notices, silences, watcher starts, unknown types) become ``host.event`` so the
hub's own notifier never folds another machine's deliveries.
"""
from __future__ import annotations

import re
import socket
from urllib.parse import quote, unquote
from enum import Enum
from typing import Any

import msgspec

from events.types import Unknown, decode_data
from events.types_hub import HostEvent

PREFIX = "fleetwatch"
HEARTBEAT = "fleetwatch-hb"          # core NATS (not stored): ``fleetwatch-hb.<host>``
NATS_MSG_ID = "Nats-Msg-Id"
STREAM_SUBJECTS = [f"{PREFIX}.>"]
MAX_PAYLOAD = 1 << 20                 # the stream's max_msg_size; a bigger row is not forwarded
ID_FIELDS = ("agent", "run", "mission", "scope", "group", "source")  # prefixed with "<host>/"
LOCAL_TYPES = ("notice.", "silence.", "watcher.", "host.")         # kept as host.event
H_HOST, H_CHAIN, H_SEQ, H_ID, H_TIME, H_TYPE, H_SUBJECT, H_VERSION, H_HASH = (
    "Fw-Host", "Fw-Chain", "Fw-Seq", "Fw-Id", "Fw-Time", "Fw-Type", "Fw-Subject", "Fw-Version", "Fw-Hash")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TYPE = re.compile(r"^[A-Za-z0-9_-]{1,40}(\.[A-Za-z0-9_-]{1,40}){0,4}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def host_name(configured: str = "", hostname: str | None = None) -> str:
    """The configured host, else the machine's hostname made a subject token (first label,
    anything outside ``[A-Za-z0-9_-]`` replaced by ``-``)."""
    if configured:
        return configured
    raw = (hostname if hostname is not None else socket.gethostname()).split(".")[0]
    tok = re.sub(r"[^A-Za-z0-9_-]", "-", raw)[:64].strip("-")
    return tok or "host"


def is_host(token: str) -> bool:
    return bool(_TOKEN.match(token))


def subject(host: str, type_: str) -> str:
    return f"{PREFIX}.{host}.{type_ if _TYPE.match(type_) else 'other'}"


def msg_id(host: str, chain: str, event_id: str) -> str:
    """The hub event id of a host row (the hub's own idempotence)."""
    return f"{host}/{chain}/{quote(event_id, safe='')}"


def nats_id(host: str, chain: str, seq: int, hash_: bytes) -> str:
    """The ``Nats-Msg-Id`` of a host row: unguessable before the row exists (module docstring)."""
    return f"{host}/{chain}/{seq}/{hash_.hex()}"


def named_host(hdrs: dict[str, str] | None) -> str:
    """The host a message's ``Nats-Msg-Id`` names ("" when none), for the refusal's words."""
    return str((hdrs or {}).get(NATS_MSG_ID, "")).split("/", 1)[0][:64]


def headers(host: str, chain: str, rec: Any) -> dict[str, str]:
    """The headers of one forwarded row (``rec``: an events.log.Recorded). Ids and subjects are
    percent-encoded: a newline in an agent id must not end a header line."""
    return {NATS_MSG_ID: nats_id(host, chain, rec.seq, rec.hash), H_HOST: host, H_CHAIN: chain,
            H_SEQ: str(rec.seq), H_ID: quote(rec.id, safe=""), H_TIME: quote(rec.time, safe=""),
            H_TYPE: quote(rec.type, safe=""),
            H_SUBJECT: quote(rec.subject, safe=""), H_VERSION: str(rec.version), H_HASH: rec.hash.hex()}


class Origin(msgspec.Struct, frozen=True):
    """One host row as the hub received it (kept verbatim in ``hub_origin``)."""

    host: str
    chain: str
    seq: int
    id: str
    time: str
    type: str
    subject: str
    version: int
    data: bytes
    hash: bytes

    @property
    def hub_id(self) -> str:
        """The id of its hub event: re-appending it is a no-op (exactly once at the hub)."""
        return msg_id(self.host, self.chain, self.id)


class Reject(str, Enum):
    """Why a message is not a host row (it is acked with ``term`` and counted, never retried)."""

    SUBJECT = "subject-not-fleetwatch.<host>.<type>"
    HEADERS = "missing-or-bad-headers"
    HOST_MISMATCH = "host-header-differs-from-subject"
    MSG_ID = "msg-id-names-another-host-or-chain"
    TOO_LARGE = "payload-too-large"
    NOT_JSON = "payload-not-a-json-object"
    CHAIN = "hash-does-not-follow-the-host-chain"
    CONFLICT = "seq-already-held-by-another-row"


def parse(subj: str, hdrs: dict[str, str] | None, payload: bytes) -> Origin | Reject:
    """A received message -> :class:`Origin`, or the reason it is not one (hostile input)."""
    parts = subj.split(".", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not is_host(parts[1]):
        return Reject.SUBJECT
    host = parts[1]
    h = hdrs or {}
    nid = h.get(NATS_MSG_ID)
    if nid is not None and not str(nid).startswith(f"{host}/"):
        return Reject.MSG_ID   # a poisoning attempt: it would have the stream drop another host's rows
    try:
        seq, version = int(h[H_SEQ]), int(h[H_VERSION])
        chain, hash_ = h[H_CHAIN], h[H_HASH]
        id_, time_, type_, subj_h = (unquote(h[k], errors="strict") for k in (H_ID, H_TIME, H_TYPE, H_SUBJECT))
    except (KeyError, ValueError, TypeError):
        return Reject.HEADERS
    if h.get(H_HOST) != host:
        return Reject.HOST_MISMATCH
    if (seq < 1 or seq >= 1 << 62 or version < 1 or version >= 1 << 62 or not _HEX.match(hash_)
            or not re.match(r"^[0-9a-f]{16}$", chain) or not 0 < len(id_) <= 200 or not 0 < len(time_) <= 40
            or not 0 < len(type_) <= 200 or len(subj_h) > 1000):
        return Reject.HEADERS
    if nid is not None and not str(nid).startswith(f"{host}/{chain}/"):
        return Reject.MSG_ID   # another chain's id: the same attempt within one host name
    if len(payload) > MAX_PAYLOAD:
        return Reject.TOO_LARGE
    if not payload.startswith(b"{"):
        return Reject.NOT_JSON
    return Origin(host, chain, seq, id_, time_, type_, subj_h, version, bytes(payload), bytes.fromhex(hash_))


def prefixed(ev: Any, host: str) -> Any:
    """``ev`` with every identity field (:data:`ID_FIELDS`) as ``<host>/<value>``."""
    fields = ev.__struct_fields__
    change = {f: f"{host}/{getattr(ev, f)}" for f in ID_FIELDS
              if f in fields and isinstance(getattr(ev, f), str) and getattr(ev, f)}
    return msgspec.structs.replace(ev, **change) if change else ev


def to_hub(o: Origin) -> Any:
    """The hub event for a host row: the same type with host-prefixed identities, or a
    ``host.event`` for host-local or undecodable rows (the row itself stays in hub_origin)."""
    ev: Any = None
    if not o.type.startswith(LOCAL_TYPES):
        try:
            ev = decode_data(o.type, o.data)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, RecursionError):
            ev = None   # RecursionError: a payload nested 1,000 deep (msgspec gives up by raising it)
    if ev is None or isinstance(ev, Unknown):
        return HostEvent(host=o.host, kind=o.type, ref=o.subject[:200], seq=o.seq)
    return prefixed(ev, o.host)


__all__ = ["HEARTBEAT", "ID_FIELDS", "LOCAL_TYPES", "MAX_PAYLOAD", "NATS_MSG_ID", "Origin", "PREFIX", "Reject",
           "STREAM_SUBJECTS", "headers", "host_name", "is_host", "msg_id", "named_host", "nats_id", "parse", "prefixed",
           "subject", "to_hub"]
