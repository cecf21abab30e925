"""`rebuild` with half the folds in a second process (watcher/runtime/rebuild_par.py) gives the
one-process replay's states and snapshot bytes, and falls back to folding everything here when
the worker fails or answers for another log. Real logs, real worker processes."""
from __future__ import annotations

import os
import stat
import sys

import msgspec
import pytest

from events.log import EventLog
from watcher.runtime import rebuild_par
from watcher.runtime.state import Projections
from watcher.runtime.state import rebuild as rebuild_one

from tests.support.tamper import raw
from tests.support.seededlogs import churn


@pytest.fixture
def log(tmp_path):
    elog = churn(str(tmp_path / "e.db"), appends=220, seed=19)
    yield elog
    elog.close()


def _script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)



def serial(elog: EventLog) -> tuple[int, dict[str, bytes]]:
    p, diff = rebuild_one(elog, store=False)
    assert diff is None
    return p.seq, p.encoded()


def test_two_processes_give_the_one_process_replay(log):
    seq, want = serial(log)
    assert seq == log.head()[0] > 1000
    p, encoded = rebuild_par.rebuild_parallel(log)
    assert p.seq == seq and encoded == want and p.encoded() == want
    assert set(rebuild_par.WORKER) < set(want)   # both groups are real


def test_a_failed_worker_means_the_folds_run_here(log):
    seq, want = serial(log)
    p, encoded = rebuild_par.rebuild_parallel(log, python="/bin/false")   # exits 1, prints nothing
    assert (p.seq, encoded) == (seq, want)
    p, encoded = rebuild_par.rebuild_parallel(log, python="/nonexistent/python")
    assert (p.seq, encoded) == (seq, want)


def test_a_worker_answering_for_another_log_is_not_believed(log, tmp_path):
    """Well-formed output whose chain hash is not this log's row (another file at the path, a
    replaced log): its states are thrown away and its group folded here."""
    seq, want = serial(log)
    other = churn(str(tmp_path / "other.db"), appends=30, seed=3)
    other_p, _ = rebuild_one(other, store=False)
    other.close()
    fake = rebuild_par.Result(states={n: other_p.encoded()[n] for n in rebuild_par.WORKER}, upto_hash=b"\x01" * 32)
    doc = tmp_path / "doc.msgpack"
    doc.write_bytes(msgspec.msgpack.encode(fake))
    p, encoded = rebuild_par.rebuild_parallel(log, python=_script(tmp_path, "fake-python", f"exec cat {doc}"))
    assert (p.seq, encoded) == (seq, want)


def test_rebuild_stores_the_same_snapshots_either_way(log, monkeypatch):
    rebuild_one(log)
    one = log.snapshots()
    monkeypatch.setattr(rebuild_par, "MIN_EVENTS", 1)   # this small log takes the two-process path
    if rebuild_par.cores() < 2:
        pytest.skip("one core: rebuild never starts a worker")
    p, diff = rebuild_par.rebuild(log)
    assert diff is None and log.snapshots() == one
    assert Projections.load(log).encoded() == p.encoded()
    p2, diff = rebuild_par.rebuild(log, check=True, store=False)   # --check: one process, compares at each snapshot
    assert diff is None and p2.encoded() == p.encoded()


def test_the_worker_reads_only_its_groups_types(log):
    """The worker's own entry point, run as rebuild runs it: its states are those of the same
    folds over every row."""
    import subprocess

    upto = log.head()[0]
    proc = rebuild_par.start_worker(log.path, upto)
    got = rebuild_par.worker_result(proc)
    assert got is not None and got.upto_hash == rebuild_par.row_hash_at(log, upto) != b""
    _, want = serial(log)
    assert got.states == {n: want[n] for n in rebuild_par.WORKER}
    bad = subprocess.run([sys.executable, "-m", "watcher.runtime.rebuild_par", os.devnull, "5", "fleet"],
                         capture_output=True, env={**os.environ})
    assert bad.returncode != 0 and bad.stdout == b""


def test_a_hung_worker_is_killed_and_its_half_folded_here(log, tmp_path):
    """A worker that never answers (a hung interpreter, a stuck file system) is killed when its
    time is up; worker_result says so, and rebuild_parallel folds the group itself."""
    import time

    proc = rebuild_par.start_worker(log.path, log.head()[0], python=_script(tmp_path, "hang", "exec sleep 600"))
    t0 = time.monotonic()
    assert rebuild_par.worker_result(proc, timeout=0.5) is None
    assert proc.poll() is not None and time.monotonic() - t0 < 30


def test_a_flooding_worker_is_cut_at_max_out(log, tmp_path, monkeypatch):
    """A worker writing without end (here `yes`) is read up to MAX_OUT bytes, killed, and not
    believed: the whole rebuild is still the one-process replay."""
    monkeypatch.setattr(rebuild_par, "MAX_OUT", 1 << 20)
    seq, want = serial(log)
    proc = rebuild_par.start_worker(log.path, log.head()[0], python="yes")
    assert rebuild_par.worker_result(proc, timeout=60) is None and proc.poll() is not None
    p, encoded = rebuild_par.rebuild_parallel(log, python="yes")
    assert (p.seq, encoded) == (seq, want)


def test_each_group_stops_at_upto_inside_a_batch(tmp_path):
    """fold_group reads in batches of BATCH rows (CHUNK a query):
    rows appended after ``upto`` — in the same batch or later ones — are not folded, by either
    group, and each group's states are the one-process replay's at ``upto``."""
    elog = churn(str(tmp_path / "e.db"), appends=200, seed=11)
    try:
        upto = elog.head()[0]
        assert upto % rebuild_par.BATCH and upto > rebuild_par.CHUNK   # upto falls inside a batch, past a query's edge
        seq, want = serial(elog)
        more = churn(str(tmp_path / "more.db"), appends=40, seed=12)
        extra = [r.event for r in more.read(0)]
        more.close()
        elog.append(extra, 1_900_000_000.0)
        local = tuple(n for n in want if n not in rebuild_par.WORKER)
        for names, typed in ((rebuild_par.WORKER, True), (local, False)):
            p = rebuild_par.fold_group(elog, names, upto, types=typed)
            assert p.encoded() == {n: want[n] for n in names}
        assert p.seq == seq == upto
    finally:
        elog.close()


def test_damaged_rows_are_skipped_and_reported_as_in_one_process(tmp_path):
    """A row whose data does not decode (a hostile edit), at a batch's edge and inside one:
    the two-process rebuild skips and reports the same seqs as the one-process replay and folds
    the same states (the worker skips them too: its own read skips what it cannot decode)."""
    path = str(tmp_path / "e.db")
    churn(path, appends=220, seed=19).close()
    bad = (rebuild_par.BATCH, rebuild_par.BATCH + 1, 777, rebuild_par.CHUNK + 3)
    for s in bad:
        raw(path, "UPDATE events SET data = ? WHERE seq = ?", b"{not json", s)
    raw(path, "UPDATE events SET data = ? WHERE seq = ?", "text, not a blob", 901)
    one = EventLog(path, create=False, readonly=True)
    seq, want = serial(one)
    two = EventLog(path, create=False, readonly=True)
    try:
        p, encoded = rebuild_par.rebuild_parallel(two)
        assert (p.seq, encoded) == (seq, want)
        assert sorted(two.damaged) == sorted(one.damaged) == sorted((*bad, 901))
    finally:
        one.close()
        two.close()


# ---- the folds' speed edits (fleet, dod, report: issue 19's rebuild row) keep their rules ---------
@pytest.mark.parametrize("python", [sys.executable, "/bin/false"], ids=["worker", "worker-failed"])
def test_rows_only_the_worker_folds_are_not_read_here_yet_reported_and_last(tmp_path, python):
    """This process skips the types only the worker's projections fold (step.changed among them);
    a damaged row of such a type, and such a row last in the log, give the one-process replay's
    damaged seqs, last seq and states, whether the worker answers or fails (then its group is
    folded here from every row)."""
    from events.types import AgentClassified, StepChanged

    assert "step.changed" in rebuild_par.worker_only(Projections().mods)
    path = str(tmp_path / "w.db")
    elog = churn(path, appends=120, seed=5)
    elog.append([AgentClassified(agent="z", to="RECLAMA", source="fleet"),
                 StepChanged(run="r1", step="s1", to="begin"), StepChanged(run="r1", step="s2", to="begin")],
                1_800_100_000.0)
    head = elog.head()[0]
    elog.close()
    raw(path, "UPDATE events SET data = ? WHERE seq = ?", b"{not json", head - 1)   # a step.changed
    one = EventLog(path, create=False, readonly=True)
    seq, want = serial(one)
    two = EventLog(path, create=False, readonly=True)
    try:
        p, encoded = rebuild_par.rebuild_parallel(two, python=python)
        assert seq == head and (p.seq, encoded) == (seq, want)
        assert list(two.damaged) == sorted(one.damaged) and head - 1 in two.damaged
        assert two.damaged == one.damaged
    finally:
        one.close()
        two.close()


def _rec(seq: int, ev, t: float):
    from events.log import Recorded, iso
    from events.types import encode_data, tag_of

    return Recorded(seq, f"id{seq}", iso(t), tag_of(ev), ev.subject, 1, ev, encode_data(ev), b"")


def test_fleet_keeps_the_recorded_target_when_a_tick_saw_none():
    from events.types import AgentClassified
    from projections.fleet import fold as fleet

    st = fleet.initial()
    for seq, (agent, target) in enumerate((("a", ""), ("b", "t1"), ("b", ""), ("b", None), ("c", None)), 1):
        st = fleet.fold(st, _rec(seq, AgentClassified(agent=agent, to="TRABAJANDO", target=target), 1e9 + seq))
    assert {a: r["target"] for a, r in st["agents"].items()} == {"a": None, "b": "t1", "c": None}


@pytest.mark.parametrize("n, at", [(300, 512), (1100, 2048)])
def test_fleet_and_dod_prune_on_prune_dues_seqs_only(n, at):
    """With n agents closed over a week ago, the first agent.classified at a seq prune_due
    accepts (a multiple of 512, or past 512 agents of the power of two at or above their count:
    2048 for 1,107) forgets them, in fleet and in dod; classified events at other multiples of
    512 (1536) do not."""
    from events.types import AgentClassified
    from projections.dod import fold as dod
    from projections.fleet import fold as fleet

    t0 = 1.8e9
    fs, ds = fleet.initial(), dod.initial()
    recs = [_rec(i + 1, AgentClassified(agent=f"x{i}", to="CERRADO"), t0) for i in range(n)]
    seq, live = n, 0
    while seq < 2100:
        seq += 1
        live += 1
        recs.append(_rec(seq, AgentClassified(agent=f"live{live % 7}", to="TRABAJANDO"), t0 + 8 * 86400))
    gone_at = None
    for r in recs:
        fs, ds = fleet.fold(fs, r), dod.fold(ds, r)
        closed = sum(a.startswith("x") for a in fs["agents"])
        assert closed == sum(a.startswith("x") for a in ds["agents"])
        if gone_at is None and r.seq > n and closed == 0:
            gone_at = r.seq
    assert gone_at == at


def test_report_books_no_negative_time_for_a_clock_stepped_back():
    """An agent's next class at an earlier time (a clock stepped back): its stay counts 0 s,
    not a negative span (close_class's max(0, t - since))."""
    from events.types import AgentClassified
    from projections.report import fold as report
    from watcher.runtime.state import TimeCache

    times = TimeCache(report.TIME).__getitem__
    st = report.initial()
    for seq, (to, t) in enumerate((("RECLAMA", 1.8e9 + 100), ("TRABAJANDO", 1.8e9), ("ESTANCADO", 1.8e9 + 50)), 1):
        st = report.fold(st, _rec(seq, AgentClassified(agent="a", to=to), t), times)
    assert st["per_agent"]["a"]["time"] == {"RECLAMA": 0.0, "TRABAJANDO": 50.0}
    assert st["samples"]["reclama"] == [0.0]
    assert all(d["reclama_s"] >= 0 for d in st["days"].values())


def test_an_orphaned_worker_stops_folding(log, monkeypatch):
    """Regression: a `rebuild` killed with kill -9 left its worker folding on for seconds (a
    core's worth) for nobody. The worker's fold stops once its parent is another pid."""
    monkeypatch.setattr(rebuild_par, "ORPHAN_CHECK", 1)
    upto = log.head()[0]
    with pytest.raises(rebuild_par.Orphaned):
        rebuild_par.fold_group(log, rebuild_par.WORKER, upto, types=True, parent=os.getppid() + 1_000_000)
    p = rebuild_par.fold_group(log, rebuild_par.WORKER, upto, types=True, parent=os.getppid())
    assert p.seq == upto


def test_a_worker_told_another_parent_does_nothing(log):
    """The worker run as rebuild runs it, but with a parent pid that is not its parent (what it
    sees after a kill -9 of its `rebuild`: it was reparented): exit 1, nothing written, before
    it reads anything."""
    import subprocess

    upto = log.head()[0]
    out = subprocess.run([sys.executable, "-m", "watcher.runtime.rebuild_par", log.path, str(upto),
                          ",".join(rebuild_par.WORKER), str(os.getpid() + 1_000_000)], capture_output=True)
    assert out.returncode == 1 and out.stdout == b""
    own = subprocess.run([sys.executable, "-m", "watcher.runtime.rebuild_par", log.path, str(upto),
                          ",".join(rebuild_par.WORKER), str(os.getpid())], capture_output=True)
    assert own.returncode == 0 and msgspec.msgpack.decode(own.stdout, type=rebuild_par.Result).upto_hash
