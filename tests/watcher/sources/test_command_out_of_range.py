"""Regression: one item of a command source holding an out-of-range number (``1e400``, ``NaN``,
``-Infinity``) failed the whole source ("bad output: not JSON"): every agent of it lost its
observation. Now only that item is bad (MAL_LANZADO naming the key, when it has an id) and the
others are observed; a number out of range in a key the parser does not read changes nothing,
like in a goal.json. Real command processes (``cat`` of the output)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from watcher.config import parse
from watcher.sources import build_sources
from tests.support.exe import FLEETWATCH

BIG = "1" + "0" * 400
GOOD = ('{"name": "g1", "state": "busy", "phase": "haciendo", "dod_contract": "x"}',
        '{"name": "g2", "state": "waiting", "phase": "preguntando", "dod_contract": "y"}')
CHECK = '[{"id": "t", "kind": "cmd", "cmd": ["true"], "expect": {"%s": %s}}]'


def poll(tmp_path, items, entity=""):
    out = tmp_path / "out.json"
    out.write_text("[" + ", ".join(items) + "]")
    ent = f'entity = "{entity}"\n' if entity else ""
    cfg = parse(f'[[sources]]\nname = "fv"\nkind = "command"\nargv = {json.dumps(["cat", str(out)])}\n'
                f'timeout = "5s"\n{ent}')
    src = build_sources(cfg)[0]
    try:
        return src.poll(0.0)
    finally:
        src.close()


@pytest.mark.parametrize("bad,why", [
    ('{"name": "b", "state": "busy", "last_activity": 1e400}', "last_activity: out-of-range number"),
    ('{"name": "b", "state": "busy", "last_activity": -1e400}', "last_activity: out-of-range number"),
    ('{"name": "b", "state": "busy", "last_activity": NaN}', "last_activity: out-of-range number"),
    ('{"name": "b", "state": Infinity}', "state: out-of-range number"),
    ('{"name": "b", "state": "busy", "tools_open": [{"n": -Infinity}]}', "tools_open: out-of-range number"),
    ('{"name": "b", "state": "busy", "dod_contract": ' + CHECK % ("stdout_gt", "1e400") + "}",
     "dod_contract: out-of-range number"),
])
def test_one_item_out_of_range_is_that_agents_error_not_the_sources(tmp_path, bad, why):
    r = poll(tmp_path, [GOOD[0], bad, GOOD[1]])
    assert r.ok, r.error
    got = {a.agent: a for a in r.agents}
    assert sorted(got) == ["b", "g1", "g2"]
    assert got["g1"].error is None and got["g1"].state == "busy" and got["g2"].state == "waiting"
    assert got["b"].error and got["b"].error.startswith(why), got["b"].error


@pytest.mark.parametrize("bad", [
    '{"name": "b", "state": "busy", "cost": 1e400, "nested": {"x": [NaN]}}',   # keys never read
    '{"name": "b", "state": "busy", "last_activity": ' + BIG + "}",             # a huge int: no time
    # a huge integer is a number a check's stdout can be compared with exactly (it raised
    # OverflowError in the contract's check, in goal.json too: tests/watcher/cli/test_parse_raises_one_file.py)
    '{"name": "b", "state": "busy", "dod_contract": ' + CHECK % ("stdout_gt", BIG) + "}",
])
def test_out_of_range_where_nothing_reads_it_changes_nothing(tmp_path, bad):
    r = poll(tmp_path, [GOOD[0], bad, GOOD[1]])
    assert r.ok and {a.agent: a.error for a in r.agents} == {"g1": None, "b": None, "g2": None}


def test_an_item_without_an_id_is_skipped_and_swarm_rows_too(tmp_path):
    r = poll(tmp_path, [GOOD[0], '{"name": 1e400, "state": "busy"}', GOOD[1]])
    assert r.ok and [a.agent for a in r.agents] == ["g1", "g2"]
    rows = ['{"group": "g", "child": "c1", "status": "running"}', '{"group": "g", "child": "c2", "status": NaN}',
            '{"group": "g", "child": "c3", "status": "done", "extra": 1e400}']
    r = poll(tmp_path, rows, entity="swarm")
    assert r.ok and [row.key for row in r.rows] == [("g", "c1"), ("g", "c3")]


def test_not_json_is_still_the_sources_error(tmp_path):
    r = poll(tmp_path, [GOOD[0], '{"name": "b", "last_activity": 1e400', GOOD[1]])
    assert not r.ok and r.error == "bad output: not JSON"
    # a lone surrogate is refused by the fast decoder too, and the tolerant one must not let it in
    # beside a NaN (it cannot be encoded into an event: it would fail every later tick)
    r = poll(tmp_path, [GOOD[0], '{"name": "\\ud800", "state": "busy", "last_activity": NaN}', GOOD[1]])
    assert not r.ok and r.error == "bad output: not JSON"


def test_run_once_observes_the_others(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("[" + ", ".join([GOOD[0], '{"name": "b", "state": "busy", "last_activity": 1e400}', GOOD[1]]) + "]")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fv"\nkind = "command"\n'
                   f'argv = {json.dumps(["cat", str(out)])}\ntimeout = "5s"\n')
    exe = FLEETWATCH
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    p = subprocess.run([exe, "run", "--once", "--config", str(cfg)], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    st = json.loads(subprocess.run([exe, "status", "--json", "--config", str(cfg)], capture_output=True, text=True,
                                   timeout=60, env=env).stdout)
    assert sorted(a["agent"] for a in st["agents"]) == ["b", "g1", "g2"]
    assert "source.failed" not in subprocess.run([exe, "tail", "--config", str(cfg)], capture_output=True,
                                                  text=True, timeout=60, env=env).stdout
