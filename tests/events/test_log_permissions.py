"""The log's file modes as a user who is not root (root reads and writes through any mode, so these
skip as root; .ci/unprivileged.sh runs them as the user fwci in CI)."""
from __future__ import annotations

import os

import pytest

from events.errors import StoreError
from events.log import EventLog
from events.types import WatcherStarted

NOW = 1_800_000_000.0
as_user = pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes through any file mode")


def _log_with_one_event(tmp_path, mode: int) -> str:
    p = str(tmp_path / "events.db")
    with EventLog(p, durability="normal") as log:
        log.append([WatcherStarted(version="t", pid=1)], NOW)
    os.chmod(p, mode)
    return p


@as_user
def test_unwritable_log_is_refused_to_a_writer(tmp_path):
    p = _log_with_one_event(tmp_path, 0o400)
    with pytest.raises(StoreError, match="not readable and writable"):
        EventLog(p)


@as_user
def test_unwritable_log_is_read_and_verified_read_only(tmp_path):
    p = _log_with_one_event(tmp_path, 0o400)
    with EventLog(p, create=False) as log:
        assert log.readonly and [r.seq for r in log.read()] == [1] and log.verify().ok


@as_user
def test_read_only_copy_in_a_read_only_folder_opens_immutable(tmp_path):
    """SQLite cannot create the -shm there: it said ReadOnlyError (SQLITE_READONLY_CANTINIT), which
    open_readonly did not catch, so a user's read-only copy could not be read at all."""
    p = _log_with_one_event(tmp_path, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        with EventLog(p, create=False) as log:
            assert [r.seq for r in log.read()] == [1] and log.verify().ok
        assert sorted(os.listdir(tmp_path)) == ["events.db", "events.db.head"]
    finally:
        os.chmod(tmp_path, 0o755)
