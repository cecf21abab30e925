"""`status`, `summary`, `verdict`, `rebuild` on real logs; incremental folding == full replay."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from events.log import EventLog, Recorded, iso
from events.types import (AgentClassified, DodContractChanged, DodVerdict, RuleViolated, RunChanged, StepChanged,
                          SwarmChanged, WpChanged, encode_data, tag_of)
from projections.base import decode_state, encode_state, registry
from watcher.cli import app
from watcher.cli.status import cap_evidence, check_verdict
from watcher.runtime.state import Projections
from tests.support.exe import FLEETWATCH
from tests.support.eventgen import EVENTS
from tests.support.exe import TESTS

runner = CliRunner()
T0 = 1_800_000_000.0
FIXTURES = os.path.join(str(TESTS), "fixtures")


def write(elog: EventLog, proj: Projections, events, now: float) -> None:
    """Append like the watcher: events and snapshots in one transaction."""
    def snap(recs):
        for r in recs:
            proj.fold(r)
        return proj.encoded()

    elog.append(events, now, snapshot=snap)


def invoke(*args):
    return runner.invoke(app, [*args], catch_exceptions=False)


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("FLEETWATCH_CONFIG", raising=False)
    monkeypatch.delenv("FLEETWATCH_DB", raising=False)
    return tmp_path


def fleet_log(path, now=None) -> EventLog:
    now = now or time.time()
    elog = EventLog(str(path), durability="normal")
    p = Projections()
    cls = [("a1", "TRABAJANDO", "busy", "haciendo"), ("a2", "RECLAMA", "waiting", "preguntando"),
           ("a3", "DICE_TERMINADO", "idle", "hecho"), ("a4", "ESTANCADO", "idle", "haciendo"),
           ("a5", "MAL_LANZADO", "busy", "haciendo"), ("a6", "DICE_TERMINADO", "idle", "hecho"),
           ("a0", "RECLAMA", "busy", "bloqueado")]
    write(elog, p, [AgentClassified(agent=a, to=c, state=s, phase=ph, reason="r", source="fleet",
                                    contract_sha256=None if c == "MAL_LANZADO" else f"sha-{a}", contract_len=9)
                    for a, c, s, ph in cls], now - 600)
    write(elog, p, [WpChanged(mission="m2", wp="m2-wp1", to="APPROVAL_REQUIRED", source="missions"),
                    DodContractChanged(agent="a4", old_sha256="sha-a4", new_sha256="x"),
                    SwarmChanged(group="g1", child="c1", to="running", source="sw")], now - 300)
    write(elog, p, [DodVerdict(agent="a6", verdict="met", verifier="v1", evidence="pytest green")], now - 200)
    return elog


# ---- status / summary -------------------------------------------------------------------------
def test_status_json(env):
    db = env / "events.db"
    fleet_log(db).close()
    r = invoke("status", "--json", "--db", str(db))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    agents = {a["agent"]: a for a in doc["agents"]}
    assert set(agents) == {"a0", "a1", "a2", "a3", "a4", "a5", "a6"}
    for a in doc["agents"]:
        assert {"agent", "class", "since", "dod_status"} <= set(a)
    assert [a["agent"] for a in doc["agents"]][:2] == ["a0", "a2"]      # RECLAMA first
    assert agents["a3"]["dod_status"] == "claimed" and agents["a6"]["dod_status"] == "met"
    assert doc["missions"]["missions"]["m2"]["approval_required"] == ["m2-wp1"]
    assert doc["swarms"]["groups"]["g1"]["counts"]["running"] == 1
    assert {"runs", "sources", "missions", "swarms"} <= set(doc)
    r = invoke("status", "--db", str(db))                                # piped: plain text
    assert r.exit_code == 0 and "RECLAMA" in r.stdout and "\x1b[" not in r.stdout


def test_summary_order_and_counts(env):
    db = env / "events.db"
    fleet_log(db).close()
    r = invoke("summary", "--db", str(db))
    assert r.exit_code == 0, r.output
    heads = [ln for ln in r.stdout.splitlines() if not ln.startswith("  ")]
    assert heads == ["RECLAMA (2)", "DICE_TERMINADO (1)", "ESTANCADO (1)", "MAL_LANZADO (1)", "APPROVALS (1)",
                     "VIOLATIONS (1)", "SWARMS (1)", "DONE (1)"]
    done = r.stdout.split("DONE (1)\n")[1]                               # DoD already met: needs nobody,
    assert "a6" not in r.stdout.split("DONE (1)")[0] and done.startswith("  a6: DoD met by ")   # news last
    assert "  a4: DoD contract rewritten (1x)" in r.stdout
    assert "a1" not in r.stdout                                           # working agents are not news
    again = invoke("summary", "--db", str(db))
    assert again.stdout == r.stdout                                       # stable
    js = json.loads(invoke("summary", "--json", "--db", str(db)).stdout)
    assert [g["group"] for g in js["groups"]] == ["RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO",
                                                  "APPROVALS", "VIOLATIONS", "SWARMS", "DONE"]   # one case, one order


def test_missing_log_is_graceful(env):
    db = env / "none" / "events.db"
    r = invoke("status", "--json", "--db", str(db))
    assert r.exit_code == 0 and json.loads(r.stdout)["agents"] == []
    r = invoke("summary", "--db", str(db))
    assert r.exit_code == 0 and "all quiet" in r.stdout
    assert invoke("rebuild", "--check", "--db", str(db)).exit_code == 0
    assert not db.exists()                                                # readers create nothing


# ---- verdict ----------------------------------------------------------------------------------
# (agent, verifier, refused?)
VERDICT_CHECKS = [
    ("a7", "v1", False),      # independent verifier
    ("a7", "a7", True),       # self-approval
    ("a7", " A7 ", True),     # self, modulo case and blanks
    ("a7", "", True),         # no verifier
    ("", "v1", True),         # no agent
]


@pytest.mark.parametrize("agent,verifier,refused", VERDICT_CHECKS)
def test_check_verdict(agent, verifier, refused):
    assert (check_verdict(agent, verifier) is not None) == refused


def test_verdict_self_refused_nothing_written(env):
    db = env / "events.db"
    elog = fleet_log(db)
    head = elog.head()
    r = invoke("verdict", "a3", "met", "--verifier", "a3", "--evidence", "trust me", "--db", str(db))
    assert r.exit_code == 2 and "refused" in r.stderr
    assert elog.head() == head
    r = invoke("verdict", "a3", "approved", "--verifier", "v2", "--evidence", "x", "--db", str(db))
    assert r.exit_code == 2 and elog.head() == head


def test_verdict_appends_and_status_follows(env):
    db = env / "events.db"
    elog = fleet_log(db)
    long = "ran pytest -q: 120 passed; " * 200
    r = invoke("verdict", "a3", "unevaluable", "--verifier", "v2", "--evidence", long, "--db", str(db))
    assert r.exit_code == 0, r.output
    last = elog.last(1)[0]
    assert last.type == "dod.verdict" and last.event.verifier == "v2" and len(last.event.evidence) == 2000
    doc = json.loads(invoke("status", "--json", "--db", str(db)).stdout)
    assert {a["agent"]: a["dod_status"] for a in doc["agents"]}["a3"] == "unevaluable"
    assert "a3: DoD unevaluable per v2" in invoke("summary", "--db", str(db)).stdout


def test_cap_evidence():
    assert cap_evidence("  ok  ") == "ok"
    assert len(cap_evidence("x" * 5000)) == 2000


def test_verdict_while_the_watcher_runs(env):
    """A real `fleetwatch run` holds the log; `verdict` appends; the watcher folds it."""
    goals = env / "goals"
    shutil.copytree(f"{FIXTURES}/goals", goals)
    db = env / "events.db"
    cfg = env / "config.toml"
    cfg.write_text(f'[store]\npath = "{db}"\ndurability = "normal"\n[watch]\ninterval = "1s"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n')
    exe = [FLEETWATCH]
    run = subprocess.Popen([*exe, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            if db.exists() and invoke("status", "--json", "--config", str(cfg)).stdout.count('"agent"') >= 7:
                break
            time.sleep(0.2)
        r = subprocess.run([*exe, "verdict", "a03", "met", "--verifier", "v9", "--evidence", "curl ok",
                            "--config", str(cfg)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        doc = json.loads(invoke("status", "--json", "--config", str(cfg)).stdout)
        assert {a["agent"]: a["dod_status"] for a in doc["agents"]}["a03"] == "met"
        r = subprocess.run([*exe, "verdict", "a03", "met", "--verifier", "a03", "--evidence", "x",
                            "--config", str(cfg)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2
    finally:
        run.terminate()
        run.wait(20)
    r = invoke("rebuild", "--check", "--config", str(cfg))
    assert r.exit_code == 0, r.output


# ---- rebuild ----------------------------------------------------------------------------------
def test_rebuild_check_after_churn_and_tamper(env):
    db = env / "events.db"
    elog = fleet_log(db)
    p = Projections.load(elog)
    for i in range(50):                                                   # churn: many small batches
        write(elog, p, [AgentClassified(agent=f"b{i % 7}", from_=None, to=["TRABAJANDO", "DICE_TERMINADO"][i % 2],
                                        source="fleet", contract_sha256="s"),
                        WpChanged(mission="m1", wp=f"w{i % 5}", to=["READY", "DONE"][i % 2], source="missions"),
                        SwarmChanged(group="g", child=f"c{i % 3}", to=["running", "done"][i % 2], source="sw")],
              T0 + i)
    r = invoke("rebuild", "--check", "--db", str(db))
    assert r.exit_code == 0, r.output
    assert "snapshots match" in r.stdout
    snaps = elog.snapshots()
    seq, data = snaps["dod"]
    bad = msgspec.json.decode(data)
    bad["agents"]["a6"]["verdict"]["verdict"] = "failed"
    elog.put_snapshots(seq, {"dod": encode_state(bad)})
    r = invoke("rebuild", "--check", "--db", str(db))
    assert r.exit_code == 1 and "'dod'" in r.stderr and "agents.a6.verdict.verdict" in r.stderr
    assert invoke("rebuild", "--db", str(db)).exit_code == 0              # repairs the snapshots
    assert invoke("rebuild", "--check", "--db", str(db)).exit_code == 0


# ---- property: incremental folding (snapshot round trips at random cuts) == full replay --------
def _recs(events):
    return [Recorded(i, f"id{i}", iso(T0 + i * 7.5), tag_of(e), e.subject, i, e, encode_data(e), b"")
            for i, e in enumerate(events, 1)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(EVENTS, max_size=40), cuts=st.sets(st.integers(0, 40), max_size=5))
def test_incremental_equals_replay(events, cuts):
    mods = registry()
    recs = _recs(events)
    full = {n: m.initial() for n, m in mods.items()}
    for r in recs:
        for n, m in mods.items():
            full[n] = m.fold(full[n], r)
    inc = {n: m.initial() for n, m in mods.items()}
    for i, r in enumerate(recs):
        if i in cuts:  # the watcher stored a snapshot here and restarted from it
            inc = {n: decode_state(m, encode_state(inc[n])) for n, m in mods.items()}
        for n, m in mods.items():
            inc[n] = m.fold(inc[n], r)
    for n in mods:
        assert encode_state(inc[n]) == encode_state(full[n]), n


def test_rich_tables_render_ids_literally(env, capsys):
    from watcher.cli.render import status_rich as render_rich
    from watcher.cli.status import build_status
    from watcher.config import Config

    db = env / "events.db"
    elog = fleet_log(db)
    p = Projections.load(elog)
    write(elog, p, [AgentClassified(agent="[bold]x", to="RECLAMA", source="fleet", contract_sha256="s")], time.time())
    doc = build_status(Config(), Projections.load(elog).states, elog.head()[0], time.time())
    render_rich(doc)
    out = capsys.readouterr().out
    assert "[bold]x" in out and "Missions" in out and "Swarms" in out


def test_summary_lists_run_violations(env):
    """Regression: the runs projection gives summary lines (no items); they belong under VIOLATIONS."""
    db = env / "events.db"
    elog = EventLog(str(db), durability="normal")
    p = Projections()
    write(elog, p, [RunChanged(run="T1", branch="diagnose_only", source="runs"),
                    StepChanged(run="T1", step="apply", to="begin"),
                    RuleViolated(run="T1", rule="audit-branch", detail="apply began on a tainted audit")], time.time())
    elog.close()
    r = invoke("summary", "--db", str(db))
    assert "VIOLATIONS (1)" in r.stdout and "T1" in r.stdout and "audit-branch" in r.stdout, r.stdout


def test_status_shows_the_last_tick_not_the_last_class_change(env):
    """agent.updated (state/phase/task/target within a class) is what status reports."""
    from events.types import AgentUpdated

    db = env / "events.db"
    elog = EventLog(str(db), durability="normal")
    p = Projections()
    now = time.time()
    write(elog, p, [AgentClassified(agent="a1", to="RECLAMA", state="waiting", phase="preguntando", task="t1",
                                    source="fleet", contract_sha256="x")], now - 60)
    write(elog, p, [AgentUpdated(agent="a1", state="busy", phase="preguntando", task="t2", target="fleet:3",
                                 last_activity=iso(now - 5), source="fleet", changed=["state", "task", "target"])], now)
    elog.close()
    a = json.loads(invoke("status", "--json", "--db", str(db)).stdout)["agents"][0]
    assert (a["class"], a["state"], a["phase"], a["task"], a["target"]) == ("RECLAMA", "busy", "preguntando", "t2", "fleet:3")
    assert 4 <= a["activity_age_s"] < 60 and a["age_s"] >= 59
    plain = invoke("status", "--db", str(db)).stdout
    head = next(ln for ln in plain.splitlines() if "agent" in ln and "class" in ln)
    assert head.split() == ["agent", "class", "for", "state/phase", "task", "active", "target", "DoD", "handled"]
    assert "busy/preguntando" in plain and "t2" in plain and "fleet:3" in plain
