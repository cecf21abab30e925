"""The phone loop end to end: a push with its link arrives at a real local receiver, the link's
page is opened by a real HTTP client (and by headless Chromium, where it can run), one tap
acknowledges, and nothing repeats or escalates afterwards; an unanswered RECLAMA escalates once;
heartbeats are counted by the receiver and stop when the watcher dies; the OnFailure push.
Virtual clocks (wall and monotonic) unless a test is about a real process."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from watcher.config import parse
from watcher.runtime.notifier import PlanClock
from tests.support.exe import FLEETWATCH
from tests.support.notifyloop import LINK, T0, Loop, Mono, cfg_for, reclama

def post(base: str, path: str, data: dict) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **kw):
            return None

    req = urllib.request.Request(base + path, data=urllib.parse.urlencode(data).encode())
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


# ---- ack from the push link stops the repeat and the escalation ------------------------------
def test_push_link_acknowledge_stops_repeat_and_escalation(tmp_path, rx):
    from watcher.web.server import start

    cfg = cfg_for(tmp_path, rx, 'escalate_after = "15m"\nrepeat_interval = "1h"')
    lp = Loop(cfg, str(tmp_path / "e.db"))
    web = start(cfg, str(tmp_path / "e.db"), clock=lambda: T0 + 60)
    try:
        lp.append([reclama("a1")], T0)
        for t in (T0 + 1, T0 + 11):
            lp.tick(t)
        [push] = rx.got()
        m = LINK.search(push["message"])
        assert m and push["message"].rstrip().endswith(m.group(1))      # one link, at the end
        notice, token = m.group(2), m.group(3)
        base = f"http://127.0.0.1:{web.port}"
        assert post(base, f"/n/{notice}/ack", {"t": token}) == 303
        for t in range(20, 3 * 3600, 30):                             # 3 h: past escalate_after and repeat
            lp.tick(T0 + t)
        assert len(rx.got()) == 1
        types = lp.types()
        assert "notice.acked" in types and "notice.escalated" not in types
    finally:
        web.close()
        lp.close()


def test_unanswered_reclama_escalates_exactly_once(tmp_path, rx):
    cfg = cfg_for(tmp_path, rx, f'escalate_after = "15m"\nrepeat_interval = "0s"\n'
                                f'escalate_urls = ["{rx.url(path="/oncall")}"]', web=False)
    lp = Loop(cfg, str(tmp_path / "e.db"))
    lp.append([reclama("a1")], T0)
    for t in range(1, 3600, 15):
        lp.tick(T0 + t)
    assert len(rx.got()) == 1 and len(rx.got("/oncall")) == 1
    esc = rx.got("/oncall")[0]
    assert esc["title"].startswith("unanswered for 15m: ") and "a1" in esc["message"]
    recs = [r for r in lp.log.read(0, types=["notice.escalated"])]
    assert len(recs) == 1 and recs[0].event.after == 900.0 and recs[0].event.conditions[0].startswith("agent:a1|")
    at = recs[0].time
    from events.log import parse_iso

    assert 900 <= parse_iso(at) - T0 < 900 + 15 + 1
    lp.close()


def test_reclama_held_by_quiet_hours_escalates_escalate_after_past_their_end_not_at_it(tmp_path, rx):
    """With quiet_urgent = false, a RECLAMA during quiet hours is first pushed at their end; it
    was escalated ("unanswered for 15m", to the on-call URL) in the same second, measured from
    its event (found by hand: a real watcher, a json:// receiver, a window ending two minutes
    later). Unanswered counts from the end of the quiet hours that held it."""
    cfg = cfg_for(tmp_path, rx, f'escalate_after = "15m"\nrepeat_interval = "0s"\n'
                                f'escalate_urls = ["{rx.url(path="/oncall")}"]\n'
                                'quiet = ["07:00-09:00"]\nquiet_tz = "UTC"\nquiet_urgent = false', web=False)
    lp = Loop(cfg, str(tmp_path / "e.db"))
    quiet_end = T0 + 3600                           # T0 is 08:00 UTC
    lp.append([reclama("a1")], T0 + 60)
    for t in range(61, 2 * 3600, 15):
        lp.tick(T0 + t)
    from events.log import parse_iso

    [push] = rx.got()
    assert push["title"].startswith("after quiet hours: ") and "a1" in push["message"]
    [esc] = rx.got("/oncall")
    assert esc["title"].startswith("unanswered for 15m: ")
    [sent] = [parse_iso(r.time) for r in lp.log.read(0, types=["notice.sent"])]
    [escalated] = [parse_iso(r.time) for r in lp.log.read(0, types=["notice.escalated"])]
    assert quiet_end <= sent < quiet_end + 16
    assert quiet_end + 900 <= escalated < quiet_end + 900 + 16
    lp.close()


def test_ack_cli_then_no_escalation(tmp_path, rx):
    from typer.testing import CliRunner

    from watcher.cli import app

    cfgfile = tmp_path / "c.toml"
    cfgfile.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{rx.url()}"]\nescalate_after = "15m"\n')
    cfg = parse(cfgfile.read_text(), check_paths=False)
    lp = Loop(cfg, str(tmp_path / "e.db"))
    lp.append([reclama("a1")], T0)
    lp.tick(T0 + 11)
    r = CliRunner().invoke(app, ["ack", "nosuch", "--config", str(cfgfile)])
    assert r.exit_code == 2 and "nothing open" in r.output
    assert CliRunner().invoke(app, ["ack", "n0000000000000000", "--config", str(cfgfile)]).exit_code == 2
    r = CliRunner().invoke(app, ["ack", "a1", "--config", str(cfgfile)])
    assert r.exit_code == 0, r.output
    ev = [x.event for x in lp.log.read(0, types=["notice.acked"])]
    assert len(ev) == 1 and ev[0].via == "cli" and ev[0].notice == lp.proj["notify"]["conds"][ev[0].conditions[0]]["notice"]
    for t in range(20, 7200, 60):
        lp.tick(T0 + t)
    assert len(rx.got()) == 1 and "notice.escalated" not in lp.types()
    lp.close()


# ---- the clock -------------------------------------------------------------------------------
def test_wall_clock_stepped_back_does_not_delay_urgent_beyond_group_wait(tmp_path, rx):
    cfg = cfg_for(tmp_path, rx, web=False)
    lp = Loop(cfg, str(tmp_path / "e.db"))
    lp.append([reclama("a0")], T0)
    lp.tick(T0 + 11)
    assert len(rx.got()) == 1
    lp.append([reclama("a1")], T0 + 20)                    # recorded just before the step
    mono = lp.mono.t = 1000.0 + 20
    for k in range(1, 12):                                  # the wall clock is now 1 h behind
        lp.mono.t = mono + k
        wall = T0 + 20 - 3600 + k
        lp.proj.catch_up(lp.log)
        lp.append(lp.n.step(lp.proj.states, wall), wall)
        assert lp.n.drain(15)
        lp.append(lp.n.step(lp.proj.states, wall), wall)
        if len(rx.got()) == 2:
            break
    assert len(rx.got()) == 2 and "a1" in rx.got()[1]["message"]
    assert k <= 11                                          # within group_wait (10 s) of monotonic time
    lp.close()


@pytest.mark.parametrize("steps,want", [
    ([(100.0, 0.0), (101.0, 1.0)], [100.0, 101.0]),                      # normal
    ([(100.0, 0.0), (40.0, 1.0), (41.0, 2.0)], [100.0, 101.0, 102.0]),   # stepped back: keeps going
    ([(100.0, 0.0), (500.0, 1.0)], [100.0, 500.0]),                      # stepped forward: follows
])
def test_plan_clock_never_steps_back(steps, want):
    m = Mono()
    c = PlanClock(m)
    got = []
    for wall, mono in steps:
        m.t = mono
        got.append(c(wall, lambda: 1e12))
    assert got == want


def test_plan_clock_rejoins_the_wall_when_nothing_is_newer():
    m = Mono()
    c = PlanClock(m)
    m.t = 0.0
    c(100.0)
    m.t = 1.0
    assert c(40.0, lambda: 30.0) == 40.0


# ---- the dead-man's switch -------------------------------------------------------------------
def test_heartbeats_counted_by_the_receiver_on_a_virtual_clock(tmp_path, rx):
    hb = f"http://127.0.0.1:{rx.port}/ping/abc-uuid"
    cfg = cfg_for(tmp_path, rx, f'heartbeat_url = "{hb}"\nheartbeat_every = "5m"', web=False)
    lp = Loop(cfg, str(tmp_path / "e.db"))
    for t in range(0, 3600, 30):       # one virtual hour of healthy ticks every 30 s
        lp.tick(T0 + t)
        lp.n._hb_thread and lp.n._hb_thread.join(5)
    assert rx.gets.get("/ping/abc-uuid") == 12 and lp.n.hb_ok == 12
    lp.close()


@pytest.mark.slow
def test_heartbeats_stop_within_two_periods_of_the_watcher_dying(tmp_path, rx):
    """A real `fleetwatch run` with heartbeat_every = 1s; SIGKILL; the receiver hears nothing
    more after (at most one GET already in flight)."""
    goals = tmp_path / "agents"
    (goals / "a1").mkdir(parents=True)
    (goals / "a1" / "goal.json").write_text(json.dumps({"agent": "a1", "state": "busy", "phase": "haciendo",
                                                        "dod_contract": "tests pass"}))
    cfgfile = tmp_path / "c.toml"
    cfgfile.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "200ms"\n'
                       f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n'
                       f'[notify]\nheartbeat_url = "http://127.0.0.1:{rx.port}/hb"\nheartbeat_every = "1s"\n')
    exe = FLEETWATCH
    p = subprocess.Popen([exe, "run", "--config", str(cfgfile)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while rx.gets.get("/hb", 0) < 3 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert rx.gets.get("/hb", 0) >= 3, p.stderr.read().decode()[-2000:] if p.poll() is not None else "no hb"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        at_death = rx.gets.get("/hb", 0)
        time.sleep(2.0)                                           # two periods
        assert rx.gets.get("/hb", 0) <= at_death + 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_onfailure_push_names_the_result(tmp_path, rx, monkeypatch):
    from typer.testing import CliRunner

    from watcher.cli import app
    from watcher.service import units

    cfgfile = tmp_path / "c.toml"
    cfgfile.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{rx.url()}"]\n')
    monkeypatch.setenv("MONITOR_SERVICE_RESULT", "watchdog")
    monkeypatch.setenv("MONITOR_EXIT_CODE", "killed")
    monkeypatch.setenv("MONITOR_EXIT_STATUS", "ABRT")
    r = CliRunner().invoke(app, ["notify-stopped", "--config", str(cfgfile)])
    assert r.exit_code == 0, r.output
    [p] = rx.got()
    assert p["title"] == "fleetwatch stopped: watchdog" and "killed ABRT" in p["message"]
    rendered = units.render_units("/usr/bin/fleetwatch", ["--config", "/x/c.toml"])
    assert "OnFailure=fleetwatch-onfailure.service" in rendered["fleetwatch.service"]
    assert "ExecStart=/usr/bin/fleetwatch notify-stopped --config /x/c.toml" in rendered["fleetwatch-onfailure.service"]
    if shutil.which("systemd-analyze"):
        d = tmp_path / "units"
        d.mkdir()
        for name, text in units.render_units(FLEETWATCH).items():
            (d / name).write_text(text)
        v = subprocess.run(["systemd-analyze", "--user", "verify", str(d / "fleetwatch-onfailure.service")],
                           capture_output=True, text=True, timeout=60)
        assert "onfailure" not in v.stderr.lower() or v.returncode == 0, v.stderr


# ---- headless Chromium -----------------------------------------------------------------------


def test_chromium_tap_acknowledge_stops_repeat_and_escalation(tmp_path, rx):
    from tests.support.browser import phone
    from watcher.web.server import start

    cfg = cfg_for(tmp_path, rx, 'escalate_after = "15m"\nrepeat_interval = "1h"')
    lp = Loop(cfg, str(tmp_path / "e.db"))
    web = start(cfg, str(tmp_path / "e.db"), clock=lambda: T0 + 60)
    try:
        lp.append([reclama("a1"), reclama("a2")], T0)
        lp.tick(T0 + 11)
        [push] = rx.got()
        m = LINK.search(push["message"])
        url = f"http://127.0.0.1:{web.port}/n/{m.group(2)}?t={m.group(3)}"
        with phone(url) as page:
            assert page.locator("li").count() == 2
            page.get_by_role("button", name="Acknowledge all", exact=True).click()
            page.wait_for_url(re.compile(r"done=ack"))
            assert "Acknowledged" in page.content()
            page.get_by_role("link", name="The whole fleet").click()
            assert "need attention" in page.content()
        acks = [r.event for r in lp.log.read(0, types=["notice.acked"])]
        assert len(acks) == 1 and acks[0].via == "web" and len(acks[0].conditions) == 2
        for t in range(20, 3 * 3600, 60):
            lp.tick(T0 + t)
        assert len(rx.got()) == 1 and "notice.escalated" not in lp.types()
    finally:
        web.close()
        lp.close()
