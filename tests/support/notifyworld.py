"""A notify state fed with events on a virtual clock (no DB: the fold is pure), the policies the
notify tests plan with, and the helpers that build conditions and flapping histories."""
from __future__ import annotations

import msgspec

from events.log import Recorded, iso
from events.types import AgentClassified, NoticeSent, tag_of
from projections.notify import fold as notify
from projections.notify.fold import Policy

T0 = 1_800_000_000.0
P = Policy(group_wait=10, group_interval=300, repeat_interval=4 * 3600, min_severity="warning")


class World:
    """A notify state fed with events on a virtual clock (no DB: the fold is pure)."""

    def __init__(self) -> None:
        self.state = notify.initial()
        self.seq = 0

    def add(self, ev, t: float) -> int:
        self.seq += 1
        rec = Recorded(self.seq, f"id{self.seq}", iso(t), tag_of(ev), ev.subject, 1, ev, b"", b"")
        self.state = notify.fold(self.state, rec)
        return self.seq

    def cls(self, agent: str, to: str, t: float, state: str = "busy", reason: str = "") -> int:
        return self.add(AgentClassified(agent=agent, to=to, state=state, reason=reason), t)

    def sent(self, m, t: float) -> None:
        self.add(NoticeSent(notice=m.notice, covers=m.covers, attempt=m.attempt, title=m.title,
                            severity=m.severity, keys=m.keys), t)


def cond(**kw):
    c = {"subject": "agent:a1", "cls": "RECLAMA", "sev": "urgent", "name": "a1", "text": "", "seq": 1,
         "last_seq": 1, "since": T0, "changed": T0, "rev": 0, "oneshot": False, "cleared": None,
         "cleared_by": None, "sends": 0, "sent_at": None, "sent_rev": -1, "silenced": None}
    c.update(kw)
    return c


def flap(w: World, agent: str, n: int, t: float, step: float = 20.0) -> float:
    for i in range(n):
        w.cls(agent, "RECLAMA" if i % 2 == 0 else "TRABAJANDO", t, state="waiting" if i % 2 == 0 else "busy")
        t += step
    return t


NP = Policy(nudge_enabled=True, nudge_max=2, nudge_after=60, nudge_gap=300, nudge_needs_target=True)
PE = msgspec.structs.replace(P, escalate_after=900.0)
