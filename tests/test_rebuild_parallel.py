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

from tests.test_rebuild_batches import churn


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
