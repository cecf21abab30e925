"""The notification edge: runs the pure plan each tick and delivers with apprise in a worker.

``Notifier(cfg).step(states, now)`` harvests finished deliveries (as ``notice.sent`` /
``notice.failed`` / ``notice.abandoned`` / ``notice.escalated`` / ``agent.nudged`` events for the
loop to append), plans with ``projections.notify.plan.plan`` and hands new messages and nudges to
one worker thread. The tick never waits for the network.

Invariants
- A notice handed to the worker stays "in flight" (never planned again) until the state folded
  from the log shows its outcome; so a notice is sent once unless the process dies between a
  successful send and its record (then that one message may repeat once after a restart).
- Secrets never leave: apprise's logger is pinned to WARNING and filtered, error texts are
  redacted (URLs and every component of every configured URL: ``urls``, routes,
  ``escalate_urls``, the apprise ``config`` file, the heartbeat URL), messages carry no ``dod``
  text.
- The planner's clock never steps back: :class:`PlanClock` is the wall clock, but never less
  than the last value plus the monotonic time since (a wall clock stepped back 1 h delays no
  urgent push beyond ``group_wait``); it rejoins the wall clock once nothing in the state is
  newer than it.
- With ``[web]``, every push body ends with one signed link to its phone page
  (``watcher.runtime.links``; it names the push's conditions, so the page shows them before
  ``notice.sent`` is recorded), and an ntfy destination gets action buttons (Acknowledge,
  Snooze 1h, Open) on the page's own signed endpoints; with ``heartbeat_url``, a GET every
  ``heartbeat_every`` while ticks run (its own thread: a slow push never delays it, a dead
  watcher sends none).
- After the last retry a notice is abandoned and written to the service log (WARNING) as the
  last-resort local channel. A configured URL apprise cannot use is logged (WARNING, naming the
  key and why) and recorded once as ``source.failed`` of source ``notify-urls``.
"""
from __future__ import annotations

import logging
import queue
import subprocess
import threading
import time
import urllib.request
from typing import Any, Callable

import msgspec

from events.log import iso
from events.types import (AgentNudged, NoticeAbandoned, NoticeEscalated, NoticeFailed, NoticeSent, SourceFailed,
                          SourceRecovered)
from projections.notify.fold import Policy, redact, retry_delay
from projections.notify.plan import Message, NudgeAction, nudges, plan
from projections.notify.quiet import quiet_until
from watcher.config import Config, parse_duration
from watcher.runtime.deliver import (  # noqa: F401  (re-exported: older imports)
    PINNED_LOGGERS, Deliverer, Outcome, _RedactFilter, all_secrets, pin_apprise_logger, secrets_of, url_problems)

log = logging.getLogger("fleetwatch.notify")
NUDGE_TIMEOUT = 10.0
URLS_SOURCE = "notify-urls"     # the source.failed name for unusable notify URLs


# the Policy fields made from a key of another form or section (the rest: same_named)
_DERIVED = frozenset(("retry", "escalate_urls", "routes", "claims_judged", "tags"))


def same_named(cfg: Config) -> dict[str, Any]:
    """Every ``[notify]`` key the ``Policy`` holds under the same name, as the Policy holds it
    (a duration in seconds): a new notify option is its ``Notify`` key and its ``Policy`` field."""
    n, out = cfg.notify, {}
    for f in msgspec.structs.fields(Policy):
        if f.name in _DERIVED or f.name not in n.__struct_fields__:
            continue
        v = getattr(n, f.name)
        dur = f.type is float and isinstance(v, (str, int)) and not isinstance(v, bool)   # a Dur key
        out[f.name] = cfg.dur(f"notify.{f.name}") if dur else v
    return out


def policy_from_config(cfg: Config) -> Policy:
    n, g = cfg.notify, cfg.nudge
    return Policy(
        **same_named(cfg), tags=dict(n.tags),
        retry=tuple(parse_duration(v, f"notify.retry[{i}]") for i, v in enumerate(n.retry)),
        nudge_enabled=g.enabled, nudge_max=g.max_per_stall, nudge_after=cfg.dur("nudge.after"),
        nudge_gap=cfg.dur("nudge.gap"), nudge_needs_target=any("{target}" in a for a in g.argv),
        escalate_urls=bool(n.escalate_urls), routes=tuple(dict(r.match) for r in n.routes),
        claims_judged=bool(cfg.dod.run_checks or cfg.dod.verifier))


def quiet_zone(cfg: Config):
    """The tzinfo of ``quiet_tz`` (None = the system zone)."""
    if not cfg.notify.quiet_tz:
        return None
    import zoneinfo

    return zoneinfo.ZoneInfo(cfg.notify.quiet_tz)


class PlanClock:
    """Wall-clock time for the planner that never steps back (see the module invariants)."""

    TOLERANCE = 0.5   # NTP slewing is not a step: below this the wall clock is taken as it is

    def __init__(self, mono: Callable[[], float] = time.monotonic):
        self.mono = mono
        self._last: tuple[float, float] | None = None   # (plan time, monotonic) of the last call

    def __call__(self, wall: float, newest: Callable[[], float] | None = None) -> float:
        m = self.mono()
        t = wall
        if self._last is not None:
            floor = self._last[0] + max(0.0, m - self._last[1])
            if floor > wall + self.TOLERANCE and (newest is None or newest() > wall):
                t = floor   # the wall clock stepped back: keep going from where we were
        self._last = (t, m)
        return t


def newest_time(st: dict[str, Any]) -> float:
    """The latest event time the notify state holds (what a stepped-back clock must not undercut)."""
    best = max(st["last"].values(), default=0.0)
    for c in st["conds"].values():
        best = max(best, c["since"], c["changed"], c["sent_at"] or 0.0, c["cleared"] or 0.0)
    for v in st["silences"].values():
        best = max(best, v.get("at", 0.0))
    return best


class _Job(msgspec.Struct):
    kind: str                       # "notice" | "nudge"
    msg: Message | None = None
    nudge: NudgeAction | None = None
    outcome: Outcome | None = None
    body: str = ""
    actions: str = ""               # ntfy buttons (deliver.ntfy_actions), with [web]


class Notifier:
    """Per tick: ``step(states, now) -> events``; ``next_wake``; ``close(timeout)``.

    ``mono``: the monotonic clock (a virtual one in tests); ``heartbeat``: replace the GET (tests)."""

    def __init__(self, cfg: Config, *, wake: Any = None, mono: Callable[[], float] = time.monotonic,
                 head_label: Callable[[], str] | None = None):
        self.cfg = cfg
        self.head_label = head_label     # the log's head as SEQ:HASH8 (called in the tick thread)
        self.policy = policy_from_config(cfg)
        n = cfg.notify
        self.enabled = bool(n.urls or n.config or any(r.urls for r in n.routes))
        self.secrets = all_secrets(cfg) if (self.enabled or n.heartbeat_url) else ()
        pin_apprise_logger(self.secrets)
        self.wake = wake                 # optional callable: wakes the loop when a job finishes
        self.mono = mono
        self.clock = PlanClock(mono)
        self.tz = quiet_zone(cfg)
        self._todo: queue.Queue[_Job | None] = queue.Queue()
        self._done: queue.Queue[_Job] = queue.Queue()
        self._inflight: dict[str, Message] = {}          # notice id -> message (until folded back)
        self._nudging: dict[tuple[str, int, int], NudgeAction] = {}
        self._marks: dict[str, tuple[float, float]] = {}  # agent -> wall (from, until) its nudge keys were sent
        self._busy = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._key = None   # links.CurrentKey: each push signs with the key file as it is now
        if cfg.web is not None:  # a bad key costs the links, never the pushes
            from watcher.runtime.links import CurrentKey, key_path

            self._key = CurrentKey(key_path(cfg))
            self._key_now()
        self.problems = url_problems(cfg) if self.enabled else []
        for p in self.problems:
            log.warning("notify: %s", p)
        self._problems_recorded = False
        self.hb_every = cfg.dur("notify.heartbeat_every")
        self._hb_next = mono()            # the first heartbeat goes with the first tick
        self._hb_thread: threading.Thread | None = None
        self.hb_ok = self.hb_failed = 0
        self._hb_failing = False
        if not self.enabled:
            log.info("notify: no [notify] urls or config: notifications are off")

    # ---- the tick side --------------------------------------------------------------------
    def _clock(self, st: dict[str, Any], now: float) -> tuple[float, float | None]:
        t = self.clock(now, lambda: newest_time(st))
        return t, quiet_until(t, self.cfg.notify.quiet, self.tz) if self.cfg.notify.quiet else None

    def step(self, states: dict[str, Any], now: float) -> list[Any]:
        st = states["notify"]
        t, quiet_end = self._clock(st, now)
        out = self._harvest(t)
        self._release(st)
        if self._closed:  # after close(): only record what finished, start nothing new
            return out
        out += self._url_record(states)
        self._heartbeat()
        if self.enabled:
            p = plan(st, t, self.policy, inflight=self._inflight_keys(), quiet_end=quiet_end)
            out += p.record
            for m in p.send:
                self._inflight[m.notice] = m
                self._submit(_Job("notice", msg=m, body=self._body(m, t), actions=self._actions(m, t)))
        acts, _ = nudges(st, t, self.policy, _targets(states), set(self._nudging))
        for a in acts:
            self._nudging[(a.agent, a.stall_seq, a.attempt)] = a
            self._submit(_Job("nudge", nudge=a))
        return out

    def next_wake(self, states: dict[str, Any], now: float) -> float | None:
        """The next wall-clock time a step could have something to do."""
        st = states["notify"]
        t, quiet_end = self._clock(st, now)
        wakes = []
        if self.enabled:
            w = plan(st, t, self.policy, inflight=self._inflight_keys(), quiet_end=quiet_end).next_wake
            if w is not None:
                wakes.append(w)
        _, w = nudges(st, t, self.policy, _targets(states), set(self._nudging))
        if w is not None:
            wakes.append(w)
        if self._inflight or self._nudging:
            wakes.append(t + 0.25)  # record outcomes promptly
        if self.cfg.notify.heartbeat_url:
            wakes.append(t + max(0.0, self._hb_next - self.mono()))
        return min(wakes) - (t - now) if wakes else None

    def _body(self, m: Message, now: float) -> str:
        """The message body; then ``log head SEQ:HASH8`` when the notifier knows the log (the
        head anchored outside the log file: a cut tail shows against the last push), and the
        signed link to its phone page when ``[web]`` is set."""
        body = m.body
        if self.head_label is not None:
            try:
                body += f"\nlog head {self.head_label()}"
            except Exception:  # the head is evidence, never a reason to hold a push
                log.debug("log head unavailable for a push", exc_info=True)
        key = self._key_now()
        if key is None:
            return body
        from watcher.runtime.links import link

        return body + "\n" + link(self.cfg, key, m.notice, now, _items(key, m))

    def _actions(self, m: Message, now: float) -> str:
        """The ntfy buttons of a push (with ``[web]``): Acknowledge and Snooze 1h POST to the
        page's signed endpoints for exactly its conditions, Open shows the page."""
        key = self._key_now() if m.kind != "resolved" else None
        if key is None:
            return ""
        from watcher.runtime.deliver import ntfy_actions
        from watcher.runtime.links import link

        items = _items(key, m)
        return ntfy_actions([("http", "Acknowledge", link(self.cfg, key, m.notice, now, items, "ack")),
                             ("http", "Snooze 1h", link(self.cfg, key, m.notice, now, items, "snooze")),
                             ("view", "Open", link(self.cfg, key, m.notice, now, items))])

    def _key_now(self) -> bytes | None:
        """The web key as its file is now (deleted: a new one, so the old links stay revoked and
        the new push's link works); a key that cannot be used is logged once per change."""
        if self._key is None:
            return None
        seen = self._key.changes
        key = self._key.get()
        if key is None and self._key.changes != seen:
            e = self._key.problem
            log.error("web: pushes go out without page links: %s%s", e, f" ({e.hint})" if e and e.hint else "")
        return key

    def _url_record(self, states: dict[str, Any]) -> list[Any]:
        """``source.failed`` (source notify-urls) once for unusable URLs; recovered once fixed."""
        if self._problems_recorded:
            return []
        self._problems_recorded = True
        known = states.get("fleet", {}).get("sources", {}).get(URLS_SOURCE) if isinstance(states.get("fleet"), dict) \
            else None
        err = redact("; ".join(self.problems), self.secrets)[:500]
        if self.problems and not (known and known.get("failed") and known.get("error") == err):
            return [SourceFailed(source=URLS_SOURCE, error=err)]
        if not self.problems and known and known.get("failed"):
            return [SourceRecovered(source=URLS_SOURCE, error=known.get("error", ""))]
        return []

    # ---- the heartbeat (dead-man's switch) -----------------------------------------------------
    def _heartbeat(self) -> None:
        url = self.cfg.notify.heartbeat_url
        if not url or self.mono() < self._hb_next:
            return
        if self._hb_thread is not None and self._hb_thread.is_alive():
            return  # the last one still hangs: no pile-up
        self._hb_next = self.mono() + self.hb_every
        self._hb_thread = threading.Thread(target=self._hit, args=(url,), name="fleetwatch-heartbeat", daemon=True)
        self._hb_thread.start()

    def _hit(self, url: str) -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="GET"),
                                        timeout=self.cfg.dur("notify.timeout")) as r:
                ok = 200 <= r.status < 300
        except Exception as e:  # the URL is a secret: only the error class is logged
            ok = False
            why = type(e).__name__
        else:
            why = "non-2xx answer"
        if ok:
            self.hb_ok += 1
            if self._hb_failing:
                log.info("heartbeat: reachable again")
            self._hb_failing = False
        else:
            self.hb_failed += 1
            if not self._hb_failing:
                log.warning("heartbeat: GET of notify.heartbeat_url failed (%s)", redact(why, self.secrets))
            self._hb_failing = True

    def pending(self) -> int:
        """Jobs queued or running in the worker."""
        with self._lock:
            return self._busy

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until the worker is idle (tests, shutdown). True if it is."""
        end = time.monotonic() + timeout
        while self.pending() and time.monotonic() < end:
            time.sleep(0.01)
        return not self.pending()

    def close(self, timeout: float = 5.0) -> None:
        """Finish queued jobs (up to ``timeout``) and stop the worker. Afterwards ``step`` only
        harvests, so the caller can record the last outcomes; anything undelivered is simply
        re-planned by the next run."""
        self._closed = True
        if self._thread is not None and self._thread.is_alive():
            self._todo.put(None)
            self._thread.join(timeout)
        self._thread = None

    # ---- bookkeeping ----------------------------------------------------------------------
    def _inflight_keys(self) -> frozenset[str]:
        return frozenset(k.rpartition("@")[0] for m in self._inflight.values() for k in m.keys)

    def _release(self, st: dict[str, Any]) -> None:
        """Forget in-flight notices whose outcome the folded state shows."""
        for nid, m in list(self._inflight.items()):
            r = st["recent"].get(nid)
            if r is not None and r["attempt"] >= m.attempt:
                del self._inflight[nid]
        for key in list(self._nudging):
            agent, stall, attempt = key
            ag = st["agents"].get(agent)
            if ag is None or ag["seq"] != stall or ag["nudges"] >= attempt:
                del self._nudging[key]

    def _harvest(self, now: float) -> list[Any]:
        out: list[Any] = []
        while True:
            try:
                job = self._done.get_nowait()
            except queue.Empty:
                return out
            o = job.outcome or Outcome(False, "no outcome")
            if job.kind == "nudge":
                a = job.nudge
                assert a is not None
                out.append(AgentNudged(agent=a.agent, attempt=a.attempt, ok=o.ok, error=o.error,
                                       stall_seq=a.stall_seq))
                continue
            m = job.msg
            assert m is not None
            if o.ok:
                if o.partial:
                    log.warning("notice %s only partly delivered: %s", m.notice, o.error)
                if m.kind == "escalate":
                    out.append(NoticeEscalated(notice=m.notice, conditions=m.conditions, after=m.after,
                                               covers=m.covers, attempt=m.attempt))
                else:
                    out.append(NoticeSent(notice=m.notice, covers=m.covers, attempt=m.attempt, title=m.title,
                                          severity=m.severity, keys=m.keys))
                continue
            delay = retry_delay(m.attempt, self.policy)
            if delay is not None:
                log.info("notice %s attempt %d failed (%s); retry in %.0fs", m.notice, m.attempt, o.error, delay)
                out.append(NoticeFailed(notice=m.notice, covers=m.covers, attempt=m.attempt, error=o.error,
                                        retry_at=iso(now + delay), keys=m.keys))
            else:
                log.warning("notice %s abandoned after %d attempts (%s). %s: %s", m.notice, m.attempt,
                            o.error, m.title, " | ".join(m.lines))
                out.append(NoticeAbandoned(notice=m.notice, covers=m.covers, attempt=m.attempt, error=o.error,
                                           keys=m.keys))

    # ---- the worker -----------------------------------------------------------------------
    def _submit(self, job: _Job) -> None:
        with self._lock:
            self._busy += 1
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="fleetwatch-notify", daemon=True)
            self._thread.start()
        self._todo.put(job)

    def _run(self) -> None:
        deliverer: Deliverer | None = None
        while True:
            job = self._todo.get()
            if job is None:
                return
            try:
                if job.kind == "notice":
                    if deliverer is None:
                        deliverer = Deliverer(self.cfg, self.secrets)
                    m = job.msg
                    assert m is not None
                    job.outcome = deliverer.send(m.title, job.body or m.body, m.notify_type, m.tag, route=m.route,
                                                 priority=m.priority, actions=job.actions)
                else:
                    job.outcome = self._nudge(job.nudge)
            except Exception as e:
                job.outcome = Outcome(False, redact(f"internal error: {type(e).__name__}", self.secrets))
                log.error("notify worker: %s", job.outcome.error)
            self._done.put(job)
            with self._lock:
                self._busy -= 1
            if self.wake is not None:
                try:
                    self.wake()
                except Exception:
                    pass

    def nudge_marks(self) -> dict[str, tuple[float, float]]:
        """agent -> (wall time its last nudge's keys were sent from, until; inf while sending): the
        tmux source ignores the pane activity of that echo, so a nudge never flips the class."""
        with self._lock:
            return dict(self._marks)

    def _nudge(self, a: NudgeAction | None) -> Outcome:
        assert a is not None
        argv = [x.replace("{target}", a.target or "").replace("{agent}", a.agent) for x in self.cfg.nudge.argv]
        start = time.time()
        with self._lock:
            self._marks[a.agent] = (start, float("inf"))
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=NUDGE_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as e:
            return Outcome(False, f"{type(e).__name__}")
        finally:
            with self._lock:
                self._marks[a.agent] = (start, time.time())
        return Outcome(r.returncode == 0, "" if r.returncode == 0 else f"exit {r.returncode}")


def _items(key: bytes, m: Message) -> str:
    """The ``c`` of a push's links: the seqs of its conditions, signed (``links.items_of``)."""
    from watcher.runtime.links import cond_seq, items_of

    return items_of(key, m.notice, [s for s in map(cond_seq, m.conditions) if s is not None])


class _Targets:
    """agent -> tmux target, read from the fleet projection on demand (``get`` only): the planner
    asks for the few agents it nudges, so a tick does not copy 50,000 records to answer it."""

    def __init__(self, agents: dict[str, Any]):
        self._agents = agents

    def get(self, agent: str, default: str | None = None) -> str | None:
        v = self._agents.get(agent)
        return v.get("target", default) if isinstance(v, dict) else default


def _targets(states: dict[str, Any]) -> _Targets:
    """agent -> tmux target, from the fleet projection when it knows one."""
    fleet = states.get("fleet")
    return _Targets(fleet.get("agents", {}) if isinstance(fleet, dict) else {})
