"""A SIGHUP reload compares the log the new config names with the log the watcher has open.

Found by a lifecycle pass: the reload compared [store] path strings, so a watcher run with
`--db X` refused every reload after an edit of [store] path ("store.path changed ...: a reload
cannot move the event log": --db wins, the log does not move), and so did a config naming the
open log through a symlinked folder; each time the whole new config (sources too) was dropped.
A real move is still refused."""
from __future__ import annotations

import os

from tests.support.reloads import reload_lines


def conf(tmp_path, store: str, sources: int) -> str:
    out = f'[store]\npath = "{store}"\n'
    for i in range(sources):
        (tmp_path / f"fleet{i}" / "a1").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"fleet{i}" / "a1" / "goal.json").write_text('{"state": "busy", "dod_contract": "x"}')
        out += f'[[sources]]\nname = "f{i}"\nkind = "goals"\nglob = "{tmp_path}/fleet{i}/*/goal.json"\n'
    return out


def test_a_reload_under_db_ignores_an_edited_store_path(tmp_path):
    db = str(tmp_path / "given.db")
    got = reload_lines(tmp_path, ["--db", db], conf(tmp_path, f"{tmp_path}/a.db", 1),
                       conf(tmp_path, f"{tmp_path}/b.db", 2), db)
    assert got and "config reloaded: 2 sources" in got[-1] and not any("refused" in x for x in got), got


def test_a_reload_naming_the_open_log_through_a_symlink_is_no_move(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    db = str(tmp_path / "real" / "e.db")
    got = reload_lines(tmp_path, [], conf(tmp_path, db, 1), conf(tmp_path, f"{tmp_path}/link/e.db", 2), db)
    assert got and "config reloaded: 2 sources" in got[-1] and not any("refused" in x for x in got), got


def test_a_reload_that_moves_the_log_is_still_refused(tmp_path):
    db = str(tmp_path / "e.db")
    got = reload_lines(tmp_path, [], conf(tmp_path, db, 1), conf(tmp_path, f"{tmp_path}/other.db", 2), db)
    assert any("reload refused" in x and "store.path changed" in x for x in got), got
