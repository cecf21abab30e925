"""What `status`, `summary` and `tail` load to answer (issue 19: commands that start fast).

The import budget is pinned structurally (which modules a real fast-path process ends with), never
by timing; the speed itself is bench_rebuild.py's CLI rows. `status` reads only the snapshots it
shows and decodes notify's as a narrow view when it is at the head: its answer must be the answer
of the whole state, at the head, past it, and when the snapshot is of another layout.
"""
from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

from events.log import EventLog
from events.types import AgentClassified, DodVerdict, NoticeSent, SilenceAdded
from projections.base import encode_state
from watcher.cli.status import STATUS_READS, TABLE_READS, build_status, load_states, notify_health_view
from watcher.config import Config
from watcher.runtime.state import Projections, rebuild
from tests.support.exe import ROOT

T0 = 1_800_000_000.0
# Never on a fast path: the typer app and its kin, the push/inotify stacks, and what only other
# paths need (typing_extensions: msgspec imported without it, watcher/cli/fast.py; TOML: no config
# file; logging: no command here logs; json: msgspec reads and writes it; the status tables: `tail`
# prints none).
NEVER = ("typer", "click", "rich", "apprise", "watchdog", "typing_extensions", "inspect", "logging",
         "asyncio", "tomllib", "json", "signal")
PROBE = ("import sys; from watcher.entry import main; sys.argv = ['fleetwatch'] + sys.argv[1:]\n"
         "try:\n    main()\nexcept SystemExit:\n    pass\n"
         "print(sorted(sys.modules), file=sys.stderr)")


def history(db: str) -> None:
    """A small real log whose notify state has a push per severity and a live silence, with every
    snapshot stored at its head."""
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent="a1", to="RECLAMA", state="waiting", phase="haciendo", reason="waiting",
                                 source="fleet"),
                 AgentClassified(agent="a2", to="DICE_TERMINADO", state="idle", phase="hecho", reason="done",
                                 source="fleet")], T0)
    elog.append([NoticeSent(notice="n1", covers=[1], severity="urgent"),
                 SilenceAdded(silence="s1", subject_match="agent:a2", until="2027-06-01T00:00:00Z", reason="lunch"),
                 DodVerdict(agent="a2", verdict="met", verifier="v1", evidence="pytest -q: green")], T0 + 30)
    elog.append([NoticeSent(notice="n2", covers=[2], severity="warning")], T0 + 60)
    rebuild(elog)
    elog.close()


def whole(db: str) -> tuple[dict, int]:
    elog = EventLog(db, create=False, readonly=True)
    try:
        p = Projections.load(elog)
        return p.states, p.seq
    finally:
        elog.close()


def docs(db: str) -> tuple[dict, dict, Projections]:
    """(status doc from the whole states, from status's own load, that load) at one clock."""
    cfg = Config()
    states, head = whole(db)
    elog = EventLog(db, create=False, readonly=True)
    try:
        p = Projections.load(elog, STATUS_READS, {"notify": notify_health_view()})
    finally:
        elog.close()
    now = T0 + 3600
    return build_status(cfg, states, head, now), build_status(cfg, p.states, p.seq, now), p


def test_status_at_the_head_decodes_notify_narrowly_and_answers_the_same(tmp_path):
    db = str(tmp_path / "e.db")
    history(db)
    full, lean, p = docs(db)
    assert lean == full
    assert full["notify"]["last_sent"] and full["notify"]["silences"] == 1   # the view had something to show
    assert set(p.states) == set(STATUS_READS) and p.viewed == {"notify"}
    with pytest.raises(RuntimeError, match="reader's view"):
        p.catch_up(EventLog(db, create=False, readonly=True))


def test_status_tables_and_summary_read_notify_narrowly(tmp_path):
    """`status` on a pipe or a terminal and `summary` load TABLE_READS with notify's narrow view
    (how each open condition was handled): the same text as from every projection's whole state."""
    from watcher.cli import render
    from watcher.cli.status import summary_groups

    db = str(tmp_path / "e.db")
    history(db)
    cfg, now = Config(), T0 + 3600
    states, head = whole(db)
    _, lean, lhead, _ = load_states(None, db, TABLE_READS, {"notify": notify_health_view()})
    assert set(lean["notify"]) == {"last", "retry", "silences", "conds"} and lhead == head
    assert "silenced" in render.status_plain(build_status(cfg, lean, head, now))   # a2's silence, as handled
    assert (render.status_plain(build_status(cfg, lean, head, now))
            == render.status_plain(build_status(cfg, states, head, now)))
    assert summary_groups(cfg, lean, now) == summary_groups(cfg, states, now)


def test_status_past_the_snapshot_folds_the_whole_state(tmp_path):
    """Events after the snapshot: no view (a fold needs the whole notify state), caught up."""
    db = str(tmp_path / "e.db")
    history(db)
    elog = EventLog(db, durability="normal")
    elog.append([NoticeSent(notice="n3", covers=[1], severity="info")], T0 + 90)
    elog.close()
    full, lean, p = docs(db)
    assert lean == full and p.viewed == frozenset() and p.seq == 7
    assert set(p.states) == set(STATUS_READS)


def test_status_on_a_notify_snapshot_of_another_layout_replays(tmp_path):
    """A notify snapshot missing a key fails the view as it fails the whole decode: replayed."""
    db = str(tmp_path / "e.db")
    history(db)
    states, head = whole(db)
    old = dict(states["notify"])
    del old["index"]
    elog = EventLog(db, durability="normal")
    elog.put_snapshots(head, {**{n: encode_state(s) for n, s in states.items()}, "notify": encode_state(old)})
    elog.close()
    with pytest.raises(msgspec.ValidationError):
        notify_health_view()(encode_state(old))
    full, lean, p = docs(db)
    assert lean == full and p.viewed == frozenset() and p.seq == head


def test_status_and_summary_load_only_what_they_show(tmp_path):
    db = str(tmp_path / "e.db")
    history(db)
    _, states, head, note = load_states(None, db, TABLE_READS)
    assert set(states) == set(TABLE_READS) and head == 6 and note is None
    _, states, _, note = load_states(None, str(tmp_path / "none.db"), STATUS_READS)
    assert set(states) == set(STATUS_READS) and note


def test_snapshots_reads_only_the_names_asked(tmp_path):
    db = str(tmp_path / "e.db")
    history(db)
    elog = EventLog(db, create=False, readonly=True)
    try:
        assert set(elog.snapshots(["fleet", "notify", "no-such"])) == {"fleet", "notify"}
        assert elog.snapshots([]) == {}
        assert set(elog.snapshots()) >= set(STATUS_READS)
    finally:
        elog.close()


def modules(args: list[str], env: dict) -> set[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return set(eval(r.stderr.strip().splitlines()[-1]))  # noqa: S307 - our own probe's repr of a list


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["summary"], ["tail", "-n", "5"],
                                  ["tail", "-n", "5", "--json"], ["verify"], ["export"]])
def test_fast_path_imports_only_what_its_answer_needs(tmp_path, args):
    db = str(tmp_path / "e.db")
    history(db)
    env = dict(os.environ, FLEETWATCH_DB=db)
    got = modules(args, env)
    assert "msgspec" in got and "watcher.cli.fast" in got   # it did run the fast path
    assert sorted(m for m in got if m.split(".")[0] in NEVER) == []
    if args[0] == "tail":
        assert not any(m.startswith("projections.") and m not in (
            "projections.present", "projections.present.render", "projections.text", "projections.classes")
            for m in got), sorted(got)   # (projections.present: the room's __init__, its contract only)
    if args in (["status"], ["summary"]):   # the folds their tables do not show are not even imported
        assert not got & {"projections.report.fold", "projections.fleet.fanout"}, sorted(got)   # (notify: how handled)
    if args[0] in ("status", "summary"):    # nor the event line renderer (`tail`'s)
        assert "projections.present.render" not in got


def test_a_config_file_is_parsed_only_when_there_is_one(tmp_path):
    db = str(tmp_path / "e.db")
    history(db)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[swarm]\nmax_concurrent = 3\n')
    got = modules(["status", "--config", str(cfg)], dict(os.environ, FLEETWATCH_DB=db))
    assert "tomllib" in got and "typing_extensions" not in got


def test_no_module_of_ours_uses_typing_extensions():
    """msgspec is imported without typing_extensions on the fast path (watcher/cli/fast.py): that
    is only the same as with it while no Struct or TypedDict of ours uses its own forms."""
    root = str(ROOT)
    for pkg in ("events", "projections", "watcher"):
        for d, _, files in os.walk(os.path.join(root, pkg)):
            for f in files:
                if f.endswith(".py"):
                    with open(os.path.join(d, f), encoding="utf-8") as fh:
                        assert "typing_extensions" not in fh.read() or f == "fast.py", os.path.join(d, f)


@pytest.mark.parametrize("args", [["status"], ["tail", "-n", "1"], ["tail", "-h"]])
def test_fast_path_leaves_the_gc_on_for_what_runs_after_it(tmp_path, args):
    """The GC is off only while the fast path imports and while status/summary answer: a command
    that runs long (`tail -f`) or hands over to typer has it as usual."""
    db = str(tmp_path / "e.db")
    history(db)
    code = ("import gc, sys; from watcher.cli import fast\n"
            "rc = fast.main(sys.argv[1:])\n"
            "print(gc.isenabled(), rc, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=dict(os.environ, FLEETWATCH_DB=db))
    assert r.stderr.strip().splitlines()[-1] == ("True None" if "-h" in args else "True 0"), r.stderr


def test_a_readers_one_connection_still_refuses_foreign_and_newer_files(tmp_path):
    """A read-only EventLog classifies the file through its own read-only connection (no probe
    connection first: one open less for every reading command): another application's database
    and a newer schema are still refused, the file's bytes untouched (nothing is left beside the
    foreign one; a WAL file's read-only connection leaves its -wal/-shm, as it did before)."""
    import apsw

    from events.schema import SCHEMA_VERSION, SchemaError

    foreign = tmp_path / "foreign.db"
    c = apsw.Connection(str(foreign))
    c.execute("CREATE TABLE t(x)")
    c.close()
    newer = tmp_path / "newer.db"
    history(str(newer))
    c = apsw.Connection(str(newer))
    c.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    c.close()
    before = {p: p.read_bytes() for p in (foreign, newer)}
    for path, why in ((foreign, "another application"), (newer, "newer than this fleetwatch")):
        with pytest.raises(SchemaError, match=why):
            EventLog(str(path), create=False, readonly=True)
    assert {p: p.read_bytes() for p in (foreign, newer)} == before
    assert not [n for n in os.listdir(tmp_path) if n.startswith("foreign.db") and n != "foreign.db"]


# source text compiled by the process, but collections.namedtuple's own eval of its __new__ and
# msgspec's one import-time probe of typing.ForwardRef (msgspec._utils: ForwardRef("Foo", is_class=True))
COMPILES = ("import sys\nn = []\n"
            "sys.addaudithook(lambda e, a: n.append(a[1]) if e == 'compile' and a[1] == '<string>'\n"
            "                 and not (isinstance(a[0], bytes) and a[0].startswith(b'lambda _cls')) and a[0] not in ('Foo', b'Foo') else None)\n"
            + PROBE.replace("print(sorted(sys.modules), file=sys.stderr)", "print(len(n), file=sys.stderr)"))


@pytest.mark.parametrize("args", [["status"], ["summary"], ["tail", "-n", "5"]])
def test_fast_path_compiles_no_source_text(tmp_path, args):
    """Regression: `status` compiled 42 annotation strings at start (typing.NamedTuple turns each
    string field annotation into a ForwardRef, which compiles it; the first compile() of a process
    also builds CPython's AST types: ~12 M instructions, ~4 % of its start). A fast path compiles
    no source text (imports of modules without bytecode are not counted: their filename is a path;
    nor collections.namedtuple's eval of each tuple's ``__new__``, which builds no AST types)."""
    db = str(tmp_path / "e.db")
    history(db)
    r = subprocess.run([sys.executable, "-c", COMPILES, *args], capture_output=True, text=True,
                       env=dict(os.environ, FLEETWATCH_DB=db), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "0"
