"""Each grouped notice has one retry budget, so a condition that came while another was failing
must not inherit that one's attempts: it rode along with the retry, the notice went out at
attempt 3 and was abandoned on its first failure, so the new agent was given up after a single
try (found reading the planner: message() takes max(attempt) of its items). A retry now groups
only with items on the same attempt; the notify fold and plan are pure, so a virtual clock."""
from __future__ import annotations

from events.log import Recorded, iso
from events.types import AgentClassified, NoticeAbandoned, NoticeFailed, tag_of
from projections.notify import fold as notify
from projections.notify.fold import Policy
from projections.notify.plan import plan

T0 = 1_800_000_000.0
P = Policy(group_wait=10, group_interval=300, repeat_interval=4 * 3600, min_severity="warning",
           retry=(60.0, 120.0))


class World:
    def __init__(self) -> None:
        self.state, self.seq = notify.initial(), 0

    def add(self, ev, t: float) -> None:
        self.seq += 1
        self.state = notify.fold(self.state, Recorded(self.seq, f"id{self.seq}", iso(t), tag_of(ev), ev.subject,
                                                      1, ev, b"", b""))

    def fail(self, m, t: float) -> None:
        from projections.notify.policy import retry_delay

        delay = retry_delay(m.attempt, P)
        if delay is None:
            self.add(NoticeAbandoned(notice=m.notice, covers=m.covers, attempt=m.attempt, error="500", keys=m.keys), t)
        else:
            self.add(NoticeFailed(notice=m.notice, covers=m.covers, attempt=m.attempt, error="500",
                                  retry_at=iso(t + delay), keys=m.keys), t)


def _agents(m) -> list[str]:
    return sorted(k.split("|")[0] for k in m.keys)


def test_a_condition_that_joins_while_another_is_retrying_keeps_its_own_retry_budget():
    w = World()
    w.add(AgentClassified(agent="a1", to="RECLAMA", state="waiting"), T0)
    m1 = plan(w.state, T0 + 10, P).send[0]
    assert (m1.attempt, _agents(m1)) == (1, ["agent:a1"])
    w.fail(m1, T0 + 10)                                   # retry at T0 + 70
    w.add(AgentClassified(agent="a2", to="RECLAMA", state="waiting"), T0 + 65)
    p = plan(w.state, T0 + 70, P)                         # a1's retry is due; a2 came 5 s ago
    sent = {tuple(_agents(m)): m.attempt for m in p.send}
    assert sent == {("agent:a1",): 2}, sent               # a2 does not ride along on attempt 2
    w.fail(p.send[0], T0 + 70)                            # a1: retry at T0 + 190
    p = plan(w.state, T0 + 75, P)                         # a2's own group_wait is over
    assert [(_agents(m), m.attempt) for m in p.send] == [(["agent:a2"], 1)]
    w.fail(p.send[0], T0 + 75)                            # a2: its first failure, retried at T0 + 135
    m = plan(w.state, T0 + 135, P).send
    assert [(_agents(x), x.attempt) for x in m] == [(["agent:a2"], 2)]
    w.fail(m[0], T0 + 135)                                # a2: retried at T0 + 255, on attempt 3
    m3 = plan(w.state, T0 + 190, P).send
    assert [(_agents(x), x.attempt) for x in m3] == [(["agent:a1"], 3)]
    w.fail(m3[0], T0 + 190)                               # a1: budget spent, abandoned
    assert "agent:a1|RECLAMA#1" not in w.state["retry"]
    assert [v[0] for k, v in w.state["retry"].items() if k.startswith("agent:a2|")] == [2] # a2 has its last attempt still to come
    m4 = plan(w.state, T0 + 255, P).send   # a2's last try, and a1's "undelivered" on its own first
    assert sorted((_agents(x)[0].split(":")[0], x.attempt) for x in m4) == [("agent", 3), ("notice", 1)]
    lost = next(x for x in m4 if _agents(x)[0].startswith("notice:"))
    assert lost.lines[0].endswith("undelivered after 3 attempts: a1 RECLAMA"), lost.lines


def test_retries_on_the_same_attempt_still_go_out_as_one_notice():
    w = World()
    w.add(AgentClassified(agent="a1", to="RECLAMA", state="waiting"), T0)
    w.add(AgentClassified(agent="a2", to="RECLAMA", state="waiting"), T0 + 1)
    m1 = plan(w.state, T0 + 11, P).send
    assert [_agents(m) for m in m1] == [["agent:a1", "agent:a2"]]
    w.fail(m1[0], T0 + 11)
    m2 = plan(w.state, T0 + 71, P).send
    assert [(_agents(m), m.attempt) for m in m2] == [(["agent:a1", "agent:a2"], 2)]
    assert m2[0].notice == m1[0].notice
