"""Every projection module declares what the runtime reads of it (projections.base.Projection:
NAME, TYPES, TIME, READS_ID, STATE_TYPE, initial, fold), so the runtime reads them without
probing (watcher/runtime/state.py); mypy checks the modules against the Protocol, this checks
the values at run time."""
from __future__ import annotations

from collections.abc import Collection

from projections.base import ORDER, Projection, decode_state, encode_state, registry
from watcher.runtime.state import Projections

MEMBERS = [n for n in vars(Projection) if not n.startswith("_")]


def test_the_protocol_names_what_the_runtime_reads():
    assert sorted(MEMBERS) == ["NAME", "READS_ID", "STATE_TYPE", "TIME", "TYPES", "fold", "initial"]


def test_every_projection_declares_every_member():
    for name, m in registry().items():
        missing = [k for k in MEMBERS if not hasattr(m, k)]
        assert not missing, (name, missing)
        assert m.NAME == name and callable(m.fold) and callable(m.initial)
        assert m.TYPES is None or (isinstance(m.TYPES, Collection) and all(isinstance(t, str) for t in m.TYPES))
        assert m.TIME is None or m.TIME("2026-12-01T10:00:00.000Z") == 1_796_119_200.0
        assert isinstance(m.READS_ID, bool)
        st = m.initial()
        assert encode_state(decode_state(m, encode_state(st))) == encode_state(st)


def test_the_runtime_reads_the_declared_members():
    p = Projections(registry())
    assert list(p.mods) == list(ORDER)
    assert p.reads_id == any(m.READS_ID for m in registry().values()) and registry(("runs",))["runs"].READS_ID
