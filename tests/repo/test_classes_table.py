"""The agent classes are written once (projections/classes.py TABLE): classify, notify, views,
the phone page, the goal schema's text and the README's table read them from there, and no
other module of the package spells a class name out as a string."""
from __future__ import annotations

import ast
import re

from events.log import Recorded
from events.types import AgentClassified
from projections import classes
from projections.fleet import fold as fleet
from projections.fleet import machine
from projections.notify import fold as notify
from projections.notify import msg as notify_msg
from projections.present import views
from projections.classes import Cls
from projections.observations import AgentObs
from watcher.board import layout
from watcher.schema import goal_schema
from watcher.web import pages
from tests.support.exe import ROOT

PACKAGE = ("events", "projections", "watcher")


def test_no_class_name_string_literal_outside_the_table():
    found = []
    for pkg in PACKAGE:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path == ROOT / "projections" / "classes.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            found += [f"{path.relative_to(ROOT)}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and n.value in classes.NAMES]
    assert not found, "class names spelled out (take them from projections.classes):\n" + "\n".join(found)


def obs(**kw) -> AgentObs:
    base = dict(agent="a1", source="s", state="busy", phase="haciendo", contract_sha256="c" * 64, last_activity=0.0)
    return AgentObs(**{**base, **kw})


def test_classify_tries_its_rules_in_the_tables_order():
    """An observation that every rule would answer gets the class first in ``classes.MATCH``; with
    that class's reason taken away, the next one's."""
    assert set(machine.RULES) == set(Cls) == {i.cls for i in classes.TABLE}
    # ended (CERRADO), an error (MAL_LANZADO), waiting (RECLAMA) — each earlier row wins
    everything = dict(ended=True, error="bad file", state="waiting")
    want = [c for c in classes.MATCH if c in (Cls.CERRADO, Cls.MAL_LANZADO, Cls.RECLAMA)]
    got = []
    for _ in want:
        cls, _reason = fleet.classify(obs(**everything), 10_000.0, 600.0)
        got.append(cls)
        everything.pop({Cls.CERRADO: "ended", Cls.MAL_LANZADO: "error", Cls.RECLAMA: "state"}[cls])
    assert got == want
    assert fleet.classify(obs(state="idle", phase="hecho"), 10_000.0, 600.0)[0] is Cls.DICE_TERMINADO
    assert fleet.classify(obs(state="idle"), 10_000.0, 600.0)[0] is Cls.ESTANCADO
    assert fleet.classify(obs(state="idle"), 100.0, 600.0)[0] is Cls.TRABAJANDO


def test_notify_opens_a_condition_of_the_tables_severity():
    for info in classes.TABLE:
        st = notify.initial()
        rec = Recorded(1, "id1", "2027-01-15T08:00:00.000Z", "agent.classified", "agent:a1", 1,
                       AgentClassified(agent="a1", to=info.cls.value, state="busy", phase="haciendo",
                                       reason="r", source="s"), b"", b"")
        st = notify.fold(st, rec)
        sevs = [c["sev"] for c in st["conds"].values()]
        assert sevs == ([info.severity] if info.severity else []), info


def test_push_groups_attention_and_css_come_from_the_table():
    attention = [i for i in classes.TABLE if i.severity]
    assert [b[0] for b in notify_msg.BUCKETS] == [i.push_label for i in attention]
    assert [b[1][0] for b in notify_msg.BUCKETS] == [i.cls.value for i in attention]
    assert views.ATTENTION == tuple(i.cls.value for i in attention)
    for info in classes.TABLE:
        if info.web:
            assert f".{info.cls.value}{{color:{info.web}}}" in pages._CSS


def test_the_boards_glyphs_and_emphases_come_from_the_table():
    assert layout.GLYPH == {i.cls.value: i.glyph for i in classes.TABLE}
    assert len(set(layout.GLYPH.values())) == len(classes.TABLE) and all(len(g) == 1 for g in layout.GLYPH.values())
    assert {c for c, m in layout.MONO.items() if m} == set(classes.ATTENTION)   # without colour, still told apart
    assert classes.glyph_legend() in " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())


def test_readme_and_schema_tell_the_machine_as_the_table_does():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert classes.machine_markdown() in readme
    assert classes.machine_sentence() in goal_schema()["description"]
    order = re.findall(r"^\| (\w+) \(", classes.machine_markdown(), re.M)
    assert order == [i.cls.value for i in classes.MACHINE] and set(order) == classes.NAMES
