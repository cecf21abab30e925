"""The closed-agent prune of fleet and dod, reached (issue 23): the 7-day boundary to the second,
a fleet larger than PRUNE_EVERY (the scan comes at the agent count's power of two), and end to
end through the Watcher: a RECLAMA agent idle for weeks is never forgotten, and nothing is pushed
twice after a prune."""
from __future__ import annotations

import msgspec
import pytest

from events.log import EventLog, Recorded, iso
from events.types import AgentClassified, NoticeSent, tag_of
from projections.fleet import fold as fleet
from projections.notify import fold as notify
from projections.notify.fold import Policy
from projections.notify.plan import plan
from watcher.runtime.loop import Watcher

from tests.support.fleetstep import Fold
from tests.support.goalfleet import T0, goal, make

DAY = 86400.0


@pytest.mark.parametrize("age,kept", [(fleet.CLOSED_KEEP_S, True), (fleet.CLOSED_KEEP_S + 1, False)])
def test_a_closed_agent_is_kept_seven_days_to_the_second(age, kept):
    f = Fold()
    f.cls("gone", "CERRADO", T0)
    f.until(fleet.PRUNE_EVERY, T0 + age)            # the scan at seq 512, at that age
    assert f.has("gone") == (kept, kept)


def test_past_prune_every_agents_the_scan_comes_at_their_power_of_two():
    """1,500 agents (over PRUNE_EVERY): the scan is on multiples of 2,048, not of 512; it then
    forgets every agent closed over a week before and keeps every other one."""
    f = Fold()
    for i in range(1000):
        f.cls(f"c{i}", "CERRADO", T0)
    for i in range(499):
        f.cls(f"r{i}", "RECLAMA", T0)
    later = T0 + 8 * DAY
    for s in (1536, 2047):                          # multiples of 512 (and the seq before 2048)
        f.until(s, later)
        assert f.has("c0") == (True, True) and len(f.p["fleet"]["agents"]) == 1500
    f.until(2048, later)
    agents = f.p["fleet"]["agents"]
    assert not any(a.startswith("c") for a in agents) and not any(a.startswith("c") for a in f.p["dod"]["agents"])
    assert sum(a.startswith("r") for a in agents) == 499 and agents["r0"]["class"] == "RECLAMA"


def test_a_reclama_agent_idle_for_weeks_survives_every_prune_and_is_pushed_once(tmp_path):
    fleet_dir, cfg = make(tmp_path)
    goal(fleet_dir, "keep", state="waiting", phase="preguntando")
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(T0)
    pol = Policy(group_wait=10, group_interval=300, repeat_interval=365 * DAY, min_severity="warning")
    [m] = plan(w.proj["notify"], T0 + 10, pol).send
    w.commit([NoticeSent(notice=m.notice, covers=m.covers, attempt=1, title=m.title, severity=m.severity,
                         keys=m.keys)], T0 + 11)
    head = elog.head()[0]
    for week in range(1, 5):                        # four weeks, a prune scan in each
        t = T0 + week * 7 * DAY + 3600
        for i in range(fleet.PRUNE_EVERY):
            goal(fleet_dir, f"w{week}-{i:03d}")
        w.tick(t)
        w.tick(t + 1)
        for i in range(fleet.PRUNE_EVERY):
            (fleet_dir / f"w{week}-{i:03d}" / "goal.json").unlink()
        w.tick(t + 2)
        w.tick(t + 3)                               # the fillers closed: they are the next prune's
        assert w.proj["fleet"]["agents"]["keep"]["class"] == "RECLAMA"
        sent = plan(w.proj["notify"], t + 20, pol).send       # (the fillers' fan-out aside)
        assert not [k for m in sent for k in m.keys if k.startswith("agent:keep|")]
    assert elog.head()[0] > head + 4 * fleet.PRUNE_EVERY
    assert [r.event.to for r in elog.read(0, types=["agent.classified"], subject="agent:keep")] == ["RECLAMA"]
    assert [r.type for r in elog.read(0, types=["notice.sent"])] == ["notice.sent"]
    assert not any(a.startswith("w1-") for a in w.proj["fleet"]["agents"])     # the prunes did run
    w.close()
    elog.close()


def test_an_ended_agent_left_on_disk_is_not_closed_again_after_its_prune(tmp_path):
    fleet_dir, cfg = make(tmp_path)
    goal(fleet_dir, "done", ended=True)
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    w.tick(T0)
    for i in range(fleet.PRUNE_EVERY):
        goal(fleet_dir, f"f{i:03d}")
    w.tick(T0 + 8 * DAY)                            # the scan at seq 512 forgets "done"
    for k in range(1, 4):
        w.tick(T0 + 8 * DAY + k)
    assert [r.event.to for r in elog.read(0, types=["agent.classified"], subject="agent:done")] == ["CERRADO"]
    w.close()
    elog.close()


def test_notify_forgets_a_closed_agent_at_once_and_keeps_a_reclama():
    """notify's own agent table: CERRADO removes the agent (and its DoD verdict) in the fold;
    a RECLAMA agent's condition stays however old."""
    st = notify.initial()
    seq = 0
    for agent, to, t in (("gone", "RECLAMA", T0), ("gone", "CERRADO", T0 + 1), ("keep", "RECLAMA", T0),
                         ("other", "TRABAJANDO", T0 + 60 * DAY)):
        seq += 1
        ev = AgentClassified(agent=agent, to=to, state="waiting")
        st = notify.fold(st, Recorded(seq, f"id{seq}", iso(t), tag_of(ev), ev.subject, 1, ev, b"", b""))
    assert "gone" not in st["agents"] and not any(c["name"] == "gone" for c in st["conds"].values())
    assert st["agents"]["keep"]["cond"] in st["conds"]
    assert msgspec.json.decode(msgspec.json.encode(st)) == st
