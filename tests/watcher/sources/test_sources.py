"""Sources with real files and real subprocesses: bad input never crashes, the two-read rule,
the stat cache, command and tmux sources."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from watcher.config import parse
from watcher.sources import build_sources, merge
from watcher.sources.parse import parse_goal, parse_time
from tests.support.exe import TESTS

FIX = os.path.join(str(TESTS), "fixtures")
NOW = time.time()


def goals_source(tmp_path, **extra):
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra.items())
    cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/*/goal.json"\n{body}')
    return build_sources(cfg)[0]


def write(tmp_path, agent, content: bytes | str):
    d = tmp_path / agent
    d.mkdir(exist_ok=True)
    p = d / "goal.json"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


GOOD = {"agent": "x", "state": "busy", "phase": "haciendo", "dod_contract": "tests pass", "dod": "secret session text"}

BAD = [
    # (raw bytes, expected reason fragment) -- each one MAL_LANZADO with a reason, never a crash
    (b"\x00\xff\xfegarbage", "not JSON"),                                  # garbage bytes
    (b"", "empty"),                                                        # empty file
    (b'{"agent": "x", "state": ', "not JSON"),                             # half-written
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),                         # deeply nested
    (b"[1, 2, 3]", "not a JSON object"),                                   # not an object
    (b'{"agent": "x", "state": 5, "dod_contract": "c"}', "wrong type"),    # wrong types
    (b'{"agent": "x", "state": "busy", "dod_contract": NaN}', "not JSON"),  # NaN is not JSON
]


@pytest.mark.parametrize("raw,reason", BAD)
def test_bad_goal_bytes_give_a_reason(raw, reason):
    o = parse_goal(raw, source="s", path="/p", folder_id="f", mtime=NOW)
    assert o.error and reason in o.error


def test_bom_is_accepted_and_dod_text_is_dropped():
    o = parse_goal(b"\xef\xbb\xbf" + json.dumps(GOOD).encode(), source="s", path="/p", folder_id="f", mtime=NOW)
    assert o.error is None and o.agent == "x" and o.contract_len == len("tests pass")
    assert "secret" not in repr(o)


@pytest.mark.parametrize("v,want", [
    ("2026-11-29T19:20:00Z", 1795980000.0),        # ISO with Z
    ("2026-11-29T20:20:00+01:00", 1795980000.0),   # ISO with offset
    (1795980000, 1795980000.0),                    # epoch seconds
    ("yesterday", None),                           # garbage -> None (mtime used)
    (float("nan"), None),                          # NaN
    (True, None),                                  # bool is not a time
])
def test_parse_time(v, want):
    assert parse_time(v) == want


def test_two_read_rule_and_stat_cache(tmp_path):
    src = goals_source(tmp_path)
    p = write(tmp_path, "a1", json.dumps(GOOD))
    r = src.poll(NOW)
    assert [a.error for a in r.agents] == [None]
    p.write_text('{"agent": "x", "sta')             # half-written
    r = src.poll(NOW)
    assert [a.error for a in r.agents] == [None]    # first failed read: last good view stands
    r = src.poll(NOW)
    assert r.agents[0].error and "not JSON" in r.agents[0].error  # second failed read counts
    write(tmp_path, "a1", json.dumps(GOOD))
    assert src.poll(NOW).agents[0].error is None


def test_new_corrupt_file_is_invisible_until_second_read(tmp_path):
    src = goals_source(tmp_path)
    write(tmp_path, "a1", "{")
    assert src.poll(NOW).agents == []
    assert src.poll(NOW).agents[0].error


def test_too_large_file_is_refused_without_reading_it_all(tmp_path):
    src = goals_source(tmp_path)
    p = write(tmp_path, "big", b"")
    with open(p, "wb") as f:
        f.write(b'{"agent": "big", "pad": "' + b"x" * (50 * 1024 * 1024) + b'"}')
    src.poll(NOW)
    r = src.poll(NOW)
    assert "too large" in r.agents[0].error


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    src = goals_source(tmp_path)
    p = write(tmp_path, "a1", json.dumps(GOOD))
    p.chmod(0)
    src.poll(NOW)
    assert "unreadable" in src.poll(NOW).agents[0].error


def test_symlink_loop_in_glob_does_not_crash(tmp_path):
    src = goals_source(tmp_path)
    write(tmp_path, "a1", json.dumps(GOOD))
    os.symlink(tmp_path / "loop", tmp_path / "loop")   # a symlink to itself
    r = src.poll(NOW)
    assert r.ok and [a.agent for a in r.agents] == ["x"]


def test_fixtures_classify_as_documented(tmp_path):
    shutil.copytree(os.path.join(FIX, "goals"), tmp_path / "goals")
    src = goals_source(tmp_path / "goals")
    src.poll(NOW)
    agents = {a.agent: a for a in src.poll(NOW).agents}
    assert sorted(agents) == [f"a0{i}" for i in range(1, 9)]
    assert agents["a05"].contract_sha256 is None        # empty contract, id from the folder
    assert agents["a08"].error                          # truncated JSON


def cmd_source(argv, entity=None, timeout="2s"):
    ent = f'entity = "{entity}"\n' if entity else ""
    cfg = parse(f'[[sources]]\nname = "fv"\nkind = "command"\nargv = {json.dumps(argv)}\ntimeout = "{timeout}"\n{ent}')
    return build_sources(cfg)[0]


def test_command_source_fixture():
    r = cmd_source(["cat", os.path.join(FIX, "fleetview-list.json")]).poll(NOW)
    assert r.ok and [a.agent for a in r.agents] == ["a01", "a02", "a09"]
    assert r.agents[0].target == "fleet:1.0"


@pytest.mark.parametrize("argv,reason", [
    ([sys.executable, "-c", "import sys; sys.exit(3)"], "exit status 3"),       # non-zero exit
    ([sys.executable, "-c", "import time; time.sleep(5)"], "timed out"),         # timeout
    ([sys.executable, "-c", "print('nope')"], "bad output"),                    # bad JSON
    ([sys.executable, "-c", "print('{}')"], "not a JSON array"),                # wrong shape
    (["/nonexistent/fleetview"], "not found"),                                  # missing program
])
def test_command_source_failures_are_values(argv, reason):
    r = cmd_source(argv, timeout="1s").poll(NOW)
    assert not r.ok and reason in r.error


def test_command_swarm_rows():
    r = cmd_source(["cat", os.path.join(FIX, "swarm-groups.json")], entity="swarm").poll(NOW)
    assert [row.key for row in r.rows][:2] == [("swarm:main:run-31", "c1"), ("swarm:main:run-31", "c2")]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_tmux_enriches_activity_and_reports_dead_panes(tmp_path):
    sock = f"fwtest{os.getpid()}"
    env = dict(os.environ, TMUX="")
    subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-n", "a1", "sleep 30"], check=True, env=env)
    try:
        subprocess.run(["tmux", "-L", sock, "set-option", "-g", "remain-on-exit", "on"], check=True)
        subprocess.run(["tmux", "-L", sock, "new-window", "-t", "fleet", "-n", "a2", "sleep 0.3; exit 7"], check=True)
        for _ in range(50):  # wait until tmux reports the dead pane
            out = subprocess.run(["tmux", "-L", sock, "list-windows", "-a", "-F", "#{pane_dead}:#{pane_dead_status}"],
                                 capture_output=True, text=True).stdout
            if "1:7" in out:
                break
            time.sleep(0.1)
        cfg = parse(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/*/goal.json"\n'
                    f'[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "{sock}"\n')
        write(tmp_path, "a1", json.dumps({**GOOD, "agent": "a1", "last_activity": 1000}))
        write(tmp_path, "a2", json.dumps({**GOOD, "agent": "a2", "target": "fleet:1"}))  # its own: exact
        srcs = build_sources(cfg)
        snap = merge(srcs, [s.poll(NOW) for s in srcs])
        assert snap.agents["a1"].last_activity > 1000          # window activity is later
        assert snap.agents["a1"].target == "=fleet:0"  # exact: the session name is not prefix-matched
        assert snap.agents["a2"].pane_dead
        # the exit status is relayed when tmux has it (under load tmux sometimes reports none)
        assert snap.agents["a2"].pane_dead_status in (7, None)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def test_tmux_without_server_is_not_a_failure():
    cfg = parse('[[sources]]\nname = "tm"\nkind = "tmux"\nsocket = "fw-no-such-server"\n')
    r = build_sources(cfg)[0].poll(NOW)
    assert r.ok or "not found" in (r.error or "")


# ---- the stat cache's fast path and partial ticks (inotify's paths) -------------------------
def view(res):
    return sorted((o.agent, o.state, o.error) for o in res.agents)


def test_cached_polls_match_a_fresh_source(tmp_path):
    """Whatever happens to the folder, a source with its cache sees what a fresh one sees."""
    src = goals_source(tmp_path)
    g = lambda a, st="busy": json.dumps({**GOOD, "agent": a, "state": st})  # noqa: E731
    steps = [
        lambda: [write(tmp_path, f"a{i}", g(f"a{i}")) for i in range(5)],
        lambda: write(tmp_path, "a1", g("a1", "idle")),                           # rewritten in place
        lambda: shutil.rmtree(tmp_path / "a2"),                                   # folder gone
        lambda: (tmp_path / "a3" / "goal.json").unlink(),                         # file gone, folder stays
        lambda: os.rename(tmp_path / "a4", tmp_path / "b4"),                      # folder renamed
        lambda: write(tmp_path, ".hidden", g("h")),                               # hidden folder: not an agent
        lambda: (tmp_path / "loose.json").write_text("{}"),                       # a file in the root
        lambda: (tmp_path / "a5" / "goal.json").mkdir(parents=True),              # a folder named like the file
        lambda: write(tmp_path, "a3", g("a3", "waiting")),                        # back
        lambda: None,                                                             # nothing
    ]
    for step in steps:
        step()
        got = src.poll(NOW)
        assert view(got) == view(goals_source(tmp_path).poll(NOW))
        assert view(src.poll(NOW)) == view(got)                                  # and again (fast path)


def test_unchanged_files_keep_their_observation_object(tmp_path):
    """The fleet and dod detectors skip agents whose observation is the same object."""
    write(tmp_path, "a1", json.dumps({**GOOD, "agent": "a1"}))
    write(tmp_path, "a2", json.dumps({**GOOD, "agent": "a2"}))
    src = goals_source(tmp_path)
    one = merge([src], [src.poll(NOW)]).agents
    write(tmp_path, "a2", json.dumps({**GOOD, "agent": "a2", "state": "idle"}))
    two = merge([src], [src.poll(NOW)]).agents
    assert two["a1"] is one["a1"] and two["a2"] is not one["a2"]
    part = merge([src], [src.poll(NOW, False, changed=set())]).agents
    assert part["a1"] is one["a1"] and part["a2"] is two["a2"]


def test_partial_polls_look_where_they_are_told(tmp_path):
    g = lambda a, st="busy": json.dumps({**GOOD, "agent": a, "state": st})  # noqa: E731
    for a in ("a1", "a2", "a3"):
        write(tmp_path, a, g(a))
    src = goals_source(tmp_path)
    src.poll(NOW)
    # a change inotify reported (tmp + rename: the destination path)
    write(tmp_path, "a1", g("a1", "waiting"))
    res = src.poll(NOW, False, changed={str(tmp_path / "a1" / "goal.json.tmp"), str(tmp_path / "a1" / "goal.json")})
    assert ("a1", "waiting", None) in view(res)
    # a deletion (the folder's path)
    shutil.rmtree(tmp_path / "a2")
    res = src.poll(NOW, False, changed={str(tmp_path / "a2")})
    assert [a for a, _, _ in view(res)] == ["a1", "a3"]
    # a rename into the root (a folder written elsewhere, then moved in)
    outside = tmp_path.parent / f"{tmp_path.name}-staging"
    outside.mkdir()
    (outside / "goal.json").write_text(g("a9"))
    os.rename(outside, tmp_path / "a9")
    res = src.poll(NOW, False, changed={str(tmp_path / "a9")})
    assert [a for a, _, _ in view(res)] == ["a1", "a3", "a9"]
    # a change inotify did not report: a partial poll does not see it, the full resync does
    write(tmp_path, "a3", g("a3", "idle"))
    assert ("a3", "busy", None) in view(src.poll(NOW, False, changed=set()))
    assert ("a3", "idle", None) in view(src.poll(NOW))
    # paths that say nothing (another folder, a deeper file) change nothing; the root itself: look everywhere
    write(tmp_path, "a4", g("a4"))
    assert "a4" not in [a for a, _, _ in view(src.poll(NOW, False, changed={"/elsewhere/x", str(tmp_path / "a1" / "x" / "y")}))]
    assert "a4" in [a for a, _, _ in view(src.poll(NOW, False, changed={str(tmp_path)}))]


def test_partial_polls_keep_the_two_read_rule(tmp_path):
    write(tmp_path, "a1", json.dumps({**GOOD, "agent": "a1"}))
    src = goals_source(tmp_path)
    src.poll(NOW)
    p = write(tmp_path, "a1", '{"agent": "a1", "state": ')
    res = src.poll(NOW, False, changed={str(p)})
    assert view(res) == [("a1", "busy", None)]                    # first failed read: the last good view
    res = src.poll(NOW, False, changed=set())                      # nobody said anything: read again anyway
    assert res.agents[0].error and "not JSON" in res.agents[0].error
