"""File-source globs other than ``ROOT/*/NAME`` (issue 23), through Watcher.tick on real trees:
a pattern the fast layout does not take sees what the fast layout sees, deeper patterns, several
sources' globs (overlapping too), and globs that match a symlink, a folder, a FIFO, a loop."""
from __future__ import annotations

import json
import os

import pytest

from events.log import EventLog
from watcher.config import parse
from watcher.runtime.loop import Watcher
from tests.support.vclock import written_at

T0 = 1_800_000_000.0


def goal(path, agent: str, **kw) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"agent": agent, "state": "busy", "phase": "haciendo", "dod_contract": f"tests for {agent}",
           "last_activity": T0, **kw}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    written_at(tmp, doc["last_activity"])  # on the virtual clock (tests/support/vclock.py)
    os.replace(tmp, path)


def watcher(tmp_path, *globs: str) -> tuple[Watcher, EventLog]:
    text = f'[store]\npath = "{tmp_path}/e.db"\n[classify]\nbusy_silence = "30d"\n'
    for i, g in enumerate(globs):
        text += f'[[sources]]\nname = "s{i}"\nkind = "goals"\nglob = "{g}"\n'
    elog = EventLog(str(tmp_path / "e.db"))
    return Watcher(parse(text), elog), elog


def classes(w: Watcher) -> dict[str, str]:
    return {a: v["class"] for a, v in w.proj["fleet"]["agents"].items()}


def reasons(elog: EventLog) -> dict[str, str]:
    return {r.event.agent: r.event.reason for r in elog.read(0, types=["agent.classified"])}


def failed(elog: EventLog) -> list[str]:
    return [r.event.error for r in elog.read(0, types=["source.failed"])]


@pytest.mark.parametrize("pattern", ["R/*/goal.json", "R/*/goal.jso[n]", "R/?*/goal.json", "R/[ab]*/goal.json"])
def test_any_glob_shape_sees_what_the_fast_layout_sees(tmp_path, pattern):
    root = tmp_path / "R"
    for a in ("a1", "a2", "b1"):
        goal(root / a / "goal.json", a)
    goal(root / ".hidden" / "goal.json", "h")        # neither layout lists dot folders
    w, elog = watcher(tmp_path, str(tmp_path / pattern))
    w.tick(T0)
    assert classes(w) == {"a1": "TRABAJANDO", "a2": "TRABAJANDO", "b1": "TRABAJANDO"}
    goal(root / "a2" / "goal.json", "a2", state="waiting", phase="preguntando")
    w.tick(T0 + 1, full=False, changed={str(root / "a2" / "goal.json")})   # an inotify wake-up
    assert classes(w)["a2"] == "RECLAMA"
    (root / "b1" / "goal.json").unlink()
    w.tick(T0 + 2)
    w.tick(T0 + 3)                                    # second miss
    assert classes(w)["b1"] == "CERRADO" and failed(elog) == []
    w.close()
    elog.close()


def test_a_deeper_pattern_and_a_second_source(tmp_path):
    """``R/*/*/goal.json`` (teams of agents) beside ``S/*/goal.json``; one file both sources'
    globs match is one agent, not a duplicate."""
    goal(tmp_path / "R" / "team1" / "a1" / "goal.json", "a1")
    goal(tmp_path / "R" / "team2" / "a2" / "goal.json", "a2", state="waiting", phase="preguntando")
    goal(tmp_path / "R" / "top" / "goal.json", "top")           # one level: not this pattern's
    goal(tmp_path / "S" / "b1" / "goal.json", "b1")
    w, elog = watcher(tmp_path, f"{tmp_path}/R/*/*/goal.json", f"{tmp_path}/S/*/goal.json",
                      f"{tmp_path}/R/team1/*/goal.json")
    w.tick(T0)
    assert classes(w) == {"a1": "TRABAJANDO", "a2": "RECLAMA", "b1": "TRABAJANDO"}
    head = elog.head()[0]
    for k in range(1, 4):
        w.tick(T0 + k)
    assert elog.head()[0] == head                                # a level persists: nothing written
    goal(tmp_path / "R" / "team2" / "a3" / "goal.json", "a3")
    w.tick(T0 + 5, full=False, changed={str(tmp_path / "R" / "team2" / "a3" / "goal.json")})
    assert classes(w)["a3"] == "TRABAJANDO" and failed(elog) == []
    w.close()
    elog.close()


def test_double_star_reaches_every_depth(tmp_path):
    goal(tmp_path / "R" / "a1" / "goal.json", "a1")
    goal(tmp_path / "R" / "team" / "b1" / "goal.json", "b1")
    w, elog = watcher(tmp_path, f"{tmp_path}/R/**/goal.json")
    w.tick(T0)
    assert set(classes(w)) == {"a1", "b1"}
    w.close()
    elog.close()


def special_tree(tmp_path):
    """Under R/t/: a good file, a symlink to a file elsewhere, a folder, a symlink to a folder,
    a FIFO and a symlink loop, each named goal.json."""
    t = tmp_path / "R" / "t"
    goal(t / "good" / "goal.json", "good")
    goal(tmp_path / "elsewhere" / "goal.json", "linked")
    (t / "link").mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere" / "goal.json", t / "link" / "goal.json")
    (t / "dir" / "goal.json").mkdir(parents=True)
    (t / "dirlink").mkdir()
    os.symlink(tmp_path / "elsewhere", t / "dirlink" / "goal.json")
    (t / "fifo").mkdir()
    os.mkfifo(t / "fifo" / "goal.json")
    (t / "loop").mkdir()
    os.symlink(t / "loop" / "goal.json", t / "loop" / "goal.json")


@pytest.mark.parametrize("pattern", ["R/*/*/goal.json", "R/t/*/goal.json"])
def test_a_glob_matching_a_symlink_folder_fifo_or_loop(tmp_path, pattern):
    special_tree(tmp_path)
    w, elog = watcher(tmp_path, str(tmp_path / pattern))
    w.tick(T0)
    w.tick(T0 + 1)
    assert classes(w) == {"good": "TRABAJANDO", "linked": "TRABAJANDO", "dir": "MAL_LANZADO",
                          "dirlink": "MAL_LANZADO", "fifo": "MAL_LANZADO", "loop": "MAL_LANZADO"}
    why = reasons(elog)
    assert why["fifo"] == "a FIFO, not a regular file" and why["dir"] == why["dirlink"] == "a folder, not a regular file"
    assert "symbolic links" in why["loop"]
    assert failed(elog) == []                          # the FIFO never blocked the poll (no deadline hit)
    w.close()
    elog.close()


def test_a_dangling_symlink_is_classified_alike_whatever_the_glob(tmp_path):
    got = []
    for i, pattern in enumerate(("R/*/goal.json", "R/?*/goal.json")):
        base = tmp_path / str(i)
        goal(base / "R" / "a1" / "goal.json", "a1")
        w, elog = watcher(base, str(base / pattern))
        w.tick(T0)
        (base / "R" / "a1" / "goal.json").unlink()
        os.symlink(base / "nowhere", base / "R" / "a1" / "goal.json")
        for k in range(1, 4):
            w.tick(T0 + k)
        got.append(classes(w)["a1"])
        w.close()
        elog.close()
    assert got[0] == got[1]
