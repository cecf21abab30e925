"""One swarm child's status stopped the swarms detector for every group. Found attacking the swarm
rows from the CLI: a command source printing a child whose ``status`` (or ``label``) is a list
nested 985 deep (the deepest its JSON decoder takes) made ``str()`` raise RecursionError: "detector
swarms failed on this tick's snapshot; skipped" at every tick, no swarm.changed for any group. A
status is now at most 64 characters of the value's text and a label 200, never a recursion. Real
files, a real command source, ``fleetwatch run --once`` and ``tail --json``."""
from __future__ import annotations

import json

from tests.support.fwonce import once_and_tail

DEEP = "[" * 985 + "]" * 985


def test_a_child_status_nested_a_thousand_deep_does_not_stop_the_swarms_detector(tmp_path):
    out = tmp_path / "out.json"
    good = json.dumps({"group": "g1", "child": "ok", "status": "running"})
    long = json.dumps({"group": "g2", "child": "long", "status": "x" * 100_000})
    out.write_text(f'[{good}, {{"group": "g2", "child": "deep", "status": {DEEP}, "label": {DEEP}}}, {long}]')
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "swarm"\nkind = "command"\n'
                   f'entity = "swarm"\nargv = ["cat", "{out}"]\n')
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert "detector swarms failed" not in r.stderr
    got = {e["data"]["child"]: e["data"] for e in evs if e["type"] == "swarm.changed"}
    assert got["ok"]["to"] == "running"
    assert got["deep"]["to"] == "[…]" and got["deep"]["label"] == "[…]"
    assert got["long"]["to"] == "x" * 64
