"""Acknowledging from a shell or the phone page: which conditions a target names, and the events.

``resolve(log, state, target)`` takes a notice id (``n`` + 15 hex, from a push link, `tail` or
`status`) or a subject (``a7``, ``agent:a7``, ``run:T1``, ``mission:m1``) and returns the notice
and the condition ids it stands for: for a notice, its pushed conditions that are still open
(from its ``notice.sent`` / ``notice.escalated`` records); for a subject, that subject's open
pushed conditions. Anything else is :class:`UnknownTarget` (exit 2). Acks are events
(``notice.acked``, via ``cli`` or ``web``), so they show in `tail`, the board and `rebuild`.
``unchanged(state, cids, now, for_s)`` says which of them an ack would not change (already acked,
still in force, ending when this one would): `ack` records nothing for those.
"""
from __future__ import annotations

import glob
import os
import re
import uuid
from typing import Any

from events.errors import FleetwatchError
from events.timefmt import iso, parse_iso
from events.types import NoticeAcked, SilenceAdded

NOTICE_RE = re.compile(r"^n[0-9a-f]{15}$")
SNOOZE_S = 3600.0
SILENCE_S = 86400.0
AGAIN_S = 60.0   # a snooze this close to one already in force is the same request again


class UnknownTarget(FleetwatchError):
    """`ack` named no notice and no subject with an open pushed condition."""

    exit_code = 2


def _cid(key: str) -> str:
    """The condition id of a key (``subject|CLASS#n``, maybe ``@rev``; a subject may hold '@')."""
    cid, sep, rev = key.rpartition("@")
    return cid if sep and rev.isascii() and rev.isdigit() else key


def notice_keys(log: Any, notice: str) -> list[str] | None:
    """The condition ids a notice covered (None: no such notice in the log)."""
    if not NOTICE_RE.fullmatch(notice):
        return None
    found = None
    for rec in log.read(0, types=["notice.sent", "notice.escalated", "notice.failed", "notice.abandoned"],
                        subject=f"notice:{notice}"):
        ev = rec.event
        keys = list(getattr(ev, "keys", None) or getattr(ev, "conditions", None) or [])
        found = (found or []) + [_cid(k) for k in keys]
    return None if found is None else sorted(set(found))


def open_conditions(state: dict, cids: list[str]) -> list[str]:
    conds = state["conds"]
    return [c for c in cids if c in conds and conds[c]["cleared"] is None]


def subject_conditions(state: dict, subject: str) -> list[str]:
    """Open conditions of ``subject`` (a bare id means ``agent:<id>``), pushed ones first."""
    subj = subject if ":" in subject else f"agent:{subject}"
    conds = state["conds"]
    found = [cid for cid, c in conds.items() if c["subject"] == subj and c["cleared"] is None]
    return sorted(found, key=lambda cid: (conds[cid]["sent_rev"] < 0, cid))


def resolve(log: Any, state: dict, target: str) -> tuple[str, list[str]]:
    """(notice, condition ids) for ``target``; raises UnknownTarget naming what was looked for."""
    t = target.strip()
    if NOTICE_RE.fullmatch(t):
        keys = notice_keys(log, t)
        if keys is None:
            raise UnknownTarget(f"unknown notice {t!r}", op="ack", hint="notice ids are in push links and `tail`")
        cids = open_conditions(state, keys)
        if not cids:
            raise UnknownTarget(f"notice {t!r} has nothing open to acknowledge (already cleared)", op="ack")
        return t, cids
    if not t or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in t):  # a raw control character: type it escaped
        raise UnknownTarget(f"not a notice id or a subject: '{t}'", op="ack",  # escaped on print
                            hint="type the id as `status` prints it (escaped)")
    cids = subject_conditions(state, t)
    if not cids and "\\" in t:  # a subject typed as `tail`/`status` and the hint below print it (escaped)
        from projections.text import unescape

        raw = unescape(t)
        cids = subject_conditions(state, raw) if raw is not None and raw != t else []
    if not cids:
        subj = t if ":" in t else f"agent:{t}"
        near = sorted({c["subject"] for c in state["conds"].values() if c["cleared"] is None})[:8]
        hint = ("open: " + ", ".join(near)) if near else "nothing is open right now"
        raise UnknownTarget(f"nothing open to acknowledge for '{subj}'", op="ack", hint=hint)  # escaped on print
    notice = next((state["conds"][c].get("notice") for c in cids if state["conds"][c].get("notice")), None)
    return notice or ("n" + uuid.uuid4().hex[:15]), cids


def unchanged(state: dict, cids: list[str], now: float, for_s: float | None = None) -> list[str]:
    """The conditions of ``cids`` whose ack in force already says what this one would: acking
    them again records nothing. Without ``for_s``: acked until it clears. With it: a snooze in
    force that ends from ``AGAIN_S`` before to 1 s after ``now + for_s`` (the same request
    again: `ack --for 30m` run twice a few seconds apart, a double tap, a resubmitted form; the
    CLI and the phone page answer it alike). The notify projection keeps ``acked`` = the end
    (NEVER = until it clears)."""
    from projections.notify.policy import NEVER

    conds = state["conds"]
    if not for_s:
        return [c for c in cids if (a := conds[c].get("acked")) is not None and now < a and a >= NEVER]
    want = parse_iso(iso(now + for_s))
    return [c for c in cids if (a := conds[c].get("acked")) is not None and now < a
            and want - AGAIN_S <= a <= want + 1.0]


def ack(notice: str, cids: list[str], via: str, now: float, for_s: float | None = None,
        by: str | None = None) -> NoticeAcked:
    """The ``notice.acked`` event; ``by`` (who) defaults to the unix user from a shell and
    ``phone`` from the page (the page knows no person: the link's holder)."""
    if by is None:
        by = _user() if via == "cli" else "phone"
    return NoticeAcked(notice=notice, conditions=list(cids), via=via, until=iso(now + for_s) if for_s else "",
                       by=by[:64])


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):   # no passwd entry, no LOGNAME: the uid
        return str(os.getuid())


def silences_for(state: dict, cids: list[str], now: float, notice: str, for_s: float = SILENCE_S) -> list[SilenceAdded]:
    """One ``silence.added`` per subject of the conditions (the agent, the run, ...); the
    subject is glob-escaped, so an id holding ``*`` or ``[`` silences only itself."""
    subjects = sorted({c.rpartition("|")[0] for c in cids if "|" in c})
    return [SilenceAdded(silence=uuid.uuid4().hex[:8], subject_match=glob.escape(s), class_match=None,
                         until=iso(now + for_s),
                         reason=f"from the phone (notice {notice})") for s in subjects]
