"""The demo's world: the scripted fleet in a temporary folder and the phone (a push receiver).

``Fleet`` writes eight goal.json agents (a ninth is launched with ``fleetwatch launch`` into a
private tmux server, when tmux is installed), one steps.json run (fixture T2-heart-0007, adapted so a
later act breaks the audit-branch rule), a missions SQLite database (a copy of
fixtures/missions.sql, built with the stdlib sqlite3) and the config. Files are replaced
atomically, as agents' hooks do. ``Phone`` is a local HTTP server receiving apprise ``json://``
pushes. No repository fixture is needed at run time.
"""
from __future__ import annotations

import http.server
import json
import os
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

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


def iso(ts: float) -> str:
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
        self.socket = f"fwdemo{os.getpid()}"   # a private tmux server for the launched agent (killed at the end)
        self.work = os.path.join(root, "work")

    def goal(self, agent: str, state: str, phase: str, *, contract: bool = True, **extra: Any) -> None:
        task, dod_contract = AGENTS.get(agent, ("write docs", ""))
        doc = {"agent": agent, "task": task, "state": state, "phase": phase,
               "dod": f"demo: {task}", "dod_contract": dod_contract if contract else "",
               "dod_status": "pending", "last_activity": iso(time.time())}
        doc.update(extra)
        _write_json(os.path.join(self.agents_dir, agent, "goal.json"), doc)

    def remove(self, agent: str) -> None:
        shutil.rmtree(os.path.join(self.agents_dir, agent), ignore_errors=True)

    def steps(self, **changes: dict[str, Any]) -> None:
        self.run_doc["steps"].update(changes)
        _write_json(os.path.join(self.runs_dir, RUN, "steps.json"), self.run_doc)

    def wp(self, wp: str, state: str) -> None:
        with sqlite3.connect(self.missions_db) as db:
            db.execute("UPDATE work_packages SET state = ?, updated_at = ? WHERE id = ?", (state, iso(time.time()), wp))
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
            "steps": {"facts": {"status": "done", "at": iso(t0 - 300)},
                      "audit": {"status": "done", "at": iso(t0 - 200), "data": {"verdict": "fail", "tainted": True}},
                      "analyze": {"status": "begin", "at": iso(t0 - 60)}}}
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

[launch]
socket = {q(self.socket)}
session = "demo"
goals_dir = {q(self.agents_dir)}
argv = ["sh", "-c", "sleep 1; echo built > built.txt; fleetwatch claim done; exec sleep 60"]

[dod]
run_checks = true
on_met = "close"

[[sources]]
name = "panes"
kind = "tmux"
socket = {q(self.socket)}

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
        pushes: list[Any] = []
        self.pushes = pushes

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
