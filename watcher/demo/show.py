"""`fleetwatch demo`: the newcomer's one-minute tour, run end to end on real pieces.

In a temporary folder: eight goal.json agents, one steps.json run (adapted from the fixture
T2-heart-0007), a missions SQLite database (the fixture missions.sql) and a config pointing at a
local HTTP receiver that plays the phone (apprise ``json://``). The real watcher runs as a
subprocess (``fleetwatch run``); the demo edits the files act by act, tails the event log live,
records a verdict with ``fleetwatch verdict`` and ends with ``fleetwatch summary``.

Invariants
- Self-contained (no repository fixtures needed) and never touches the user's config or log:
  every subprocess gets ``--config`` and ``--db`` and an environment without FLEETWATCH_*,
  NOTIFY_SOCKET or JOURNAL_STREAM.
- Ends by itself: every wait has a timeout; a missing piece (e.g. notifications not installed)
  is reported as skipped and the tour goes on. The temporary folder is removed unless ``keep``.
- Works piped: plain lines without a TTY (rich decides), flushed as they are printed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from projections import classes
from projections.classes import COLOUR
from watcher.demo.world import AGENTS, FAST, NORMAL, Fleet, Pace, Phone, iso



def describe(rec: Any, arrow: str) -> tuple[str, str]:
    """One human line for an event: (text, rich style)."""
    e, t = rec.event, rec.type

    def g(k: str, d: object = "") -> Any:   # a field of whichever event type this is
        return getattr(e, k, d)

    if t == "agent.classified":
        frm = g("from_") or "new"
        style = COLOUR.get(e.to, "")  # the one class table
        return f"agent {e.agent:<4} {frm} {arrow} {e.to}  ({e.reason})", style
    if t == "dod.verdict":
        return f"dod   {e.agent:<4} verdict {e.verdict} by {e.verifier}", "green"
    if t == "dod.flagged":
        return f"dod   {e.agent:<4} flagged {e.flag}", "yellow"
    if t == "dod.acted":
        return f"dod   {e.agent:<4} verdict {e.verdict} acted on: {e.action}", "green"
    if t == "agent.launched":
        return f"agent {e.agent:<4} launched with its contract in window {e.target} of tmux -L {e.socket}", "bold"
    if t == "step.changed":
        return f"run   {e.run} step {e.step}: {g('from_') or 'new'} {arrow} {e.to}", "blue"
    if t == "rule.violated":
        return f"run   {e.run} RULE VIOLATED {e.rule}: {e.detail}", "bold red"
    if t == "run.changed":
        return f"run   {e.run} seen (branch {e.branch}, failures {e.failures})", "blue"
    if t == "wp.changed":
        return f"wp    {e.mission}/{e.wp}: {g('from_') or 'new'} {arrow} {e.to}", "green"
    if t == "mission.completed":
        return f"mission {e.mission} completed ({e.wps} work package(s) done)", "bold green"
    if t == "circuit.changed":
        return f"circuit {e.scope}: {g('from_') or 'new'} {arrow} {e.to}", "dim"
    if t.startswith("notice."):
        extra = g("title") or g("error")
        n = len(g("covers", []))
        return f"notice {t.split('.', 1)[1]} (covers {n} event{'s' * (n != 1)}) {extra}".rstrip(), "magenta"
    if t.startswith("source."):
        return f"source {e.source} {t.split('.', 1)[1]} {g('error')}".rstrip(), "yellow"
    if t.startswith("watcher."):
        return f"watcher {t.split('.', 1)[1]} (pid {e.pid})", "dim"
    return f"{t} {rec.subject}", ""


class Tail:
    """Follows the event log in a thread, printing one line per event and keeping them for waits."""

    def __init__(self, db: str, show: Callable[[Any], None]):
        self.db, self.show = db, show
        self.recs: list[Any] = []
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name="demo-tail", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from events.log import EventLog

        elog = None
        while elog is None and not self.stop.is_set():
            try:
                if os.path.exists(self.db) and os.path.getsize(self.db) > 0:
                    elog = EventLog(self.db, durability="normal", create=False)
                    break
            except Exception:
                pass
            time.sleep(0.05)
        if elog is None:
            return
        try:
            for rec in elog.follow(0, poll=0.05, stop=self.stop.is_set):
                self.show(rec)
                with self.cond:
                    self.recs.append(rec)
                    self.cond.notify_all()
        except Exception as e:  # the demo goes on without a live tail
            self.error = f"{type(e).__name__}: {e}"
        finally:
            elog.close()

    def wait(self, pred: Callable[[Any], bool], timeout: float, since: int = 0) -> Any:
        """The first event after seq ``since`` matching ``pred``, or None after ``timeout`` s."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.recs:
                    if r.seq > since and pred(r):
                        return r
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def head(self) -> int:
        with self.cond:
            return self.recs[-1].seq if self.recs else 0

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=3)


class _Console(Console):
    def on_broken_pipe(self) -> None:  # rich would raise SystemExit(1) from any thread
        raise BrokenPipeError


class OutputClosed(Exception):
    """stdout went away (e.g. ``fleetwatch demo | head``): stop the tour, exit 0."""


def classified(agent: str, to: str) -> Callable[[Any], bool]:
    return lambda r: r.type == "agent.classified" and r.event.agent == agent and r.event.to == to


def of_type(t: str, **fields: Any) -> Callable[[Any], bool]:
    return lambda r: r.type == t and all(getattr(r.event, k, None) == v for k, v in fields.items())


def child_env() -> dict[str, str]:
    drop = ("FLEETWATCH_DB", "FLEETWATCH_CONFIG", "NOTIFY_SOCKET", "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONUNBUFFERED"] = "1"
    for k in ("no_proxy", "NO_PROXY"):  # the phone is on loopback: never through a proxy
        env[k] = ",".join(filter(None, [env.get(k, ""), "127.0.0.1", "localhost"]))
    return env


def fleetwatch_argv(*args: str) -> list[str]:
    """This very install's fleetwatch (no PATH lookup): ``python -c main()``."""
    boot = "import sys; sys.argv[0] = 'fleetwatch'; from watcher.entry import main; main()"
    return [sys.executable, "-c", boot, *args]


@dataclass
class Tour:
    pace: Pace
    keep: bool = False
    console: Console = field(default_factory=lambda: _Console(highlight=False))
    skipped: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- output ---------------------------------------------------------------------------
    def say(self, *items: Any, wrap: bool = True) -> None:
        """Print under the lock. A closed output (``| head``) ends the tour quietly: stdout is
        pointed at /dev/null and the main thread gets OutputClosed."""
        try:
            with self.lock:
                for it in items:
                    self.console.print(it, soft_wrap=not wrap)
                self.console.file.flush()
        except (BrokenPipeError, ValueError):
            try:
                fd = os.open(os.devnull, os.O_WRONLY)
                os.dup2(fd, sys.stdout.fileno())
                os.close(fd)
            except (OSError, ValueError):
                pass
            if threading.current_thread() is threading.main_thread():
                raise OutputClosed from None

    def act(self, n: int, title: str, explain: str) -> None:
        self.say(Text(""), Rule(f"{n}. {title}", align="left", style="bold"), Text(explain, style="italic"))

    def show_event(self, rec: Any) -> None:
        text, style = describe(rec, self.arrow)
        line = Text()
        line.append(f"  {time.strftime('%H:%M:%S')} #{rec.seq:<3} ", style="dim")
        line.append(text, style=style)
        self.say(line, wrap=False)

    def show_push(self, title: str, message: str) -> None:
        self.say(Panel(Text(message or "(empty)"), title=Text(title or "(no title)", style="bold"),
                       subtitle="what the phone shows", expand=False, border_style="magenta", width=76))

    def expect(self, what: str, pred: Callable[[Any], bool], timeout: float | None = None, since: int = 0) -> Any:
        t = self.pace.timeout if timeout is None else timeout
        rec = self.tail.wait(pred, t, since)
        if rec is None:
            self.skipped.append(what)
            self.say(Text(f"  (not seen within {t:.0f}s: {what}; going on)", style="yellow"))
        return rec

    def beat(self, scale: float = 1.0) -> None:
        time.sleep(self.pace.beat * scale)

    def run_cli(self, *args: str, show: bool = True) -> subprocess.CompletedProcess:
        shown = " ".join(a if a.replace("-", "").replace("_", "").isalnum() else json.dumps(a) for a in args)
        if show:
            self.say(Text(f"  $ fleetwatch {shown}", style="bold"), wrap=False)
        return subprocess.run(fleetwatch_argv(*args, "--config", self.cfg, "--db", self.db), env=child_env(),
                              capture_output=True, text=True, timeout=30)

    # ---- the tour -------------------------------------------------------------------------
    def main(self) -> int:
        enc = (getattr(self.console.file, "encoding", "") or "").lower()
        self.arrow = "→" if "utf" in enc else "->"
        self.root = tempfile.mkdtemp(prefix="fleetwatch-demo-")
        self.db = os.path.join(self.root, "events.db")
        self.phone = Phone(self.show_push)
        self.tail: Any = None
        self.proc: subprocess.Popen | None = None
        t0 = time.monotonic()

        def on_term(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        old_term = signal.signal(signal.SIGTERM, on_term) if threading.current_thread() is threading.main_thread() else None
        try:
            return self._tour(t0)
        except OutputClosed:
            return 0
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
            self._stop_watcher()
            self._stop_tmux()
            if self.tail is not None:
                self.tail.close()
            self.phone.close()
            if self.keep:
                print(f"\nkept the demo folder: {self.root}\n  explore it: fleetwatch tail -n 100 --config "
                      f"{self.root}/config.toml   (also status, summary, verify, rebuild --check)")
            else:
                shutil.rmtree(self.root, ignore_errors=True)

    def _tour(self, t0: float) -> int:
        p, world = self.pace, Fleet(self.root)
        self.cfg = world.build(self.phone.port, p)
        self.tmux_socket = world.socket
        notify = importlib.util.find_spec("watcher.runtime.notifier") is not None
        self.say(Panel(Text.assemble(
            ("fleetwatch demo", "bold"), " - a simulated fleet of 8 AI coding agents, one pipeline run and two "
            "missions, watched by the real watcher. Every line below is an event from its append-only log.\n",
            ("folder: ", "dim"), self.root), expand=False, width=80))
        self.act(1, "The fleet at work", "Seven agents are busy; a run and two missions are in flight. "
                 "The watcher (`fleetwatch run`, started now) classifies each agent on first sight.")
        with open(os.path.join(self.root, "watcher.log"), "wb") as wlog:
            self.proc = subprocess.Popen(fleetwatch_argv("run", "--config", self.cfg, "--db", self.db,
                                                         "--log-level", "warning"),
                                         env=child_env(), stdout=subprocess.DEVNULL, stderr=wlog)
        self.tail = Tail(self.db, self.show_event)
        end = time.monotonic() + 20
        while self.tail.wait(of_type("watcher.started"), 0.2) is None:
            if self.proc.poll() is not None or time.monotonic() > end:
                return self._watcher_failed()
        for a in AGENTS:
            self.expect(f"{a} TRABAJANDO", classified(a, classes.TRABAJANDO))
        self.expect("wp m2-wp1 seen", of_type("wp.changed", wp="m2-wp1"))
        self.beat()

        self.act(2, "Trouble, all at once", "a02 asks a question, a07 hits a blocker, run T2 begins `apply` "
                 "although its audit failed (diagnose_only), and mission m2 needs a human approval.")
        mark = self.tail.head()
        world.goal("a02", "waiting", "preguntando")
        world.goal("a07", "busy", "bloqueado")
        world.steps(analyze={"status": "done", "at": iso(time.time() - 5)},
                    apply={"status": "begin", "at": iso(time.time())})
        world.wp("m2-wp1", "APPROVAL_REQUIRED")
        self.expect("a02 RECLAMA", classified("a02", classes.RECLAMA), since=mark)
        self.expect("a07 RECLAMA", classified("a07", classes.RECLAMA), since=mark)
        self.expect("rule violation on T2", of_type("rule.violated"), since=mark)
        self.expect("m2-wp1 APPROVAL_REQUIRED", of_type("wp.changed", wp="m2-wp1", to="APPROVAL_REQUIRED"), since=mark)
        if notify:
            self.say(Text(f"  ... the notifier waits group_wait={p.group_wait}s, then sends ONE grouped push:",
                          style="italic"))
            end = time.monotonic() + p.group_wait + p.timeout
            while not self.phone.pushes and time.monotonic() < end:
                time.sleep(0.05)
            if not self.phone.pushes:
                self.skipped.append("grouped push (none arrived)")
                self.say(Text("  (no push arrived; going on)", style="yellow"))
        else:
            self.skipped.append("pushes (notifications are not installed in this build)")
            self.say(Text("  (notifications are not part of this build: no push to show)", style="yellow"))
        self.beat()

        self.act(3, "A claim of done, then a verdict", "a03 goes idle in phase hecho: it SAYS it is done. "
                 "A separate verifier checks the contract and records its verdict.")
        mark = self.tail.head()
        world.goal("a03", "idle", "hecho")
        if self.expect("a03 DICE_TERMINADO", classified("a03", classes.DICE_TERMINADO), since=mark):
            self.beat(0.5)
            r = self.run_cli("verdict", "a03", "met", "--verifier", "demo-verifier", "--evidence", "pytest green")
            self.say(Text("  " + (r.stdout.strip() or r.stderr.strip()), style="dim"))
            if r.returncode == 0:
                self.expect("dod.verdict for a03", of_type("dod.verdict", agent="a03"), since=mark)
            else:
                self.skipped.append("verdict (the verdict command failed)")
        self._launched(world)
        self.beat()

        self.act(4, "Silence, a bad launch, an exit", f"a04 goes idle mid-task and nothing changes on disk: "
                 f"after stall_after={p.stall_after}s time alone makes it ESTANCADO. Meanwhile a05 is "
                 "launched without a dod_contract, and a06's session is removed.")
        mark = self.tail.head()
        world.goal("a04", "idle", "haciendo")
        world.goal("a05", "busy", "haciendo", contract=False)
        world.remove("a06")
        self.expect("a05 MAL_LANZADO", classified("a05", classes.MAL_LANZADO), since=mark)
        self.expect("a06 CERRADO", classified("a06", classes.CERRADO), since=mark)
        self.expect("a04 ESTANCADO", classified("a04", classes.ESTANCADO), timeout=p.stall_after + p.timeout, since=mark)
        self.beat()

        self.act(5, "The human answers", "a02 gets its answer, a07 is unblocked, m2-wp1 is approved and "
                 "finishes: mission m2 completes.")
        mark = self.tail.head()
        world.goal("a02", "busy", "haciendo")
        world.goal("a07", "busy", "haciendo")
        world.wp("m2-wp1", "RUNNING")
        self.expect("m2-wp1 RUNNING", of_type("wp.changed", wp="m2-wp1", to="RUNNING"), since=mark)
        world.wp("m2-wp1", "DONE")
        self.expect("mission m2 completed", of_type("mission.completed", mission="m2"), since=mark)
        if notify:  # let the non-urgent updates of acts 3-4 go out before the watcher stops
            time.sleep(p.group_wait + 0.5)
        self.beat(0.5)
        return self._finish(t0)

    def _launched(self, world: Any) -> None:
        """a09 launched with a contract into a private tmux server: it does the work, says
        `fleetwatch claim done`, its check passes and the watcher closes it, no human involved."""
        if shutil.which("tmux") is None:
            self.skipped.append("launch (tmux is not installed)")
            return
        self.say(Text("  Now the whole loop with no human: a09 is launched with a contract it will be checked "
                      "against, does the work and says `fleetwatch claim done`.", style="italic"))
        mark = self.tail.head()
        os.makedirs(world.work, exist_ok=True)
        contract = json.dumps([{"id": "built", "kind": "cmd", "cmd": ["test", "-s", "built.txt"]}])
        r = self.run_cli("launch", "a09", "--task", "build the artefact", "--contract", contract, "--cwd", world.work)
        if r.returncode != 0:
            self.skipped.append("launch (" + (r.stderr.strip().splitlines() or ["failed"])[0][:120] + ")")
            return
        # the longest act: a tmux window starts, the agent works and claims, its check runs isolated
        t = self.pace.timeout * 3
        self.expect("a09 verified met", of_type("dod.verdict", agent="a09", verdict="met"), timeout=t, since=mark)
        self.expect("a09 closed: verified met", lambda rec: rec.type == "agent.classified" and rec.event.agent == "a09"
                    and rec.event.to == classes.CERRADO, timeout=t, since=mark)

    def _finish(self, t0: float) -> int:
        self._stop_watcher()
        self.tail.wait(of_type("watcher.stopped"), 3)
        self.tail.close()
        self.act(6, "The summary", "What you would read when you come back: one grouped text.")
        r = self.run_cli("summary")
        if r.returncode == 0 and r.stdout.strip():
            self.say(Panel(Text(r.stdout.rstrip()), title="fleetwatch summary", expand=False, width=80))
        else:
            self.skipped.append("summary (the summary command failed)")
            self.say(Text(f"  (summary unavailable: {r.stderr.strip()[:200]})", style="yellow"))
        pushes = self.phone.pushes
        grouped = (f"{len(pushes)} push(es) to your phone; the first carried "
                   f"{len([ln for ln in pushes[0][1].splitlines() if ln.strip()])} items in ONE message"
                   if pushes else "no push (see skipped below)")
        self.say(Text(""), Rule("What you just saw", align="left", style="bold"), Text(
            "- every agent class: TRABAJANDO, RECLAMA, DICE_TERMINADO, ESTANCADO,\n"
            "  MAL_LANZADO, CERRADO - each change one event in an append-only log;\n"
            "- a claim of done checked by a verifier (`fleetwatch verdict`), not the agent;\n"
            "- an agent launched with its contract, checked and closed with no human (`fleetwatch launch`);\n"
            "- a pipeline rule violation (audit-branch) and missions read from SQLite;\n"
            f"- {grouped};\n"
            "- the log is hash-chained: `fleetwatch tail`, `fleetwatch verify`.\n\n"
            "Next steps:\n"
            "  fleetwatch init             # a commented config: point it at your agents\n"
            "  fleetwatch doctor           # check config, sources, log and notify URLs\n"
            "  fleetwatch install-service  # run it for weeks as a systemd --user service\n"
            "  README.md                   # sources, notifications, every command"))
        if self.skipped:
            self.say(Text("skipped: " + "; ".join(self.skipped), style="yellow"))
        self.say(Text(f"demo finished in {time.monotonic() - t0:.0f}s", style="dim"))
        return 0

    def _watcher_failed(self) -> int:
        self._stop_watcher()
        try:
            with open(os.path.join(self.root, "watcher.log"), encoding="utf-8", errors="replace") as f:
                err = f.read()[-2000:]
        except OSError:
            err = ""
        self.say(Text("the watcher did not start; its output:\n" + err, style="red"))
        return 1

    def _stop_tmux(self) -> None:
        sock = getattr(self, "tmux_socket", None)
        if sock and shutil.which("tmux"):
            subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, timeout=10)

    def _stop_watcher(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run(fast: bool = False, keep: bool = False) -> int:
    """Run the tour; returns the exit code (0 unless the watcher could not start)."""
    return Tour(FAST if fast else NORMAL, keep=keep).main()
