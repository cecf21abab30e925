"""A ``last_activity`` in the future must not hide a stall: no file records activity after it was
written, so a goal.json's ``last_activity`` later than the file's mtime counts as the mtime
(watcher/sources/parse.py). Before, "9999-12-31T00:00:00Z" (or an epoch like 99999999999, or
a host whose clock was ahead) kept an idle busy agent TRABAJANDO for ever: silence = now -
last_activity was never large, so the ``busy_silence`` backstop never fired. Real files, a real
Watcher ticking a virtual ``now``; each file's mtime set with os.utime to match that clock."""
from __future__ import annotations

import json
import os
import sys

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.sources.parse import parse_goal

NOW = 1_800_000_000.0
HOUR = 3600.0


def goal(root, aid: str, last_activity, mtime: float) -> str:
    d = root / aid
    d.mkdir(parents=True)
    p = d / "goal.json"
    p.write_text(json.dumps({"agent": aid, "state": "busy", "phase": "haciendo", "dod_contract": "make test",
                             "last_activity": last_activity}))
    os.utime(p, (mtime, mtime))
    return str(p)


def watcher(tmp_path, extra: str = ""):
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n' + extra)
    assert cfg.dur("classify.busy_silence") == 600  # the default: busy and silent 10 min -> ESTANCADO
    elog = EventLog(str(tmp_path / "e.db"))
    return Watcher(cfg, elog), elog


def test_a_future_last_activity_does_not_keep_a_silent_busy_agent_working(tmp_path):
    fleet = tmp_path / "fleet"
    goal(fleet, "iso9999", "9999-12-31T00:00:00Z", NOW - HOUR)
    goal(fleet, "epoch", 99_999_999_999, NOW - HOUR)           # year 5138, still a valid epoch
    goal(fleet, "ahead", NOW + 86400, NOW - HOUR)              # the writer's clock a day ahead
    goal(fleet, "before", NOW - 2 * HOUR, NOW - HOUR)          # earlier than the mtime: kept as it is
    w, elog = watcher(tmp_path)
    try:
        w.tick(NOW)
        agents = w.proj["fleet"]["agents"]
        got = {a: (agents[a]["class"], agents[a]["reason"]) for a in ("iso9999", "epoch", "ahead", "before")}
        assert got == {"iso9999": ("ESTANCADO", "busy, silent for 60m"),
                       "epoch": ("ESTANCADO", "busy, silent for 60m"),
                       "ahead": ("ESTANCADO", "busy, silent for 60m"),
                       "before": ("ESTANCADO", "busy, silent for 2h00m")}
        assert elog.verify().ok
    finally:
        elog.close()


def test_an_agent_turns_estancado_by_time_alone_after_a_future_last_activity(tmp_path):
    """Written just now with a far-future last_activity: working at first, stalled 10 min later."""
    goal(tmp_path / "fleet", "a1", "9999-12-31T00:00:00Z", NOW)
    w, elog = watcher(tmp_path)
    try:
        w.tick(NOW + 1)
        assert w.proj["fleet"]["agents"]["a1"]["class"] == "TRABAJANDO"
        w.tick(NOW + 599)
        assert w.proj["fleet"]["agents"]["a1"]["class"] == "TRABAJANDO"
        w.tick(NOW + 601)
        a = w.proj["fleet"]["agents"]["a1"]
        assert (a["class"], a["reason"]) == ("ESTANCADO", "busy, silent for 10m")
    finally:
        elog.close()


def test_the_observation_takes_the_mtime_only_when_last_activity_is_later():
    def la(v, mtime=NOW):
        raw = json.dumps({"agent": "a", "state": "busy", "dod_contract": "x", "last_activity": v}).encode()
        return parse_goal(raw, source="s", path="/p", folder_id="a", mtime=mtime).last_activity

    assert la("9999-12-31T00:00:00Z") == NOW
    assert la(99_999_999_999) == NOW
    assert la(NOW + 0.5) == NOW
    assert la(NOW) == NOW             # at the mtime: as it is
    assert la(NOW - 60) == NOW - 60   # before it: as it is
    assert la(None) == NOW            # absent: the mtime, as before
    raw = b'[{"agent": "a"}]'  # not an object: the careful path, still an error, no activity
    assert parse_goal(raw, source="s", path="/p", folder_id="a", mtime=NOW).error


def test_a_command_source_future_activity_counts_as_the_poll_time(tmp_path):
    """A command's output is no file: a last_activity later than the poll's ``now`` counts as ``now``
    (it cannot push a goal.json's activity into the future through the merge either)."""
    (tmp_path / "fleet").mkdir()
    out = tmp_path / "out.json"
    out.write_text(json.dumps([{"name": "c1", "state": "busy", "phase": "haciendo", "dod_contract": "x",
                                "last_activity": "9999-12-31T00:00:00Z"}]))
    script = tmp_path / "fv.py"
    script.write_text(f"import sys; sys.stdout.write(open({str(out)!r}).read())")
    w, elog = watcher(tmp_path, f'[[sources]]\nname = "fv"\nkind = "command"\n'
                                f'argv = ["{sys.executable}", "{script}"]\n')
    try:
        w.tick(NOW)
        c1 = w.proj["fleet"]["agents"]["c1"]
        assert c1["class"] == "TRABAJANDO" and c1["last_activity"].startswith("2027-01-15T08:00:00")  # not 9999
        snap = w.observe(NOW + 5, True)
        assert snap.agents["c1"].last_activity == NOW + 5
        snap = w.observe(NOW + 6, False)  # a wake-up: the command's last result, not clamped again
        assert snap.agents["c1"].last_activity == NOW + 5
    finally:
        elog.close()


def test_a_tmux_window_activity_in_the_future_counts_as_the_poll_time(monkeypatch):
    """tmux's window_activity comes from no file either: later than the poll's ``now`` is ``now``."""
    import watcher.sources.proc as proc
    from watcher.config import Source

    lines = ("fleet\t$1\t0\t@1\t99999999999\t0\t\t0\t%1\t\t\ta1\t{end}\n"      # year 5138
             "fleet\t$1\t1\t@2\t1799999000\t0\t\t0\t%2\t\t\ta2\t{end}\n")       # before now: as it is
    # each record ends with the poll's nonce, the last tab-separated part of argv's format
    monkeypatch.setattr(proc, "run_argv", lambda argv, *a, **k: (
        lines.format(end=argv[-1].rpartition("\t")[2]).encode(), None))
    src = proc.TmuxSource(Source(name="tmux", kind="tmux"))
    src.poll(NOW)
    assert [(w.name, w.activity) for w in src.wins] == [("a1", NOW), ("a2", 1_799_999_000.0)]


def test_a_file_whose_mtime_is_in_the_future_does_not_hide_a_stall_either(tmp_path):
    """The mtime bound above left one way round it: a goal.json whose mtime is itself in the
    future (`touch -d 2099`, a file system whose server clock is ahead, a host clock set back an
    hour) kept its agent silent for ever. A file counts as written at most at the poll that read
    it (GlobSource._observed): the agent read at NOW with a 2099 mtime and a 9999 last_activity
    is silent from NOW on, and ESTANCADO once busy_silence has passed."""
    fleet = tmp_path / "fleet"
    goal(fleet, "touched", "9999-12-31T00:00:00Z", 4_070_908_800.0)   # mtime 2099-01-01
    goal(fleet, "absent", None, 4_070_908_800.0)                      # no last_activity: the mtime
    w, elog = watcher(tmp_path)
    try:
        w.tick(NOW)
        agents = w.proj["fleet"]["agents"]
        assert {a: agents[a]["class"] for a in ("touched", "absent")} == {"touched": "TRABAJANDO",
                                                                            "absent": "TRABAJANDO"}
        w.tick(NOW + 601)
        got = {a: (agents[a]["class"], agents[a]["reason"]) for a in ("touched", "absent")
               for agents in [w.proj["fleet"]["agents"]]}
        assert got == {"touched": ("ESTANCADO", "busy, silent for 10m"), "absent": ("ESTANCADO", "busy, silent for 10m")}
    finally:
        elog.close()
