"""`fleetwatch report`: a scripted fleet on a virtual clock with known answers, through a real log
and the real CLI process (JSON fields, terminal output, a self-contained HTML page)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser

import pytest

from events.log import EventLog
from events.timefmt import iso
from events.types import (AgentClassified, AgentNudged, DodFlagged, DodVerdict, NoticeSent, RuleViolated,
                          SourceFailed, SourceRecovered, StepChanged, WatcherStarted, WatcherStopped)
from projections.report import fold as report
from projections.report.view import figures, quantile, today_line
from tests.support.exe import FLEETWATCH

T0 = 1_795_132_800.0          # 2026-11-20T00:00:00Z (in the past: --since 30d covers it)
MIN = 60.0
FW = FLEETWATCH


def cls(agent, frm, to):
    return AgentClassified(agent=agent, from_=frm, to=to, reason="r", source="fleet")


def scripted(log: EventLog) -> None:
    """The fleet: known episodes at known times."""
    at = lambda m: T0 + 8 * 3600 + m * MIN   # noqa: E731  (08:00 UTC + m minutes)
    log.append([WatcherStarted(version="t", pid=1)], at(0))
    # three RECLAMA episodes of 10, 20 and 30 minutes (a1, a2, a3), answered back to work
    for i, (agent, length) in enumerate((("a1", 10), ("a2", 20), ("a3", 30))):
        log.append([cls(agent, None, "TRABAJANDO")], at(i))
        log.append([cls(agent, "TRABAJANDO", "RECLAMA")], at(10 + i))
        log.append([NoticeSent(notice=f"n{i}", covers=[1, 2], title="t", severity="urgent")], at(10 + i))
        log.append([cls(agent, "RECLAMA", "TRABAJANDO")], at(10 + i + length))
    # four claims: three met, one failed (a false done); one self-approval refused
    for i, agent in enumerate(("a1", "a2", "a3", "a4")):
        if agent == "a4":
            log.append([cls("a4", None, "TRABAJANDO")], at(60))
        log.append([cls(agent, "TRABAJANDO", "DICE_TERMINADO")], at(100 + i))
        verdict = "failed" if agent == "a4" else "met"
        log.append([DodVerdict(agent=agent, verdict=verdict, verifier="human-lead", evidence="e")], at(110 + 2 * i))
    log.append([DodFlagged(agent="a4", flag="self-approved", detail="met|a4")], at(115))
    # a stall nudged back to work, and one left alone that closes
    log.append([cls("a4", "DICE_TERMINADO", "ESTANCADO")], at(130))
    log.append([AgentNudged(agent="a4", attempt=1, ok=True, stall_seq=1)], at(131))
    log.append([cls("a4", "ESTANCADO", "TRABAJANDO")], at(140))
    # runs: a step done, a failed one, a retry, a rule violation; a source down for 5 minutes
    log.append([StepChanged(run="r1", step="facts", from_=None, to="done", attempt=1)], at(150))
    log.append([StepChanged(run="r1", step="audit", from_="begin", to="fail", attempt=1)], at(151))
    log.append([StepChanged(run="r1", step="audit", from_="fail", to="begin", attempt=2)], at(152))
    log.append([RuleViolated(run="r1", rule="no-redo", detail="d", key="k")], at(153))
    log.append([SourceFailed(source="fleet", error="x", error_class="timeout")], at(160))
    log.append([SourceRecovered(source="fleet", error="x")], at(165))
    log.append([WatcherStopped(version="t", pid=1, reason="signal")], at(200))


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "events.db"
    log = EventLog(str(path), durability="normal")
    scripted(log)
    log.close()
    return path


def fold_all(path) -> dict:
    log = EventLog(str(path), create=False, readonly=True)
    st = report.initial()
    for rec in log.read():
        st = report.fold(st, rec)
    log.close()
    return st


def test_known_answers(db):
    st = fold_all(db)
    fig = figures(st, until=T0 + 10 * 3600)
    r = fig["load"]["reclama"]
    assert r["episodes"] == 3 and r["p50_s"] == 20 * MIN and r["max_s"] == 30 * MIN
    assert r["agent_hours"] == 1.0 and r["open"] == 0
    d = fig["dod"]
    assert (d["claims"], d["met"], d["failed"], d["false_done"]) == (4, 3, 1, 1)
    assert d["false_done_rate"] == 0.25 and d["never_verified"] == 0
    assert d["self_approvals_refused"] == 1
    assert d["claim_to_verdict"]["count"] == 4
    ld = fig["load"]
    assert ld["pushes"] == 3 and ld["items_per_push"] == 2.0 and ld["pushes_by_hour"][8] == 3
    s = fig["stalls"]
    assert s["episodes"] == 1 and s["nudges"] == 1 and s["after_nudge"] == {"TRABAJANDO": 1}
    assert fig["runs"] == {"steps_done": 1, "steps_failed": 1, "violations": {"no-redo": 1}, "retries": 1,
                           "abandoned": 0}
    w = fig["watcher"]
    assert w["uptime_s"] == 200 * MIN and w["starts"] == 1 and w["restarts"] == 0
    assert w["source_failures"] == {"fleet": 1} and w["source_down"]["max_s"] == 5 * MIN
    assert fig["agents"]["a1"]["seconds"]["RECLAMA"] == 10 * MIN


def test_percentiles_interpolate():
    assert quantile([600.0, 1200.0, 1800.0], 0.5) == 1200.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([], 0.5) is None


def test_open_episodes_count_up_to_until(tmp_path):
    """An agent still waiting at the end: its wait counts as open, on a copy (state unchanged)."""
    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    log.append([cls("a1", None, "RECLAMA")], T0)
    log.append([cls("a2", None, "DICE_TERMINADO")], T0)
    log.close()
    st = fold_all(tmp_path / "e.db")
    before = json.dumps(st, sort_keys=True)
    fig = figures(st, until=T0 + 3600)
    assert fig["load"]["reclama"]["open"] == 1 and fig["load"]["reclama"]["agent_hours"] == 1.0
    assert fig["dod"]["open_claims"] == 1 and fig["dod"]["never_verified"] == 1
    assert json.dumps(st, sort_keys=True) == before
    assert today_line(st, T0 + 3600) == "today: 0 DoD met · 0 pushes · waited on you 60m (1 now)"


def test_waiting_split_at_midnight(tmp_path):
    """A wait from 23:30 to 00:30 is half an hour on each day."""
    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    log.append([cls("a1", None, "RECLAMA")], T0 - 30 * MIN)
    log.append([cls("a1", "RECLAMA", "TRABAJANDO")], T0 + 30 * MIN)
    log.close()
    fig = figures(fold_all(tmp_path / "e.db"), until=T0 + 3600)
    assert [(d["day"], d["reclama_s"]) for d in fig["days"]] == [("2026-11-19", 1800.0), ("2026-11-20", 1800.0)]


def test_a_watcher_that_died_is_a_restart(tmp_path):
    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    log.append([WatcherStarted(version="t", pid=1)], T0)
    log.append([cls("a1", None, "TRABAJANDO")], T0 + 600)
    log.append([WatcherStarted(version="t", pid=2)], T0 + 900)    # no stop: pid 1 was killed
    log.append([WatcherStopped(version="t", pid=2, reason="signal")], T0 + 1200)
    log.close()
    w = figures(fold_all(tmp_path / "e.db"), until=T0 + 1200)["watcher"]
    assert w["restarts"] == 1 and w["starts"] == 2 and w["uptime_s"] == 600 + 300


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([FW, *map(str, args)], capture_output=True, text=True, timeout=120)


def test_cli_json_fields_are_stable(db):
    r = run_cli("report", "--json", "--db", db, "--until", iso(T0 + 10 * 3600))
    assert r.returncode == 0, r.stderr
    fig = json.loads(r.stdout)
    assert set(fig) == {"schema", "range", "dod", "load", "stalls", "agents", "runs", "missions", "watcher", "days",
                        "loop"}
    assert fig["loop"] == {"launched": 0, "acted": {}, "launch_to_met": {"count": 0, "p50_s": None, "max_s": None}}
    assert set(fig["dod"]) == {"met", "failed", "unevaluable", "claims", "false_done", "caught_by_checks", "false_done_rate",
                               "never_verified", "open_claims", "claim_to_verdict", "self_approvals_refused"}
    assert set(fig["load"]["reclama"]) == {"count", "total_s", "p50_s", "p90_s", "max_s", "episodes",
                                           "agent_hours", "open"}
    assert fig["load"]["reclama"]["p50_s"] == 1200.0 and fig["dod"]["false_done_rate"] == 0.25
    assert isinstance(fig["days"][0]["met"], int)


def test_cli_since_a_seq_and_a_duration(db):
    r = run_cli("report", "--json", "--db", db, "--since", "1000000")
    assert r.returncode == 0 and json.loads(r.stdout)["dod"]["claims"] == 0
    r = run_cli("report", "--json", "--db", db, "--since", "30d")
    assert r.returncode == 0 and json.loads(r.stdout)["dod"]["claims"] == 4


def test_cli_bad_since_exits_2_naming_it(db):
    r = run_cli("report", "--db", db, "--since", "last tuesday")
    assert r.returncode == 2 and "--since" in r.stderr and "last tuesday" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_terminal_output(db):
    r = run_cli("report", "--db", db, "--until", iso(T0 + 10 * 3600))
    assert r.returncode == 0, r.stderr
    assert "false done" in r.stdout and "25 %" in r.stdout and "Per agent" in r.stdout


def test_cli_reads_a_read_only_copy(db, tmp_path):
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        r = run_cli("report", "--json", "--db", db)
        assert r.returncode == 0, r.stderr
    finally:
        tmp_path.chmod(0o755)


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.figures: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "figure":
            self.figures.append(dict(attrs).get("id", ""))


@pytest.mark.slow
def test_html_is_self_contained_with_three_charts(db, tmp_path):
    pytest.importorskip("matplotlib", reason="the HTML report needs the report extra (matplotlib)")
    out = tmp_path / "r.html"
    r = run_cli("report", "--db", db, "--html", out)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    p = _Page()
    p.feed(text)
    assert p.figures == ["chart-dod", "chart-waiting", "chart-hours"]
    assert p.tags.count("svg") == 3 and "script" not in p.tags
    assert not re.search(r'(?:src|href)="(?!#)', text)     # nothing fetched from elsewhere


def test_agent_ids_are_escaped_in_html(tmp_path):
    pytest.importorskip("matplotlib", reason="the HTML report needs the report extra (matplotlib)")
    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    log.append([cls("<script>x</script>", None, "RECLAMA")], T0)
    log.close()
    out = tmp_path / "r.html"
    r = run_cli("report", "--db", tmp_path / "e.db", "--html", out)
    assert r.returncode == 0, r.stderr
    assert "<script>" not in out.read_text()


def test_rebuild_check_covers_the_report(db):
    """The report is a registered projection: rebuild stores its snapshot, --check agrees."""
    r = run_cli("rebuild", "--db", db)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli("rebuild", "--check", "--db", db)
    assert r.returncode == 0 and re.search(r"checked \d+ projection", r.stdout) and "match" in r.stdout, r.stdout + r.stderr
    log = EventLog(str(db), create=False, readonly=True)
    assert "report" in log.snapshots()
    log.close()


def test_a_log_ahead_of_this_clock_is_reported_whole(tmp_path):
    """A log whose events are later than now (a clock stepped back, a virtual-time soak) was a
    report of 0 days with every count 0; the report now ends at its last event."""
    future = 1_900_000_000.0           # 2030
    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    log.append([cls("a1", None, "RECLAMA")], future)
    log.append([cls("a1", "RECLAMA", "DICE_TERMINADO")], future + 600)
    log.close()
    r = run_cli("report", "--json", "--db", tmp_path / "e.db")
    fig = json.loads(r.stdout)
    assert fig["range"]["days"] == 1 and fig["dod"]["claims"] == 1 and fig["load"]["reclama"]["episodes"] == 1


def test_the_watchers_copy_forgets_closed_agents():
    """Bounded (the watcher's projection): per-agent figures of a CERRADO agent are dropped, so
    agents coming and going for months do not grow the snapshot; the CLI's copy keeps them."""
    from types import SimpleNamespace as NS

    def rec(seq, agent, frm, to):
        return NS(seq=seq, type="agent.classified", time=iso(T0 + seq), event=cls(agent, frm, to))

    for bounded, kept in ((True, False), (False, True)):
        st = report.initial(bounded=bounded)
        st = report.fold(st, rec(1, "gone", None, "TRABAJANDO"))
        st = report.fold(st, rec(2, "gone", "TRABAJANDO", "CERRADO"))
        assert ("gone" in st["per_agent"]) is kept


@pytest.mark.parametrize("time", [iso(T0), iso(T0 - 0.001), iso(T0 + 86399.9995), iso(T0 + 12.3456),
                                  "2026-11-19T23:59:59.999Z", "2026-11-20T00:00:00Z", "2026-11-19T23:30:00+01:00",
                                  "2026-11-20 00:00:00.000Z", "0999-01-01T00:00:00.000Z"])
def test_event_day_is_the_day_key_of_the_parsed_time(time):
    """The handlers' day read from the log time is the day computed from the time it parses to,
    for iso's shape and every other one TIME accepts (the shortcut takes only iso's)."""
    t = report.TIME(time)
    assert report.event_day(time, t) == report.day_key(t)


def test_event_day_over_a_year_of_iso_times():
    for i in range(0, 366 * 24 * 4):
        s = iso(T0 + i * 900.0 - 0.0005 * (i % 3))
        t = report.TIME(s)
        assert report.event_day(s, t) == report.day_key(t), s


@pytest.mark.parametrize("columns", [80, 60])
def test_terminal_report_fits_the_width_without_cut_names(db, columns):
    """Regression (issue 45): at 80 columns the DoD and load tables cut their headers to
    ``unevalu…`` / ``escalati…``; the header said "(1 days)"."""
    env = {**os.environ, "COLUMNS": str(columns)}
    r = subprocess.run([FW, "report", "--db", str(db), "--until", iso(T0 + 10 * 3600)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= columns, [x for x in lines if len(x) > columns]
    assert "…" not in r.stdout
    for name in ("unevaluable", "self-approvals refused", "escalations", "agent-hours waiting"):
        assert name in r.stdout
    assert "(1 day)" in r.stdout and "1 days" not in r.stdout


@pytest.mark.slow
def test_html_legend_stands_clear_of_the_bars_and_one_day_is_singular(db, tmp_path):
    """Regression (issue 45): the verdicts chart's legend sat over its bars; "1 days"."""
    pytest.importorskip("matplotlib", reason="the HTML report needs the report extra (matplotlib)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from watcher.cli.report_html import dod_chart

    days = [{"day": f"2026-11-{i:02d}", "met": 5, "failed": 3, "reclama_s": 0} for i in range(1, 8)]
    f = dod_chart(plt, days, "day", list(range(7)), [d["day"][5:] for d in days])
    f.canvas.draw()
    r = f.canvas.get_renderer()
    ax = f.axes[0]
    assert not ax.get_legend().get_window_extent(r).overlaps(ax.get_window_extent(r))
    plt.close(f)
    out = tmp_path / "r.html"
    assert run_cli("report", "--db", db, "--until", iso(T0 + 10 * 3600), "--html", out).returncode == 0
    text = out.read_text()
    assert "1 day ·" in text and "1 days" not in text
