"""The change hint (``Snapshot.dirty``) and the patched merge give the same events as looking at
everything, and the rolling resync finds what inotify never reported.

Two watchers on one fleet folder, each with its own log and the same virtual clock: one ticks as
``fleetwatch run`` does while inotify is healthy (the paths written since its last tick; its merge
patched, its detectors looking only at the dirty agents), the other stats and compares every file
and agent every tick (no paths, no hint). A seeded churn rewrites, creates, deletes, duplicates
and corrupts goal.json files, and another writer appends verdicts; after every tick the two logs
must hold the same transitions. Real files, real logs, no mocks.
"""
from __future__ import annotations

import json
import os
import random

import pytest

from events.log import EventLog
from events.types import DodVerdict
from watcher.config import parse
from watcher.runtime.loop import Watcher
from watcher.runtime.merged import Merger
from watcher.sources.files import GoalsSource

T0 = 1_800_000_000.0
STATES = ("busy", "idle", "waiting")
PHASES = ("haciendo", "hecho", "testeando", "bloqueado", None)


def _write(root, folder: str, doc: dict | str) -> str:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "goal.json.tmp"
    tmp.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    os.replace(tmp, d / "goal.json")
    return str(d / "goal.json")


def _doc(agent: str, rng: random.Random, t: float) -> dict:
    doc = {"agent": agent, "task": f"t{rng.randrange(3)}", "state": rng.choice(STATES),
           "dod_contract": f"pytest {agent}", "last_activity": t - rng.choice((0, 30, 4000))}
    if (p := rng.choice(PHASES)) is not None:
        doc["phase"] = p
    return doc


def _watcher(tmp_path, root, name: str) -> tuple[Watcher, EventLog]:
    db = str(tmp_path / f"{name}.db")
    cfg = parse(f'[store]\npath = "{db}"\n[classify]\nstall_after = "1h"\n'
                f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    elog = EventLog(db)
    return Watcher(cfg, elog), elog


def _transitions(elog: EventLog) -> list[tuple]:
    out = []
    for r in elog.read(0):
        e = r.event
        out.append((r.type, getattr(e, "agent", None), getattr(e, "from_", None), getattr(e, "to", None),
                    getattr(e, "reason", None), getattr(e, "flag", None), getattr(e, "verdict", None),
                    tuple(getattr(e, "changed", ()) or ())))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hinted_ticks_give_the_same_transitions_as_looking_at_everything(tmp_path, seed):
    rng = random.Random(seed)
    root = tmp_path / "fleet"
    agents = [f"a{i:02d}" for i in range(40)]
    for a in agents:
        _write(root, a, _doc(a, rng, T0))
    hinted, hlog = _watcher(tmp_path, root, "hinted")
    full, flog = _watcher(tmp_path, root, "full")
    hinted.sweep = 0.1
    t = T0
    hinted.tick(t, True, None)
    full.tick(t, True, None)
    used_hint = 0
    for step in range(120):
        t += rng.choice((0.2, 0.5, 2.0, 900.0))  # time alone moves classes too (stall_after 1h)
        paths: set[str] = set()
        for _ in range(rng.randrange(1, 5)):
            roll = rng.random()
            a = rng.choice(agents)
            if roll < 0.6:
                paths.add(_write(root, a, _doc(a, rng, t)))
            elif roll < 0.7:      # a new folder, sometimes claiming an existing id (a duplicate)
                f = f"n{step:03d}"
                paths.add(_write(root, f, _doc(rng.choice([f, a]), rng, t)))
            elif roll < 0.8:      # a folder deleted
                victim = rng.choice(sorted(os.listdir(root)))
                p = root / victim / "goal.json"
                if p.exists():
                    p.unlink()
                    paths.add(str(p))
            elif roll < 0.9:      # unparseable (the two-read rule: it must fail twice)
                paths.add(_write(root, a, "{not json"))
            else:                 # rewritten with the same content (a new inode, equal observation)
                p = root / a / "goal.json"
                if p.exists():
                    paths.add(_write(root, a, p.read_text()))
        if rng.random() < 0.1:    # another writer: a verdict appended to both logs
            v = DodVerdict(agent=rng.choice(agents), verdict="met", verifier="ci-bot", evidence="x")
            hlog.append([v], t)
            flog.append([v], t)
        is_full = rng.random() < 0.3
        hinted.tick(t, is_full, paths)
        full.tick(t, True, None)
        used_hint += hinted.merger._last is not None and hinted.fleet.sched.gen > 0
        assert _transitions(hlog) == _transitions(flog), f"diverged at step {step}"
    assert used_hint > 100
    assert len(_transitions(hlog)) > 150


def test_a_poll_result_dropped_between_two_merges_loses_no_change(tmp_path):
    """Regression (issue 19 bench: 166 writes never committed at 50k agents): a file source's
    result taken late and replaced by the next poll's before any merge saw it. The next result's
    change list is relative to the dropped one, so the merge must not patch from it."""
    root = tmp_path / "fleet"
    for a in ("a", "b", "c"):
        _write(root, a, {"agent": a, "state": "busy", "dod_contract": "x"})
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{root}/*/goal.json"\n')
    src = GoalsSource(cfg.sources[0])
    m = Merger()
    r0 = src.poll(T0, True)
    m.merge([src], [r0])
    pa = _write(root, "a", {"agent": "a", "state": "waiting", "dod_contract": "x"})
    src.poll(T0 + 1, False, changed={pa})                     # r1: dropped, never merged
    pb = _write(root, "b", {"agent": "b", "state": "idle", "dod_contract": "x"})
    r2 = src.poll(T0 + 2, False, changed={pb})                # r2: its change list is b only
    snap = m.merge([src], [r2])
    assert snap.agents["a"].state == "waiting" and snap.agents["b"].state == "idle"
    assert snap.dirty is None                                 # merged in full: no hint
    pc = _write(root, "c", {"agent": "c", "state": "idle", "dod_contract": "x"})
    snap = m.merge([src], [src.poll(T0 + 3, False, changed={pc})])
    assert snap.dirty == frozenset({"c"}) and snap.agents["c"].state == "idle"


def test_the_rolling_resync_finds_a_change_inotify_never_reported(tmp_path):
    """A goal.json rewritten with no inotify report (an in-place write on a network file system):
    full ticks stat the next ``sweep`` part of the files each, so it is seen within 1/sweep
    full ticks, and a folder that appeared unreported is found when the sweep comes round."""
    root = tmp_path / "fleet"
    for i in range(20):
        _write(root, f"a{i:02d}", {"agent": f"a{i:02d}", "state": "busy", "dod_contract": "x"})
    w, elog = _watcher(tmp_path, root, "sweep")
    w.sweep = 0.25
    t = T0
    w.tick(t, True, None)
    with open(root / "a13" / "goal.json", "r+") as f:      # in place: same inode
        f.write(json.dumps({"agent": "a13", "state": "waiting", "dod_contract": "x"}).ljust(80))
    _write(root, "zz", {"agent": "zz", "state": "busy", "dod_contract": "x"})
    seen = []
    for k in range(1, 7):
        t += 2.0
        w.tick(t, True, set())                            # full ticks, inotify reported nothing
        fl = w.proj["fleet"]["agents"]
        seen.append((fl["a13"]["class"], "zz" in fl))
    assert ("RECLAMA", True) in seen
    assert seen.index(("RECLAMA", True)) <= 5             # 1/0.25 sweeps, plus the round's listing
    w.tick(t + 0.1, False, set())                         # a partial tick stats nothing new
    assert w.proj["fleet"]["agents"]["a13"]["class"] == "RECLAMA"
    elog.close()


def test_a_missing_root_is_said_on_the_next_full_tick_with_the_rolling_resync(tmp_path):
    """Regression (the hostile drill): with inotify healthy no tick stats everything any more, so
    a ROOT renamed away was never reported; each full tick's sweep checks ROOT itself."""
    root = tmp_path / "fleet"
    _write(root, "a1", {"agent": "a1", "state": "busy", "dod_contract": "x"})
    w, elog = _watcher(tmp_path, root, "root")
    w.sweep = 0.1
    w.tick(T0, True, None)
    os.rename(root, tmp_path / "away")
    w.tick(T0 + 0.5, False, set())          # a partial tick: nothing reported, nothing concluded
    assert w.proj["fleet"]["sources"].get("fleet", {}).get("failed") in (None, False)
    w.tick(T0 + 2, True, set())             # the next full tick
    assert w.proj["fleet"]["sources"]["fleet"]["failed"] is True
    assert [r.event.error_class for r in elog.read(0, types=["source.failed"])] == ["root-missing"]
    assert w.proj["fleet"]["agents"]["a1"]["class"] != "CERRADO"   # a missing root closes no one
    os.rename(tmp_path / "away", root)
    w.tick(T0 + 4, True, set())
    assert w.proj["fleet"]["sources"]["fleet"]["failed"] is False
    elog.close()


def test_files_gone_with_their_root_close_no_one(tmp_path):
    """Regression (the hostile drill under two CPU burners): ROOT renamed away between two
    looks; a partial tick that looked at paths inside it took its files for deleted, and two such
    ticks closed every agent. Files that vanished with their ROOT are a missing root."""
    root = tmp_path / "fleet"
    paths = [_write(root, f"g{i}", {"agent": f"g{i}", "state": "busy", "dod_contract": "x"}) for i in range(3)]
    w, elog = _watcher(tmp_path, root, "gone")
    w.sweep = 0.5
    t = T0
    w.tick(t, True, None)
    os.rename(root, tmp_path / "away")
    for k in range(1, 5):
        t += 0.3
        w.tick(t, k > 2, set(paths))              # inotify names the files: two partial ticks, two full
    assert all(a["class"] != "CERRADO" for a in w.proj["fleet"]["agents"].values())
    assert [r.event.error_class for r in elog.read(0, types=["source.failed"])] == ["root-missing"]
    os.rename(tmp_path / "away", root)
    w.tick(t + 2, True, set())
    assert w.proj["fleet"]["sources"]["fleet"]["failed"] is False
    assert all(a["class"] != "CERRADO" for a in w.proj["fleet"]["agents"].values())
    elog.close()
