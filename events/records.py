"""The records of the log: :class:`Pending` (to append), :class:`Recorded` (read back), and
:class:`Damaged`, the event of a row that cannot be decoded (a reader reports it by seq and goes on).
Re-exported by ``events.log``."""
from __future__ import annotations

import os
from typing import Any

import msgspec

from events.timefmt import log_time, parse_iso
from events.types import data_dict


class Pending(msgspec.Struct, frozen=True):
    """An event to append. ``id`` makes it idempotent; ``expected_version`` guards the subject."""

    event: Any
    id: str | None = None
    expected_version: int | None = None
    subject: str | None = None  # override of event.subject
    time: float | None = None   # the event's own time (epoch s) instead of the batch's (the hub: its host's)


class Recorded(msgspec.Struct, frozen=True):
    seq: int
    id: str
    time: str
    type: str
    subject: str
    version: int
    event: Any  # an events.types Struct, or Unknown
    data: bytes
    hash: bytes

    def to_json(self) -> dict[str, Any]:
        """The contract's JSON shape (`tail --json`, `export`)."""
        if type(self.event) is Damaged:
            return damaged_json(self)
        return {"seq": self.seq, "id": self.id, "time": self.time, "type": self.type,
                "subject": self.subject, "version": self.version, "data": data_dict(self.data)}


class Damaged(msgspec.Struct, frozen=True):
    """The ``event`` of a row that cannot be decoded (``read(damaged="yield")``)."""

    problem: str


def damaged_json(rec: Recorded) -> dict[str, Any]:
    """The raw, marked export line of a damaged row: its columns as stored (``data`` as text when
    it is text, else hex), ``"damaged"`` saying why. Never raises."""
    da = rec.data
    raw = da if isinstance(da, str) else da.hex() if isinstance(da, bytes) else repr(da)
    return {"seq": rec.seq, "damaged": rec.event.problem if type(rec.event) is Damaged else "damaged",
            "raw": {"id": str(rec.id), "time": str(rec.time), "type": str(rec.type), "subject": str(rec.subject),
                    "version": rec.version if type(rec.version) is int else str(rec.version),
                    "data_text" if isinstance(da, str) else "data_hex": raw}}


def _writable(path: str) -> bool:
    """The file and its folder (where SQLite keeps -wal and -shm) are writable by this user."""
    return os.access(path, os.W_OK) and os.access(os.path.dirname(path) or ".", os.W_OK | os.X_OK)


class BadTime(ValueError):
    """A row's ``time`` that is not an ISO-8601 text: the folds parse it, so the row is damaged."""


def check_time(t: Any) -> None:
    """Raise :class:`BadTime` unless ``t`` parses as the folds parse it (events.timefmt.parse_iso
    and log_time)."""
    try:
        parse_iso(t)
        log_time(t)  # the report fold's read of iso's own shape
    except (ValueError, TypeError, AttributeError, OverflowError):
        raise BadTime(f"time is not ISO-8601: {str(t)[:40]!r}") from None


def _problem(da: Any, e: Exception | None) -> str:
    if type(e) is BadTime:
        return str(e)
    if type(da) is not bytes:
        return f"data is {type(da).__name__}, not a blob"
    return f"data does not decode: {type(e).__name__}: {str(e)[:120]}"


__all__ = ["BadTime", "Damaged", "Pending", "Recorded", "check_time", "damaged_json"]
