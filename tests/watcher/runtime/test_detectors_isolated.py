"""Every detector is isolated alike (issue 23): one that raises on a tick's snapshot is logged and
skipped for that tick, the others still report, and the next good tick classifies normally."""
from __future__ import annotations

import logging

from events.log import EventLog
from projections.observations import AgentObs, Snapshot
from tests.support.runsworld import doc, snap as runs_snap, S
from watcher.config import parse
from watcher.runtime.loop import Watcher

NOW = 1_800_000_000.0


def test_a_raising_fleet_detector_is_logged_and_the_others_still_run(tmp_path, caplog):
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n')
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    runs = runs_snap(doc("R1", {"facts": S("begin", 1)})).runs
    hostile = Snapshot(agents={"a1": "not an observation"}, runs=runs)  # type: ignore[dict-item]
    with caplog.at_level(logging.ERROR, logger="fleetwatch"):
        evs = w.detect(hostile, NOW)
    names = [type(e).__name__ for e in evs]
    assert "StepChanged" in names and "AgentClassified" not in names
    assert any("detector fleet failed" in r.getMessage() for r in caplog.records)
    good = AgentObs(agent="a1", source="fleet", state="busy", phase="haciendo", contract_sha256="c" * 64,
                    contract_len=1, last_activity=NOW)
    evs = w.detect(Snapshot(agents={"a1": good}), NOW + 1)
    assert [(e.agent, e.to) for e in evs if type(e).__name__ == "AgentClassified"] == [("a1", "TRABAJANDO")]
    elog.close()


def test_reload_refuses_a_moved_log_or_other_durability_and_rebuilds_the_rest(tmp_path):
    import pytest

    from events.errors import ConfigError
    base = f'[store]\npath = "{tmp_path}/e.db"\n'
    cfg = parse(base)
    elog = EventLog(str(tmp_path / "e.db"))
    w = Watcher(cfg, elog)
    for bad, key in ((f'[store]\npath = "{tmp_path}/other.db"\n', "store.path"),
                     (base + 'durability = "normal"\n', "store.durability")):
        with pytest.raises(ConfigError) as e:
            w.reload(parse(bad))
        assert e.value.key == key and w.cfg is cfg          # nothing changed
    (tmp_path / "fleet").mkdir()
    new = parse(base + f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n')
    w.reload(new)
    assert w.cfg is new and [s.name for s in w.sources] == ["fleet"]
    w.close()
    elog.close()
