"""The notification edge: runs the pure plan each tick and delivers with apprise in a worker.

``Notifier(cfg).step(states, now)`` harvests finished deliveries (as ``notice.sent`` /
``notice.failed`` / ``notice.abandoned`` / ``agent.nudged`` events for the loop to append),
plans with ``projections.notify_plan.plan`` and hands new messages and nudges to one worker
thread. The tick never waits for the network.

Invariants
- A notice handed to the worker stays "in flight" (never planned again) until the state folded
  from the log shows its outcome; so a notice is sent once unless the process dies between a
  successful send and its record (then that one message may repeat once after a restart).
- Secrets never leave: apprise's logger is pinned to WARNING and filtered, error texts are
  redacted (URLs and every component of the configured URLs), messages carry no ``dod`` text.
- After the last retry a notice is abandoned and written to the service log (WARNING) as the
  last-resort local channel.
"""
from __future__ import annotations

import logging
import queue
import subprocess
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import msgspec

from events.log import iso
from events.types import AgentNudged, NoticeAbandoned, NoticeFailed, NoticeSent
from projections.notify import Policy, redact, retry_delay
from projections.notify_plan import Message, NudgeAction, nudges, plan
from watcher.config import Config, expand, parse_duration

log = logging.getLogger("fleetwatch.notify")
NUDGE_TIMEOUT = 10.0


def policy_from_config(cfg: Config) -> Policy:
    n, g = cfg.notify, cfg.nudge
    return Policy(
        group_wait=cfg.dur("notify.group_wait"), group_interval=cfg.dur("notify.group_interval"),
        repeat_interval=cfg.dur("notify.repeat_interval"), min_severity=n.min_severity, tags=dict(n.tags),
        retry=tuple(parse_duration(v, f"notify.retry[{i}]") for i, v in enumerate(n.retry)),
        flap_high=n.flap_high, flap_low=n.flap_low, source_failed_after=cfg.dur("notify.source_failed_after"),
        nudge_enabled=g.enabled, nudge_max=g.max_per_stall, nudge_after=cfg.dur("nudge.after"),
        nudge_needs_target=any("{target}" in a for a in g.argv))


def secrets_of(urls: list[str]) -> tuple[str, ...]:
    """Every component of the URLs that could be a credential (user, password, path parts,
    query values, host), longest first, so redaction never leaves a piece behind."""
    out: set[str] = set()
    for u in urls:
        out.add(u)
        try:
            p = urlsplit(u)
        except ValueError:
            continue
        parts = [p.username, p.password, p.hostname, *p.path.split("/"),
                 *(v for _, v in parse_qsl(p.query, keep_blank_values=True))]
        netloc = p.netloc.rpartition("@")[0]
        parts += netloc.split(":")
        for x in parts:
            if x and len(x) >= 4:
                out.add(x)
                out.add(unquote(x))
    return tuple(sorted(out, key=len, reverse=True))


class _RedactFilter(logging.Filter):
    def __init__(self, secrets: tuple[str, ...]):
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        record.msg, record.args = redact(msg, self.secrets), ()
        return True


# apprise and the HTTP stack under it print URLs (with tokens in paths) at DEBUG/INFO
PINNED_LOGGERS = ("apprise", "urllib3", "requests", "requests_oauthlib", "httpx", "httpcore")


def pin_apprise_logger(secrets: tuple[str, ...] = ()) -> None:
    """Keep apprise and its HTTP libraries at WARNING and redact whatever they still log."""
    for name in PINNED_LOGGERS:
        lg = logging.getLogger(name)
        lg.setLevel(logging.WARNING)
        for f in list(lg.filters):
            if isinstance(f, _RedactFilter):
                lg.removeFilter(f)
        lg.addFilter(_RedactFilter(secrets))


class Outcome(msgspec.Struct, frozen=True):
    ok: bool
    error: str = ""       # redacted, short
    partial: bool = False


class Deliverer:
    """apprise behind one method. Build and use it in one thread."""

    def __init__(self, cfg: Config):
        import apprise

        self.cfg = cfg
        self.timeout = cfg.dur("notify.timeout")
        self.secrets = secrets_of(list(cfg.notify.urls))
        pin_apprise_logger(self.secrets)
        self.ap = apprise.Apprise()
        self.bad = 0
        for u in cfg.notify.urls:
            if not self.ap.add(u):
                self.bad += 1
        if cfg.notify.config:
            ac = apprise.AppriseConfig()
            ac.add(expand(cfg.notify.config))
            self.ap.add(ac)
        for server in self.ap:  # connect/read timeouts of every service
            for attr in ("socket_connect_timeout", "socket_read_timeout"):
                if hasattr(server, attr):
                    setattr(server, attr, self.timeout)
        if self.bad:
            log.warning("notify: %d of %d notify.urls are not valid apprise URLs (ignored)", self.bad,
                        len(cfg.notify.urls))

    @property
    def configured(self) -> bool:
        return bool(self.cfg.notify.urls or self.cfg.notify.config)

    def send(self, title: str, body: str, notify_type: str = "info", tag: str = "") -> Outcome:
        from apprise.result import AppriseResultStatus as S

        try:
            kw: dict[str, Any] = {"tag": tag} if tag else {}
            res = self.ap.notify(body=body, title=title, notify_type=notify_type,
                                 timeout=self.timeout * 2 + 1, **kw)
        except Exception as e:  # apprise should not raise; never let it kill the worker
            return Outcome(False, redact(f"{type(e).__name__}: {e}", self.secrets)[:200])
        status = getattr(res, "status", None)
        if status is None:  # apprise < 1.10 returned a plain bool
            return Outcome(bool(res), "" if res else "delivery failed")
        if status == S.SUCCESS:
            return Outcome(True)
        if status == S.PARTIAL:
            return Outcome(True, f"delivered to {res.success_count} of {len(res.results)} services", True)
        if status == S.NOMATCH:
            why = f"no notify URL has tag {tag!r}" if tag else "no notify URLs loaded"
            return Outcome(False, why)
        failed = ", ".join(sorted({f"{r.name} {r.status.name.lower()}" for r in res.results
                                   if r.status != S.SUCCESS}))[:200]
        return Outcome(False, redact(f"{status.name.lower()}: {failed}" if failed else status.name.lower(),
                                     self.secrets))


class _Job(msgspec.Struct):
    kind: str                       # "notice" | "nudge"
    msg: Message | None = None
    nudge: NudgeAction | None = None
    outcome: Outcome | None = None


class Notifier:
    """Per tick: ``step(states, now) -> events``; ``next_wake``; ``close(timeout)``."""

    def __init__(self, cfg: Config, *, wake: Any = None):
        self.cfg = cfg
        self.policy = policy_from_config(cfg)
        self.secrets = secrets_of(list(cfg.notify.urls))
        pin_apprise_logger(self.secrets)
        self.enabled = bool(cfg.notify.urls or cfg.notify.config)
        self.wake = wake                 # optional callable: wakes the loop when a job finishes
        self._todo: queue.Queue[_Job | None] = queue.Queue()
        self._done: queue.Queue[_Job] = queue.Queue()
        self._inflight: dict[str, Message] = {}          # notice id -> message (until folded back)
        self._nudging: dict[tuple[str, int, int], NudgeAction] = {}
        self._busy = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        if not self.enabled:
            log.info("notify: no [notify] urls or config: notifications are off")

    # ---- the tick side --------------------------------------------------------------------
    def step(self, states: dict[str, Any], now: float) -> list[Any]:
        st = states["notify"]
        out = self._harvest(now)
        self._release(st)
        if self._closed:  # after close(): only record what finished, start nothing new
            return out
        if self.enabled:
            p = plan(st, now, self.policy, inflight=self._inflight_keys())
            out += p.record
            for m in p.send:
                self._inflight[m.notice] = m
                self._submit(_Job("notice", msg=m))
        acts, _ = nudges(st, now, self.policy, _targets(states), set(self._nudging))
        for a in acts:
            self._nudging[(a.agent, a.stall_seq, a.attempt)] = a
            self._submit(_Job("nudge", nudge=a))
        return out

    def next_wake(self, states: dict[str, Any], now: float) -> float | None:
        st = states["notify"]
        wakes = []
        if self.enabled:
            w = plan(st, now, self.policy, inflight=self._inflight_keys()).next_wake
            if w is not None:
                wakes.append(w)
        _, w = nudges(st, now, self.policy, _targets(states), set(self._nudging))
        if w is not None:
            wakes.append(w)
        if self._inflight or self._nudging:
            wakes.append(now + 0.25)  # record outcomes promptly
        return min(wakes) if wakes else None

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
                        deliverer = Deliverer(self.cfg)
                    m = job.msg
                    assert m is not None
                    job.outcome = deliverer.send(m.title, m.body, m.notify_type, m.tag)
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

    def _nudge(self, a: NudgeAction | None) -> Outcome:
        assert a is not None
        argv = [x.replace("{target}", a.target or "").replace("{agent}", a.agent) for x in self.cfg.nudge.argv]
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=NUDGE_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as e:
            return Outcome(False, f"{type(e).__name__}")
        return Outcome(r.returncode == 0, "" if r.returncode == 0 else f"exit {r.returncode}")


def _targets(states: dict[str, Any]) -> dict[str, str | None]:
    """agent -> tmux target, from the fleet projection when it knows one."""
    fleet = states.get("fleet")
    agents = fleet.get("agents", {}) if isinstance(fleet, dict) else {}
    return {a: (v.get("target") if isinstance(v, dict) else None) for a, v in agents.items()}
