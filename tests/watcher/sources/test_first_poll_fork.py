"""A big first poll read in two processes (watcher/sources/forkread.py) sees exactly what one
process sees, and a bad second process costs time, never an observation. Real files (hostile
ones among them), a real fork."""
from __future__ import annotations

import json
import logging
import os

import pytest

from projections.observations import AgentObs
from watcher.config import Source
from watcher.sources import forkread
from watcher.sources.files import GoalsSource, StepsSource

N = forkread.FORK_MIN + 500
pytestmark = pytest.mark.skipif(not forkread.usable(N), reason="needs os.fork and two CPUs")


def _fleet(root, n: int = N) -> None:
    """n agent folders: usual goal.json files and, spread among them, every hostile kind."""
    for i in range(n):
        d = root / f"a{i:05d}"
        d.mkdir(parents=True)
        g = d / "goal.json"
        k = i % 50
        if k == 7:
            os.mkfifo(g)
        elif k == 11:
            g.symlink_to(root / "nowhere")
        elif k == 13:
            g.mkdir()
        elif k == 17:
            g.write_bytes(b"{" * 6000)                      # too deep for the fast path
        elif k == 19:
            g.write_bytes(b"\xef\xbb\xbf" + json.dumps({"agent": f"a{i}", "state": "busy"}).encode())
        elif k == 23:
            g.write_bytes(b"x" * (2 << 20))                 # past max_bytes
        elif k == 29:
            g.write_text('{"agent": "a\\u001b]0;evil\\u0007", "state": 5}')
        elif k == 31:   # a folder name that is no UTF-8: a path msgpack cannot carry as text
            bad = os.path.join(os.fsencode(root), b"b\xff%05d" % i)
            os.rename(d, bad)
            with open(os.path.join(bad, b"goal.json"), "w") as f:
                json.dump({"state": "busy"}, f)
        else:
            g.write_text(json.dumps({"agent": f"a{i:05d}", "state": ["busy", "waiting", "idle"][i % 3],
                                     "phase": "haciendo", "dod_contract": f"pytest tests/test_{i}.py",
                                     "last_activity": 1_800_000_000.5 + i, "task": f"task {i}"}))


def _poll(cls, pattern: str, fork: bool, monkeypatch):
    monkeypatch.setattr(forkread, "FORK_MIN", forkread.FORK_MIN if fork else 10**9)
    src = cls(Source(name="fleet", kind="goals" if cls is GoalsSource else "steps", glob=pattern))
    res = src.poll(1_800_000_100.0, True)
    return res, {p: (e.key, e.obs, e.fails) for p, e in src.cache.items()}


def test_two_processes_see_what_one_sees_hostile_files_included(tmp_path, monkeypatch):
    _fleet(tmp_path / "f")
    pattern = f"{tmp_path}/f/*/goal.json"
    one, cache1 = _poll(GoalsSource, pattern, False, monkeypatch)
    two, cache2 = _poll(GoalsSource, pattern, True, monkeypatch)
    assert len(one.agents) == N - 3 * (N // 50)  # too deep, too large, a bad type: awaiting their second read
    assert one.agents == two.agents
    assert cache1 == cache2
    assert sum(1 for o in two.agents if "\udcff" in (o.path or "")) == N // 50
    errors = {o.error for o in two.agents if o.error}
    assert any("FIFO" in e for e in errors) and any("folder" in e for e in errors) \
        and any("dangling" in e for e in errors)
    assert sorted(f for _, _, f in cache1.values()) == sorted(f for _, _, f in cache2.values())


def test_a_steps_doc_the_child_cannot_send_is_read_here(tmp_path, monkeypatch):
    for i in range(N):
        d = tmp_path / "runs" / f"r{i:05d}"
        d.mkdir(parents=True)
        doc = {"run": f"r{i}", "steps": [{"id": "s1", "status": "done"}]}
        if i % 100 == 3:
            doc["huge"] = 1 << 70   # JSON has it, msgpack cannot carry it
        (d / "steps.json").write_text(json.dumps(doc))
    pattern = f"{tmp_path}/runs/*/steps.json"
    one, cache1 = _poll(StepsSource, pattern, False, monkeypatch)
    two, cache2 = _poll(StepsSource, pattern, True, monkeypatch)
    assert one.runs == two.runs and cache1 == cache2
    assert sum(1 for r in two.runs if r.doc and r.doc.get("huge") == 1 << 70) == N // 100


def _small_files(root) -> list[str]:
    """N files of "{}" (a child that gets far enough reads them)."""
    paths = []
    for i in range(N):
        p = root / f"a{i}"
        p.write_text("{}")
        paths.append(str(p))
    return paths


def _reader(parent: int, misbehave):
    def read_one(path: str):
        if os.getpid() != parent:
            misbehave()
        st = os.stat(path)
        return st, AgentObs(agent=os.path.basename(path), source="s", path=path)
    return read_one


@pytest.mark.parametrize("how", ["dies", "hangs", "floods", "wrong type"])
def test_a_bad_second_process_is_killed_and_its_half_read_here(tmp_path, monkeypatch, caplog, how):
    paths = _small_files(tmp_path)
    parent = os.getpid()
    monkeypatch.setattr(forkread, "WAIT_MIN_S", 0.5)
    obs_type = AgentObs
    if how == "dies":
        misbehave = lambda: os._exit(3)  # noqa: E731
    elif how == "hangs":
        misbehave = lambda: __import__("time").sleep(600)  # noqa: E731
    elif how == "floods":
        monkeypatch.setattr(forkread, "MAX_OUT", 1000)
        misbehave = lambda: None  # noqa: E731
    else:
        from projections.observations import RunObs
        obs_type = RunObs  # an answer that does not decode as what was asked
        misbehave = lambda: None  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="fleetwatch.sources"):
        got = list(forkread.iter_split(paths, _reader(parent, misbehave), obs_type))
    assert [o.agent for _, o in got] == [f"a{i}" for i in range(N)]
    assert all(st.st_size == 2 for st, _ in got)
    assert any("no usable answer" in r.getMessage() for r in caplog.records)
    with pytest.raises(ChildProcessError):  # the child was killed and reaped: no child left
        os.waitpid(-1, os.WNOHANG)


def test_the_child_holds_no_descriptor_of_the_parents(tmp_path):
    """A child stuck on a hung file system must hold no lock or log of the watcher's: it keeps
    only stdin/stdout/stderr, its pipe and the file it reads."""
    keep = open(tmp_path / "held", "w")   # stands for the log and its lock
    held = keep.fileno()
    paths = [str(tmp_path / "held")] * N
    parent = os.getpid()

    def read_one(path: str):
        fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
        st = os.stat(path)
        return st, AgentObs(agent="x", source="s", task=",".join(map(str, fds)) if os.getpid() != parent else None)
    try:
        got = list(forkread.iter_split(paths, read_one, AgentObs))
    finally:
        keep.close()
    child = [o.task for _, o in got[forkread.split_at(N):]]
    assert all(t is not None for t in child)
    fds = {int(x) for x in child[0].split(",")}
    assert held not in fds
    assert len(fds - {0, 1, 2}) <= 2      # its pipe, and listdir's own descriptor of /proc/self/fd


def test_a_first_poll_that_fails_midway_leaves_no_child(tmp_path, monkeypatch):
    """The first poll files each of its own half as it reads it, while the child still reads
    (forkread.iter_split): an error in that filing must kill and reap the child at once, not
    leave it (or a zombie) behind."""
    _fleet(tmp_path, N)
    src = GoalsSource(Source(name="fleet", kind="goals", glob=f"{tmp_path}/*/goal.json"))
    calls = {"n": 0}
    real = src._update

    def update(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 100:
            raise RuntimeError("boom")
        return real(*a, **kw)
    monkeypatch.setattr(src, "_update", update)
    with pytest.raises(RuntimeError, match="boom"):
        src._first_poll(sorted(str(p) for p in tmp_path.glob("*/goal.json")))
    with pytest.raises(ChildProcessError):  # killed and reaped: no child left
        os.waitpid(-1, os.WNOHANG)


def test_closing_the_split_early_kills_and_reaps_the_child(tmp_path):
    paths = _small_files(tmp_path)
    parent = os.getpid()
    it = forkread.iter_split(paths, _reader(parent, lambda: __import__("time").sleep(600)), AgentObs)
    first = [next(it) for _ in range(10)]
    assert [o.agent for _, o in first] == [f"a{i}" for i in range(10)]
    it.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_a_child_that_dies_midway_gives_what_it_answered_and_the_rest_is_read_here(tmp_path, caplog):
    """The child's answer comes in frames (forkread.FRAME files each): one that dies after three
    frames has answered for those files; this process reads the rest of its part, and nothing is
    missing or doubled."""
    paths = _small_files(tmp_path)
    parent = os.getpid()
    reads = {"n": 0}

    def die_after_three_frames():
        reads["n"] += 1
        if reads["n"] > 3 * forkread.FRAME:
            os._exit(3)
    k = forkread.split_at(N)
    here: list[str] = []
    read = _reader(parent, die_after_three_frames)

    def counted(path: str):
        if os.getpid() == parent:
            here.append(path)
        return read(path)
    with caplog.at_level(logging.WARNING, logger="fleetwatch.sources"):
        got = list(forkread.iter_split(paths, counted, AgentObs))
    assert [o.agent for _, o in got] == [f"a{i}" for i in range(N)]
    assert here == paths[:k] + paths[k + 3 * forkread.FRAME:]   # the child's three frames were used
    msg = [r.getMessage() for r in caplog.records if "no usable answer" in r.getMessage()]
    assert msg and f"for {N - k - 3 * forkread.FRAME} of its {N - k} files" in msg[0]
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def _children() -> dict[int, str]:
    """{pid: state} of this process's children, from /proc/*/stat."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                out[int(d)] = fields[0]
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_the_child_never_waits_on_a_full_pipe(tmp_path):
    """Its answer (here ~3 MB, three times what a pipe can be grown to) is drained while this
    process reads its own part: by the end of that part the child has written it all and exited
    (a zombie awaiting its reaping), where with no draining it would still be blocked in write."""
    import time
    paths = _small_files(tmp_path)
    parent = os.getpid()

    def read_one(path: str):
        st = os.stat(path)
        if os.getpid() == parent:
            time.sleep(0.002)   # this process's part takes ~2 s: ample for the child's ~0.1 s
        return st, AgentObs(agent=os.path.basename(path), source="s", path=path, task="t" * 2000)
    before = set(_children())
    it = forkread.iter_split(paths, read_one, AgentObs)
    k = forkread.split_at(N)
    first = [next(it) for _ in range(k)]
    kids = {c: s for c, s in _children().items() if c not in before}
    assert list(kids.values()) == ["Z"]   # done, not blocked on its pipe
    rest = list(it)
    assert [o.agent for _, o in first + rest] == [os.path.basename(p) for p in paths]
