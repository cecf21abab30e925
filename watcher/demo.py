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

import http.server
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
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

CLASSES = ("TRABAJANDO", "RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO", "CERRADO")
RUN = "T2-heart-0007"


@dataclass(frozen=True)
class Pace:
    beat: float          # pause between acts, so a human can read
    stall_after: int     # seconds; ESTANCADO comes by time alone after this
    group_wait: int      # seconds; the notifier's coalescing window
    timeout: float       # longest wait for an expected event before calling it skipped


NORMAL = Pace(beat=4.0, stall_after=8, group_wait=2, timeout=15.0)
FAST = Pace(beat=0.2, stall_after=2, group_wait=1, timeout=8.0)

# agent -> (task, dod_contract). a05 is launched later without a contract.
AGENTS = {
    "a01": ("refactor parser", "pytest tests/test_parser.py passes; ruff clean"),
    "a02": ("fix login flow", "e2e login test green against staging"),
    "a03": ("add metrics endpoint", "curl localhost:9100/metrics returns fleet_agents gauge"),
    "a04": ("migrate db schema", "alembic upgrade head succeeds on a copy of prod"),
    "a06": ("bump deps", "make test green; no new CVEs in pip-audit"),
    "a07": ("speed up CI", "CI wall time under 8 min on main, three runs in a row"),
    "a08": ("triage flaky tests", "flaky list empty for 20 consecutive runs"),
}

# A copy of fixtures/missions.sql (a bounded-orchestrator store), so the demo needs no checkout.
MISSIONS_SQL = """
CREATE TABLE missions (id TEXT PRIMARY KEY, title TEXT, state TEXT NOT NULL);
CREATE TABLE work_packages (
  id TEXT PRIMARY KEY, mission_id TEXT NOT NULL REFERENCES missions(id),
  title TEXT, state TEXT NOT NULL, risk TEXT, size TEXT, deps TEXT,
  attempts INTEGER NOT NULL DEFAULT 0, last_error_sig TEXT, same_sig_count INTEGER NOT NULL DEFAULT 0,
  updated_at TEXT);
CREATE TABLE circuits (scope TEXT PRIMARY KEY, state TEXT NOT NULL, opened_at TEXT);
INSERT INTO missions VALUES ('m1','harden deploy pipeline','ACTIVE'), ('m2','rotate ssh keys','ACTIVE');
INSERT INTO work_packages VALUES
 ('m1-wp1','m1','lint configs','DONE','LOW','S','[]',1,NULL,0,'2026-11-29T09:00:00Z'),
 ('m1-wp2','m1','add canary','RUNNING','MEDIUM','M','["m1-wp1"]',1,NULL,0,'2026-11-29T09:30:00Z'),
 ('m1-wp3','m1','switch traffic','READY','HIGH','S','["m1-wp2"]',0,NULL,0,'2026-11-29T09:00:00Z'),
 ('m1-wp4','m1','flaky test repair','FAILED','LOW','S','[]',3,'E:AssertionError:test_io.py:88',2,'2026-11-29T09:40:00Z'),
 ('m2-wp1','m2','rotate keys on bastion','APPROVAL_REQUIRED','CRITICAL','S','[]',0,NULL,0,'2026-11-29T09:10:00Z');
INSERT INTO circuits VALUES ('m1','CLOSED',NULL), ('m2','CLOSED',NULL);
"""
WP_QUERY = ("SELECT mission_id AS mission, id AS wp, state, deps, attempts, last_error_sig, same_sig_count "
            "FROM work_packages")


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _write_json(path: str, obj: Any) -> None:
    """Atomic replace (the way agents' hooks write), so the watcher never sees half a file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
    os.replace(tmp, path)


class Fleet:
    """The scripted world in the temporary folder: goal.json files, the run, the missions DB."""

    def __init__(self, root: str):
        self.root = root
        self.agents_dir = os.path.join(root, "agents")
        self.runs_dir = os.path.join(root, "runs")
        self.missions_db = os.path.join(root, "missions.db")
        self.run_doc: dict[str, Any] = {}

    def goal(self, agent: str, state: str, phase: str, *, contract: bool = True, **extra: Any) -> None:
        task, dod_contract = AGENTS.get(agent, ("write docs", ""))
        doc = {"agent": agent, "task": task, "state": state, "phase": phase,
               "dod": f"demo: {task}", "dod_contract": dod_contract if contract else "",
               "dod_status": "pending", "last_activity": _iso(time.time())}
        doc.update(extra)
        _write_json(os.path.join(self.agents_dir, agent, "goal.json"), doc)

    def remove(self, agent: str) -> None:
        shutil.rmtree(os.path.join(self.agents_dir, agent), ignore_errors=True)

    def steps(self, **changes: dict[str, Any]) -> None:
        self.run_doc["steps"].update(changes)
        _write_json(os.path.join(self.runs_dir, RUN, "steps.json"), self.run_doc)

    def wp(self, wp: str, state: str) -> None:
        with sqlite3.connect(self.missions_db) as db:
            db.execute("UPDATE work_packages SET state = ?, updated_at = ? WHERE id = ?", (state, _iso(time.time()), wp))
        db.close()

    def build(self, port: int, pace: Pace) -> str:
        """Write the starting world and the config; returns the config path."""
        for a in AGENTS:
            self.goal(a, "busy", "haciendo")
        t0 = time.time()
        # T2-heart-0007 as in the fixture (diagnose_only, failed tainted audit), up to analyze:
        # the act that begins `apply` breaks the audit-branch rule.
        self.run_doc = {
            "event_id": f"run_finished:{RUN}", "kind": "run_finished", "run": RUN,
            "board": "T2:heart:val_extrap", "branch": "diagnose_only", "failures": 0,
            "last_failure_at": None, "work_complete": False,
            "steps": {"facts": {"status": "done", "at": _iso(t0 - 300)},
                      "audit": {"status": "done", "at": _iso(t0 - 200), "data": {"verdict": "fail", "tainted": True}},
                      "analyze": {"status": "begin", "at": _iso(t0 - 60)}}}
        self.steps()
        with sqlite3.connect(self.missions_db) as db:
            db.executescript(MISSIONS_SQL)
            db.execute("UPDATE work_packages SET state = 'RUNNING' WHERE id = 'm2-wp1'")
        db.close()
        cfg = os.path.join(self.root, "config.toml")
        q = lambda s: json.dumps(s)  # noqa: E731 - TOML basic strings are JSON strings
        with open(cfg, "w", encoding="utf-8") as f:
            f.write(f"""# written by `fleetwatch demo`
[store]
path = {q(os.path.join(self.root, "events.db"))}
durability = "normal"

[watch]
interval = "300ms"

[classify]
stall_after = "{pace.stall_after}s"

[[sources]]
name = "fleet"
kind = "goals"
glob = {q(os.path.join(self.agents_dir, "*", "goal.json"))}

[[sources]]
name = "runs"
kind = "steps"
glob = {q(os.path.join(self.runs_dir, "*", "steps.json"))}

[[sources]]
name = "missions"
kind = "sqlite"
entity = "wp"
path = {q(self.missions_db)}
query = {q(WP_QUERY)}
key = ["mission", "wp"]

[[sources]]
name = "circuits"
kind = "sqlite"
entity = "circuit"
path = {q(self.missions_db)}
query = "SELECT scope, state FROM circuits"
key = ["scope"]

[notify]
urls = ["json://127.0.0.1:{port}/demo"]
group_wait = "{pace.group_wait}s"
group_interval = "{pace.group_wait * 3}s"
retry = ["1s", "2s"]
timeout = "3s"
""")
        return cfg


class Phone:
    """A local HTTP receiver for apprise ``json://`` pushes: each one is shown as the phone would."""

    def __init__(self, on_push: Callable[[str, str], None]):
        pushes = self.pushes = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    body = {}
                self.send_response(200)
                self.end_headers()
                title, message = str(body.get("title") or ""), str(body.get("message") or "")
                pushes.append((title, message))
                on_push(title, message)

            def log_message(self, *a: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="demo-phone", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def describe(rec: Any, arrow: str) -> tuple[str, str]:
    """One human line for an event: (text, rich style)."""
    e, t = rec.event, rec.type
    g = lambda k, d="": getattr(e, k, d)  # noqa: E731
    if t == "agent.classified":
        frm = g("from_") or "new"
        style = {"RECLAMA": "bold yellow", "ESTANCADO": "yellow", "MAL_LANZADO": "red",
                 "DICE_TERMINADO": "green", "CERRADO": "dim", "TRABAJANDO": "cyan"}.get(e.to, "")
        return f"agent {e.agent:<4} {frm} {arrow} {e.to}  ({e.reason})", style
    if t == "dod.verdict":
        return f"dod   {e.agent:<4} verdict {e.verdict} by {e.verifier}", "green"
    if t == "dod.flagged":
        return f"dod   {e.agent:<4} flagged {e.flag}", "yellow"
    if t == "step.changed":
        return f"run   {e.run} step {e.step}: {g('from_') or 'new'} {arrow} {e.to}", "blue"
    if t == "rule.violated":
        return f"run   {e.run} RULE VIOLATED {e.rule}: {e.detail}", "bold red"
    if t == "run.changed":
        return f"run   {e.run} seen (branch {e.branch}, failures {e.failures})", "blue"
    if t == "wp.changed":
        return f"wp    {e.mission}/{e.wp}: {g('from_') or 'new'} {arrow} {e.to}", "green"
    if t == "mission.completed":
        return f"mission {e.mission} completed ({e.wps} work packages done)", "bold green"
    if t == "circuit.changed":
        return f"circuit {e.scope}: {g('from_') or 'new'} {arrow} {e.to}", "dim"
    if t.startswith("notice."):
        extra = g("title") or g("error")
        return f"notice {t.split('.', 1)[1]} (covers {len(g('covers', []))} events) {extra}".rstrip(), "magenta"
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


def classified(agent: str, to: str) -> Callable[[Any], bool]:
    return lambda r: r.type == "agent.classified" and r.event.agent == agent and r.event.to == to


def of_type(t: str, **fields: Any) -> Callable[[Any], bool]:
    return lambda r: r.type == t and all(getattr(r.event, k, None) == v for k, v in fields.items())


def child_env() -> dict[str, str]:
    drop = ("FLEETWATCH_DB", "FLEETWATCH_CONFIG", "NOTIFY_SOCKET", "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def fleetwatch_argv(*args: str) -> list[str]:
    """This very install's fleetwatch (no PATH lookup): ``python -c main()``."""
    boot = "import sys; sys.argv[0] = 'fleetwatch'; from watcher.entry import main; main()"
    return [sys.executable, "-c", boot, *args]


@dataclass
class Tour:
    pace: Pace
    keep: bool = False
    console: Console = field(default_factory=lambda: Console(highlight=False))
    skipped: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- output ---------------------------------------------------------------------------
    def say(self, *items: Any) -> None:
        with self.lock:
            for it in items:
                self.console.print(it)
            self.console.file.flush()

    def act(self, n: int, title: str, explain: str) -> None:
        self.say(Text(""), Rule(f"{n}. {title}", align="left", style="bold"), Text(explain, style="italic"))

    def show_event(self, rec: Any) -> None:
        text, style = describe(rec, self.arrow)
        line = Text(f"  {time.strftime('%H:%M:%S')} #{rec.seq:<3} ", style="dim")
        line.append(text, style=style)
        self.say(line)

    def show_push(self, title: str, message: str) -> None:
        self.say(Panel(Text(message or "(empty)"), title=Text(title or "(no title)", style="bold"),
                       subtitle="what the phone shows", expand=False, border_style="magenta", width=76))

    def expect(self, what: str, pred: Callable[[Any], bool], timeout: float | None = None, since: int = 0) -> Any:
        rec = self.tail.wait(pred, self.pace.timeout if timeout is None else timeout, since)
        if rec is None:
            self.skipped.append(what)
            self.say(Text(f"  (not seen within {self.pace.timeout if timeout is None else timeout:.0f}s: "
                          f"{what}; going on)", style="yellow"))
        return rec

    def beat(self, scale: float = 1.0) -> None:
        time.sleep(self.pace.beat * scale)

    def run_cli(self, *args: str, show: bool = True) -> subprocess.CompletedProcess:
        shown = " ".join(a if a.replace("-", "").replace("_", "").isalnum() else json.dumps(a) for a in args)
        if show:
            self.say(Text(f"  $ fleetwatch {shown}", style="bold"))
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
        try:
            return self._tour(t0)
        except KeyboardInterrupt:
            self.say(Text("interrupted", style="yellow"))
            return 130
        finally:
            self._stop_watcher()
            if self.tail is not None:
                self.tail.close()
            self.phone.close()
            if self.keep:
                self.say(Text(f"kept the demo folder: {self.root}", style="bold"))
            else:
                shutil.rmtree(self.root, ignore_errors=True)

    def _tour(self, t0: float) -> int:
        p, world = self.pace, Fleet(self.root)
        self.cfg = world.build(self.phone.port, p)
        notify = importlib.util.find_spec("watcher.notifier") is not None
        self.say(Panel(Text.assemble(
            ("fleetwatch demo", "bold"), " - a simulated fleet of 8 AI coding agents, one pipeline run and two "
            "missions, watched by the real watcher. Every line below is an event from its append-only log.\n",
            ("folder: ", "dim"), self.root), expand=False, width=80))
        self.act(1, "The fleet at work", "Seven agents are busy; a run and two missions are in flight. "
                 "The watcher classifies each agent on first sight.")
        self.proc = subprocess.Popen(fleetwatch_argv("run", "--config", self.cfg, "--db", self.db, "--log-level", "warning"),
                                     env=child_env(), stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.root, "watcher.log"), "wb"))
        self.tail = Tail(self.db, self.show_event)
        started = self.tail.wait(of_type("watcher.started"), 20)
        if started is None:
            return self._watcher_failed()
        for a in AGENTS:
            self.expect(f"{a} TRABAJANDO", classified(a, "TRABAJANDO"))
        self.expect("wp m2-wp1 seen", of_type("wp.changed", wp="m2-wp1"))
        self.beat()

        self.act(2, "Trouble, all at once", "a02 asks a question, a07 hits a blocker, run T2 begins `apply` "
                 "although its audit failed (diagnose_only), and mission m2 needs a human approval.")
        mark = self.tail.head()
        world.goal("a02", "waiting", "preguntando")
        world.goal("a07", "busy", "bloqueado")
        world.steps(analyze={"status": "done", "at": _iso(time.time() - 5)},
                    apply={"status": "begin", "at": _iso(time.time())})
        world.wp("m2-wp1", "APPROVAL_REQUIRED")
        self.expect("a02 RECLAMA", classified("a02", "RECLAMA"), since=mark)
        self.expect("a07 RECLAMA", classified("a07", "RECLAMA"), since=mark)
        self.expect("rule violation on T2", of_type("rule.violated"), since=mark)
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
        if self.expect("a03 DICE_TERMINADO", classified("a03", "DICE_TERMINADO"), since=mark):
            self.beat(0.5)
            r = self.run_cli("verdict", "a03", "met", "--verifier", "demo-verifier", "--evidence", "pytest green")
            self.say(Text("  " + (r.stdout.strip() or r.stderr.strip()), style="dim"))
            if r.returncode == 0:
                self.expect("dod.verdict for a03", of_type("dod.verdict", agent="a03"), since=mark)
            else:
                self.skipped.append("verdict (the verdict command failed)")
        self.beat()

        self.act(4, "Silence, a bad launch, an exit", f"a04 goes idle mid-task and nothing changes on disk: "
                 f"after stall_after={p.stall_after}s time alone makes it ESTANCADO. Meanwhile a05 is "
                 "launched without a dod_contract, and a06's session is removed.")
        mark = self.tail.head()
        world.goal("a04", "idle", "haciendo")
        world.goal("a05", "busy", "haciendo", contract=False)
        world.remove("a06")
        self.expect("a05 MAL_LANZADO", classified("a05", "MAL_LANZADO"), since=mark)
        self.expect("a06 CERRADO", classified("a06", "CERRADO"), since=mark)
        self.expect("a04 ESTANCADO", classified("a04", "ESTANCADO"), timeout=p.stall_after + p.timeout, since=mark)
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
        self.say(Text(""), Rule("What you just saw", align="left", style="bold"), Text(
            "- every agent class: TRABAJANDO, RECLAMA, DICE_TERMINADO, ESTANCADO, MAL_LANZADO, CERRADO;\n"
            "- a DoD claim checked by a verifier (`fleetwatch verdict`), never by the agent itself;\n"
            "- a pipeline rule violation (audit-branch) and mission progress from a SQLite store;\n"
            f"- {len(self.phone.pushes)} push(es) to your phone: urgent items coalesced into ONE message;\n"
            "- an append-only, hash-chained log (`fleetwatch tail`, `fleetwatch verify`).\n\n"
            "Next steps:\n"
            "  fleetwatch init               # write a commented config, then point it at your agents\n"
            "  fleetwatch doctor             # check config, sources, log, notify URLs\n"
            "  fleetwatch install-service    # run it for weeks as a systemd --user service\n"
            "  README.md                     # sources, notifications, every command"))
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
