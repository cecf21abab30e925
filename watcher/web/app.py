"""The WSGI app (werkzeug): the notice page, the phone fleet page and three POST actions.

Routes (``notice`` = ``n`` + 15 hex; ``t`` = the signed token of ``watcher.runtime.links``):
- ``GET /n/<notice>?t=`` — the notice's items with Acknowledge / Snooze 1h / Silence agent 1d;
- ``GET /n/<notice>/fleet?t=`` — what needs you, then the rest by class;
- ``POST /n/<notice>/ack|snooze|silence`` (form field or query ``t``; ``item``: one condition's
  seq in base 36, else all of the notice's) — appends ``notice.acked`` (via web; snooze: until
  now + 1 h) or one ``silence.added`` per subject (1 day), then 303 back to the page, whose
  banner says what was recorded, or why nothing was (``done``: a ``DONE`` or ``REFUSED`` key of
  ``pages``); a tap that changes nothing (``_not_yet``, ``_silenced``: already acked until it
  clears, or snoozed / silenced within ``AGAIN_S`` of the same) records nothing and says so.
  Other methods: 405. ``GET /healthz``: ``ok``.
- A notice's conditions are those its link names (``c``, signed with the token: known from the
  first tap) and those its ``notice.sent`` records name; an action is recorded whatever the
  notice's bookkeeping state (the ack stops its escalation even before ``notice.sent``).
- An expired link answers 410 with the way on (a fresh push's link, `fleetwatch ack` on the host).
Invariants: the token is checked (against the key file as it is now: deleting it revokes every
link at once, no restart) before anything is read or written, and a request without a
valid, unexpired token for exactly this notice gets 403 and changes nothing; bodies are capped
(16 KiB); the token is never logged (no access log); events are appended through SQLite's own
locking (the watcher folds them on its next tick), so they show in `tail`, the board and
`rebuild`. One EventLog and one Projections per app, used under a lock (one request at a time
touches the store).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable
from urllib.parse import quote, urlsplit

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from events.log import EventLog
from projections.notify.msg import bucket
from projections.report.view import today_line
from projections.present.views import active_silences, handled, handled_words
from projections.fleet.waiting import words
from watcher.config import Config
from watcher.runtime.acks import (AGAIN_S, SILENCE_S, SNOOZE_S, ack, notice_keys, open_conditions, silences_for,
                                  unchanged)
from watcher.runtime.links import CurrentKey, b36, check, cond_seq, expired, key_path, parse_items, public_base
from watcher.web import pages


log = logging.getLogger("fleetwatch.web")
MAX_BODY = 16 * 1024
ACTIONS = ("ack", "snooze", "silence")


class WebApp:
    """``WebApp(cfg, db)`` is a WSGI callable. ``clock``: wall time (a virtual one in tests)."""

    def __init__(self, cfg: Config, db: str, *, clock: Callable[[], float] = time.time):
        self.cfg = cfg
        self.db = db
        self.clock = clock
        # the path public_url puts before /n/ (behind a reverse proxy mounted at /fleet: "/fleet"):
        # the page's forms, links and redirects go through the proxy as the push's link does
        self.base = quote(urlsplit(public_base(cfg)).path.rstrip("/"), safe="/")
        self.key_file = key_path(cfg)
        self._key = CurrentKey(self.key_file)
        if self._key.get() is None and self._key.problem is not None:
            raise self._key.problem   # at start a bad key is the caller's error (as before)
        self.url_map = Map([
            Rule("/n/<notice>", endpoint="page", methods=["GET"]),
            Rule("/n/<notice>/fleet", endpoint="fleet", methods=["GET"]),
            Rule("/n/<notice>/<action>", endpoint="act", methods=["POST"]),
            Rule("/healthz", endpoint="health", methods=["GET"]),
        ], strict_slashes=False)
        self._lock = threading.Lock()
        self._log: EventLog | None = None
        self._proj: Any = None

    # ---- the store (under the lock) ---------------------------------------------------------
    def _states(self) -> tuple[EventLog, dict[str, Any]]:
        from watcher.runtime.state import Projections

        if self._log is None:
            self._log = EventLog(self.db, create=False)
            self._proj = Projections.load(self._log)
        self._proj.catch_up(self._log)
        return self._log, self._proj.states

    def _current_key(self) -> bytes | None:
        """The key as the file holds it now (links.CurrentKey: deleting or replacing it revokes
        every link at once; the watcher's next push is signed with the new one)."""
        seen = self._key.changes
        key = self._key.get()
        if self._key.changes != seen:
            if key is None:
                log.warning("web: every link refused: %s", self._key.problem)
            else:
                log.warning("web: the key file changed: links signed with the old key are refused")
        return key

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    # ---- WSGI -------------------------------------------------------------------------------
    def __call__(self, environ: dict, start_response: Callable) -> Any:
        req = Request(environ)
        req.max_content_length = MAX_BODY
        req.max_form_memory_size = MAX_BODY
        try:
            resp = self.dispatch(req)
        except HTTPException as e:
            resp = self._html(e.code or 500, pages.plain(e.code or 500, e.name))
            if isinstance(e, MethodNotAllowed):
                resp.headers["Allow"] = ", ".join(e.valid_methods or [])
        except Exception:
            log.exception("web: internal error")
            resp = self._html(500, pages.plain(500, "internal error"))
        return resp(environ, start_response)

    def _html(self, code: int, body: str) -> Response:
        r = Response(body, status=code, mimetype="text/html")
        r.headers.update(pages.HEADERS)
        return r

    def _forbidden(self) -> Response:
        return self._html(403, pages.plain(403, "This link is not valid or has expired. "
                                                "Open the newest push, or run `fleetwatch ack` on the host."))

    def _expired(self, notice: str) -> Response:
        return self._html(410, pages.expired(notice))

    def dispatch(self, req: Request) -> Response:
        adapter = self.url_map.bind_to_environ(req.environ)
        endpoint, args = adapter.match()
        if endpoint == "health":
            return Response("ok\n", mimetype="text/plain")
        notice = args["notice"]
        post = req.method == "POST"
        token = (req.form.get("t") if post else None) or req.args.get("t")
        items = (req.form.get("c") if post else None) or req.args.get("c") or ""
        now = self.clock()
        key = self._current_key()
        if key is None or not check(key, notice, token, now):
            return self._expired(notice) if key is not None and expired(key, notice, token, now) \
                else self._forbidden()
        if items and not parse_items(key, notice, items):
            items = ""   # a c whose MAC does not hold is ignored: the notice's own records count
        link = f"t={quote(token or '')}" + (f"&c={items}" if items else "")
        if endpoint == "act":
            if args["action"] not in ACTIONS:
                raise NotFound()
            item = (req.form.get("item") if post else None) or req.args.get("item") or ""
            return self._act(notice, link, parse_items(key, notice, items), item, args["action"], now)
        with self._lock:
            elog, states = self._states()
            if endpoint == "fleet":
                back = f"{self.base}/n/{notice}?{link}"
                today = today_line(states["report"], now) if "report" in states else ""
                from projections.present.hub import hub_line
                from watcher.hub.health import view

                hub = view(self.db, now)  # at a hub: its own health, stale data said
                return self._html(200, pages.fleet_page(states, now, back, today, hub_line(hub) if hub else "",
                                                        bool(hub and hub["stale"])))
            shown = self._items(states, self._cids(elog, states, notice, parse_items(key, notice, items)), now)
        done = req.args.get("done", "")
        return self._html(200, pages.notice_page(notice, token or "", shown, now, done, self.base, items))

    def _cids(self, elog: EventLog, states: dict[str, Any], notice: str, seqs: list[int]) -> list[str]:
        """The notice's condition ids: those its link names (by seq) and its notice.sent's."""
        cids = set(notice_keys(elog, notice) or [])
        want = set(seqs)
        if want:
            cids.update(cid for cid in states["notify"]["conds"] if cond_seq(cid) in want)
        return sorted(cids)

    def _items(self, states: dict[str, Any], cids: list[str], now: float) -> list[dict]:
        st = states["notify"]
        conds = st["conds"]
        silences = active_silences(st, now)
        out: list[dict[str, Any]] = []   # one row of the notice page per condition
        for cid in cids:
            c = conds.get(cid)
            seq = cond_seq(cid)
            if c is None:
                subj, _, rest = cid.rpartition("|")
                out.append({"cls": rest.partition("#")[0], "name": subj.partition(":")[2], "since": now,
                            "text": "", "status": "resolved", "item": ""})
                continue
            if c["cleared"] is not None:
                status = "cleared"
            else:
                status = handled_words(handled(c, silences, now), now) or "open"
            out.append({"cls": c["cls"], "name": c["name"], "since": c["since"],
                        "text": words(c.get("wait")) or c["text"], "task": c.get("task") or "", "status": status,
                        "item": _b36(seq) if seq is not None and c["cleared"] is None else ""})
        # the push's order (urgency group, then when, then name), the open before the handled,
        # the cleared last
        done = ("cleared", "resolved")
        out.sort(key=lambda it: (bucket(it["cls"])[0], (it["status"] != "open") + (it["status"] in done),
                                 it["since"], str(it["name"])))
        return out

    def _act(self, notice: str, link: str, seqs: list[int], item: str, action: str, now: float) -> Response:
        """Record the tap, or say why nothing was recorded (never a banner without an event)."""
        with self._lock:
            elog, states = self._states()
            st = states["notify"]
            keys = self._cids(elog, states, notice, seqs)
            if item:
                keys = [k for k in keys if _b36(cond_seq(k) or 0) == item]
            cids = open_conditions(st, keys)
            if not cids:
                evs: list[Any] = []
                done = "nothing-open" if keys else "unknown"
            elif action == "silence":
                evs = [s for s in silences_for(st, cids, now, notice, SILENCE_S)
                       if not _silenced(st, s.subject_match, now + SILENCE_S - AGAIN_S)]
                done = action if evs else "already"
            else:
                todo = _not_yet(st, cids, now, SNOOZE_S if action == "snooze" else None)
                evs = [ack(notice, todo, "web", now, SNOOZE_S if action == "snooze" else None)] if todo else []
                done = action if evs else "already"
            if evs:
                elog.append(evs, now)
                self._proj.catch_up(elog)
        log.info("web: %s on notice %s (%d event(s))", action, notice, len(evs))
        r = Response(status=303)
        r.headers["Location"] = f"{self.base}/n/{notice}?{link}&done={done}"
        r.headers.update(pages.HEADERS)
        return r


def _not_yet(st: dict, cids: list[str], now: float, for_s: float | None) -> list[str]:
    """The conditions a tap would change (``acks.unchanged``, the rule `fleetwatch ack` uses):
    Acknowledge on what is acked until it clears, or Snooze again within ``AGAIN_S`` of the same
    snooze (a double tap, a resubmitted form, a retried POST) records nothing."""
    same = set(unchanged(st, cids, now, for_s))
    return [c for c in cids if c not in same]


def _b36(n: int) -> str:
    return b36(n) if n > 0 else ""


def _silenced(st: dict, subject_match: str | None, until: float) -> bool:
    """A silence of exactly this subject (any class) in force until at least ``until``."""
    return any(s["subject"] == subject_match and not s["cls"] and s["until"] >= until
               for s in st["silences"].values())
