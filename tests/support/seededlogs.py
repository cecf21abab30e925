"""Seeded logs of every event type the folds read (real SQLite event logs): ``churn`` (every type
notify and report fold, the clock jumping) and ``bench_mix`` (bench_rebuild.py's mix in small),
and ``plain_replay``, each module's own fold of every event, one by one."""
from __future__ import annotations

import random


from events.log import EventLog
from events.timefmt import iso
from events.types import (AgentClassified, AgentNudged, CircuitChanged, DodFlagged, DodVerdict, NoticeAcked,
                          NoticeFailed, NoticeSent, SilenceAdded, SourceFailed, SourceRecovered, StepChanged,
                          SwarmChanged, WatcherStarted, WatcherStopped, WpChanged)
from projections.base import encode_state, registry

T0 = 1_800_000_000.0
CLASSES = ("TRABAJANDO", "RECLAMA", "DICE_TERMINADO", "ESTANCADO", "CERRADO", "MAL_LANZADO")


def churn(path: str, appends: int = 160, seed: int = 5) -> EventLog:
    """A seeded log of every type notify and report fold: agents through every class (and
    closed), verdicts, pushes of live conditions, failures, acks, silences, steps, work packages,
    swarms, restarts; appends of 1..40 events sharing a time, the clock jumping by 0 s .. 2 days
    (so prunes, sweeps and UTC midnights are crossed)."""
    rnd = random.Random(seed)
    elog = EventLog(path, durability="normal")
    now, last_cls = T0, {}
    for _ in range(appends):
        now += rnd.choice((0.0, 0.5, 1.0, 30.0, 400.0, 3600.0, 86400.0 * 2))
        evs, agents = [], []
        for _ in range(rnd.randrange(1, 40)):
            k = rnd.random()
            a = f"a{rnd.randrange(12)}"
            if k < 0.4:
                to = rnd.choice(CLASSES)
                evs.append(AgentClassified(agent=a, to=to, state="busy", phase="haciendo", reason="busy"))
                agents.append((a, to))
            elif k < 0.45:
                evs.append(DodVerdict(agent=a, verdict=rnd.choice(("met", "failed", "unevaluable")),
                                      verifier=rnd.choice(("v1", a, "fleetwatch-checks")), evidence="pytest -q"))
            elif k < 0.5 and last_cls:
                cid = rnd.choice(sorted(last_cls.values()))
                typ = rnd.choice((NoticeSent, NoticeFailed, NoticeAcked))
                if typ is NoticeSent:
                    evs.append(NoticeSent(notice=f"n{rnd.randrange(99)}", covers=[1], keys=[cid + "@0"],
                                          severity=rnd.choice(("urgent", "warning"))))
                elif typ is NoticeFailed:
                    evs.append(NoticeFailed(notice=f"n{rnd.randrange(99)}", keys=[cid + "@0"], error="timeout",
                                            retry_at=iso(now + 60)))
                else:
                    evs.append(NoticeAcked(notice=f"n{rnd.randrange(99)}", conditions=[cid]))
            elif k < 0.55:
                evs.append(AgentNudged(agent=a, attempt=rnd.randrange(1, 3)))
            elif k < 0.65:
                m = f"m{rnd.randrange(3)}"
                evs.append(WpChanged(mission=m, wp=f"{m}-wp{rnd.randrange(4)}",
                                     to=rnd.choice(("READY", "RUNNING", "DONE", "APPROVAL_REQUIRED", "BLOCKED"))))
            elif k < 0.75:
                evs.append(SwarmChanged(group=f"g{rnd.randrange(3)}", child=f"c{rnd.randrange(5)}",
                                        to=rnd.choice(("queued", "running", "done", "failed"))))
            elif k < 0.82:
                evs.append(StepChanged(run=f"r{rnd.randrange(3)}", step="apply",
                                       to=rnd.choice(("begin", "done", "fail")), attempt=rnd.randrange(1, 3)))
            elif k < 0.86:
                evs.append(rnd.choice((SourceFailed, SourceRecovered))(source="fleet", error="timeout"))
            elif k < 0.89:
                evs.append(rnd.choice((WatcherStarted, WatcherStopped))(version="1", pid=1))
            elif k < 0.92:
                evs.append(CircuitChanged(scope=f"m{rnd.randrange(3)}", to=rnd.choice(("OPEN", "CLOSED"))))
            elif k < 0.95:
                evs.append(DodFlagged(agent=a, flag=rnd.choice(("self-approved", "claim-unverified"))))
            else:
                evs.append(SilenceAdded(silence=f"s{rnd.randrange(4)}", subject_match=f"agent:{a}",
                                        until=iso(now + rnd.choice((60, 86400 * 3)))))
        seqs = elog.append(evs, now)
        for (a, to), seq in zip(agents, [s for s, e in zip(seqs, evs) if isinstance(e, AgentClassified)]):
            last_cls[a] = f"agent:{a}|{to}#{seq}"
    return elog


def plain_replay(elog: EventLog) -> dict[str, bytes]:
    """Each module's own ``fold`` on every event, one by one: no TYPES skip, no caches, no batches."""
    out = {}
    for name, m in registry().items():
        st = m.initial()
        for rec in elog.read(0):
            st = m.fold(st, rec)
        out[name] = encode_state(st)
    return out


def bench_mix(path: str, n: int = 12_000, seed: int = 7) -> EventLog:
    """bench_rebuild.py's mix (agent classes of 500 agents, verdicts, work packages, circuits, swarm
    children, steps, source edges), appends of 1,000 events one second apart: over 2,000 notify
    conditions (the cap's prune), no time-based prune."""
    rnd = random.Random(seed)
    elog = EventLog(path, durability="normal")
    now, done = T0, 0
    while done < n:
        evs = []
        for _ in range(1000):
            k = rnd.random()
            a = f"a{rnd.randrange(500)}"
            if k < 0.45:
                evs.append(AgentClassified(agent=a, to=rnd.choice(CLASSES[:4] + ("TRABAJANDO",)), state="busy",
                                           phase="haciendo", reason="busy", source="fleet",
                                           contract_sha256=f"{a:0>64}", contract_len=40))
            elif k < 0.50:
                evs.append(DodVerdict(agent=a, verdict=rnd.choice(("met", "failed")), verifier="v1",
                                      evidence="pytest -q: green"))
            elif k < 0.70:
                m = rnd.randrange(50)
                evs.append(WpChanged(mission=f"m{m}", wp=f"m{m}-wp{rnd.randrange(20)}",
                                     to=rnd.choice(("READY", "RUNNING", "DONE", "FAILED", "APPROVAL_REQUIRED")),
                                     deps=[f"m{m}-wp0"], attempts=rnd.randrange(3), source="missions"))
            elif k < 0.72:
                evs.append(CircuitChanged(scope=f"m{rnd.randrange(50)}", to=rnd.choice(("OPEN", "CLOSED"))))
            elif k < 0.92:
                evs.append(SwarmChanged(group=f"g{rnd.randrange(40)}", child=f"c{rnd.randrange(30)}",
                                        to=rnd.choice(("queued", "running", "done", "failed")), label="read a file"))
            elif k < 0.99:
                evs.append(StepChanged(run=f"r{rnd.randrange(30)}", step=rnd.choice(("facts", "audit", "apply")),
                                       to=rnd.choice(("begin", "done"))))
            else:
                evs.append(rnd.choice((SourceFailed, SourceRecovered))(source="fleet", error="timeout"))
        now += 1.0
        elog.append(evs, now)
        done += len(evs)
    return elog
