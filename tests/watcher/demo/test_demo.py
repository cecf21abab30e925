"""`fleetwatch demo`: the tour runs to its end on the real watcher (a subprocess, output piped),
shows every class, a grouped push and the summary; a closed pipe ends it cleanly."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from events.types import AgentClassified, DodVerdict, MissionCompleted, NoticeSent, RuleViolated, StepChanged, WpChanged
from tests.support.exe import TESTS

CLASSES = ("TRABAJANDO", "RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO", "CERRADO")
BOOT = "import sys; sys.argv[0] = 'fleetwatch'; from watcher.entry import main; main()"


def fleetwatch(*args: str, tmp: str, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    env["TMPDIR"] = tmp  # the demo's temporary folder lands in the test's tmp_path
    return subprocess.run([sys.executable, "-c", BOOT, *args], env=env, capture_output=True, text=True, **kw)


def boxes(out: str) -> list[str]:
    """The contents of every rich box (panel) in the output."""
    found, cur = [], None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith(("╭", "+-")) and cur is None:
            cur = [s]
        elif s.startswith(("╰", "+-")) and cur is not None:
            cur.append(s)
            found.append("\n".join(cur))
            cur = None
        elif cur is not None:
            cur.append(s)
    return found


@pytest.mark.slow
def test_demo_fast_runs_to_its_end(tmp_path):
    r = fleetwatch("demo", "--fast", "--keep", tmp=str(tmp_path), timeout=180)
    out = r.stdout
    assert r.returncode == 0, r.stderr + out[-3000:]
    for cls in CLASSES:  # every class shows up in the live tail
        assert re.search(rf"agent a\d\d .*(→|->) {cls}\b", out), cls
    assert "RULE VIOLATED audit-branch" in out
    assert "verdict met by demo-verifier" in out
    assert "mission m2 completed" in out
    # ONE push carrying several urgent items: both RECLAMA agents and the violated run
    pushes = [b for b in boxes(out) if "what the phone shows" in b]
    assert pushes, out
    assert any("a02" in b and "a07" in b and "T2-heart-0007" in b for b in pushes), pushes
    # the summary, printed after the watcher stopped
    assert "$ fleetwatch summary" in out
    summary = [b for b in boxes(out) if "fleetwatch summary" in b]
    assert summary and "VIOLATIONS" in summary[0], summary   # (a DoD already met is not news: no DICE_TERMINADO)
    assert "skipped:" not in out, out[-1500:]
    assert "demo finished" in out
    # --keep: the folder stays and holds an intact log, replayable to the same projections
    kept = [d for d in os.listdir(tmp_path) if d.startswith("fleetwatch-demo-")]
    assert len(kept) == 1
    cfg = str(tmp_path / kept[0] / "config.toml")
    v = fleetwatch("verify", "--config", cfg, tmp=str(tmp_path), timeout=30)
    assert v.returncode == 0, v.stdout + v.stderr
    rb = fleetwatch("rebuild", "--check", "--config", cfg, tmp=str(tmp_path), timeout=30)
    assert rb.returncode == 0, rb.stdout + rb.stderr


def test_demo_into_a_closed_pipe_exits_0_and_cleans_up(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    env["TMPDIR"] = str(tmp_path)
    cmd = f"{sys.executable} -c \"{BOOT}\" demo --fast | head -3; exit ${{PIPESTATUS[0]}}"
    r = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "fleetwatch demo" in r.stdout
    assert not [d for d in os.listdir(tmp_path) if d.startswith("fleetwatch-demo-")]  # folder removed
    assert r.stderr == ""


def test_demo_help_lists_its_flags():
    from typer.testing import CliRunner

    from watcher.cli import app

    r = CliRunner().invoke(app, ["demo", "--help"])
    assert r.exit_code == 0
    assert "--fast" in r.output and "--keep" in r.output


@pytest.mark.parametrize("event, expected", [
    # first sight: "new" stands for the null `from`
    (AgentClassified(agent="a01", from_=None, to="TRABAJANDO", reason="busy"), "agent a01  new -> TRABAJANDO  (busy)"),
    # a class change with its reason
    (AgentClassified(agent="a02", from_="TRABAJANDO", to="RECLAMA", reason="waiting for the human"),
     "agent a02  TRABAJANDO -> RECLAMA  (waiting for the human)"),
    # a verdict names the verifier
    (DodVerdict(agent="a03", verdict="met", verifier="v1"), "dod   a03  verdict met by v1"),
    # a step's first status
    (StepChanged(run="T2", step="apply", to="begin"), "run   T2 step apply: new -> begin"),
    # a violation names the rule and its detail
    (RuleViolated(run="T2", rule="audit-branch", detail="apply began"), "run   T2 RULE VIOLATED audit-branch: apply began"),
    # a work package move
    (WpChanged(mission="m2", wp="m2-wp1", from_="RUNNING", to="DONE"), "wp    m2/m2-wp1: RUNNING -> DONE"),
    # one package: singular-safe wording
    (MissionCompleted(mission="m2", wps=1), "mission m2 completed (1 work package(s) done)"),
    # a push covering one event: singular
    (NoticeSent(notice="n1", covers=[3], title="1 stalled"), "notice sent (covers 1 event) 1 stalled"),
])
def test_describe_one_line_per_event(log, event, expected):
    from watcher.demo.show import describe

    log.append([event], 1_700_000_000.0)
    rec = log.last(1)[0]
    assert describe(rec, "->")[0] == expected


def test_demo_missions_match_the_fixture(tmp_path):
    """The demo carries its own copy of fixtures/missions.sql: same rows."""
    import sqlite3

    from watcher.demo.world import MISSIONS_SQL

    fixture = os.path.join(str(TESTS), "fixtures", "missions.sql")
    if not os.path.exists(fixture):
        pytest.skip("shared fixtures not present")
    rows = []
    for i, sql in enumerate((MISSIONS_SQL, open(fixture, encoding="utf-8").read())):
        db = sqlite3.connect(tmp_path / f"m{i}.db")
        db.executescript(sql)
        rows.append([db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                     for t in ("missions", "work_packages", "circuits")])
        db.close()
    assert rows[0] == rows[1]


def test_demo_says_why_when_the_watcher_cannot_start(tmp_path, monkeypatch, capsys):
    """A watcher that exits at once (here: a bad config) ends the demo with exit 1, its output
    shown, and the folder removed."""
    import tempfile

    import watcher.demo.show as demo

    build = demo.Fleet.build

    def bad_build(self, port, pace):
        cfg = build(self, port, pace)
        with open(cfg, "a", encoding="utf-8") as f:
            f.write("\nbogus = 1\n")
        return cfg

    monkeypatch.setattr(demo.Fleet, "build", bad_build)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert demo.run(fast=True) == 1
    out = capsys.readouterr().out
    assert "the watcher did not start" in out and "bogus" in out
    assert not [d for d in os.listdir(tmp_path) if d.startswith("fleetwatch-demo-")]
