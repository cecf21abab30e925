"""One shared check over every source kind (issue 46: declared seams, as eventsourcing runs one
test case over every recorder): each kind of the one table ``watcher.sources.KINDS`` is made from
a real config, is a ``Source`` (name, kind, partial, cache, delta, poll, close), polls once on
real inputs (files, a command, a SQLite file, a tmux server that is not there, an empty Claude
Code folder) into a ``SourceResult`` named after it, and closes. The config accepts exactly the
table's kinds and asks each for the keys its row names."""
from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Mapping

import pytest

from events.errors import ConfigError
from projections.observations import SourceResult
from watcher import config
from watcher.sources import KINDS, SessionSource, Source, WindowSource, build_sources, merge

T0 = 1_800_000_000.0


def test_the_config_refuses_a_kind_not_in_the_table(tmp_path):
    with pytest.raises(ConfigError) as e:
        config.parse(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "s1"\nkind = "no-such-kind"\n')
    assert e.value.key == "sources[0].kind" and all(k in str(e.value) for k in KINDS)


@pytest.mark.parametrize("kind,key", [(k, n) for k in sorted(KINDS) for n in KINDS[k].needs])
def test_the_config_asks_each_kind_for_the_keys_of_its_row(kind, key, tmp_path):
    spec = _spec(kind, tmp_path)
    kept = "\n".join(ln for ln in spec.splitlines() if not ln.startswith(f"{key} ="))
    with pytest.raises(ConfigError) as e:
        config.parse(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "s1"\nkind = "{kind}"\n{kept}\n')
    assert e.value.key == f"sources[0].{key}"


def _spec(kind: str, tmp) -> str:
    if kind in ("goals", "steps"):
        (tmp / "a").mkdir(exist_ok=True)
        (tmp / "a" / f"{kind}.json").write_text(json.dumps({"agent": "a1", "state": "busy"} if kind == "goals"
                                                           else {"run": "R1", "steps": {}}))
        return f'glob = "{tmp}/*/{kind}.json"'
    if kind == "command":
        return f'argv = ["{sys.executable}", "-c", "print(\'[]\')"]'
    if kind == "sqlite":
        db = tmp / "w.db"
        with sqlite3.connect(db) as c:
            c.execute("create table t (mission text, wp text, state text)")
            c.execute("insert into t values ('m1', 'w1', 'RUNNING')")
        return f'path = "{db}"\nquery = "select mission, wp, state from t"\nkey = ["mission", "wp"]\nentity = "wp"'
    if kind == "tmux":
        return f'socket = "fw-none-{tmp.name}"'
    return ""


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_a_source(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))              # claude: an empty ~/.claude
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    cfg = config.parse(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "s1"\nkind = "{kind}"\n'
                       f'{_spec(kind, tmp_path)}\n')
    (src,) = build_sources(cfg)
    try:
        assert isinstance(src, Source)
        assert src.name == "s1" and isinstance(src.partial, bool) and isinstance(src.cache, Mapping)
        assert src.delta is None                            # nothing polled yet: no change known
        assert isinstance(src, WindowSource) == (kind == "tmux")
        assert isinstance(src, SessionSource) == (kind == "claude")
        res = src.poll(T0, True)
        assert isinstance(res, SourceResult) and res.name == "s1"
        if kind in ("goals", "steps", "sqlite", "command"):
            assert res.ok, res.error
        if kind == "goals":
            assert [a.agent for a in res.agents] == ["a1"] and src.partial and len(src.cache) == 1
        if kind == "steps":
            assert [r.run for r in res.runs] == ["R1"]
        if kind == "sqlite":
            assert len(res.rows) == 1
        if kind == "tmux":
            assert src.known == res.ok                        # its word stands once a poll answered
        merge([src], [res])                                   # the merge takes every kind
    finally:
        src.close()
