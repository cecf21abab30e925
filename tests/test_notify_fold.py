"""notify.fold_batch folds a batch to the very state of notify.fold one event at a time
(real SQLite event logs: the seeded logs of tests/test_rebuild_batches.py, every type notify
folds, prunes by time and by the cap, sweeps)."""
from __future__ import annotations

import pytest

from projections import notify
from projections.base import encode_state
from watcher.runtime.state import TimeCache

from tests import test_rebuild_batches as rb


@pytest.mark.parametrize("mix,batch", [("churn", 1), ("churn", 37), ("bench_mix", 500)])
def test_fold_batch_is_fold_one_by_one(tmp_path, mix, batch):
    elog = getattr(rb, mix)(str(tmp_path / "e.db"), **({"appends": 160} if mix == "churn" else {"n": 6000}))
    recs = list(elog.read(0))
    elog.close()
    one = notify.initial()
    for rec in recs:
        one = notify.fold(one, rec)
    many, times = notify.initial(), TimeCache(notify.TIME).__getitem__
    for i in range(0, len(recs), batch):
        many = notify.fold_batch(many, recs[i:i + batch], times)
    assert encode_state(many) == encode_state(one)
    assert len(one["conds"]) > 10
