"""``max-total`` counted a child again each time it came back: a group of two children, one of
which dropped out of the command's output and came back twice, was "4 children ever > max_total
3". Found attacking the swarm rules from the CLI (a command source reading a file that lists
child b, then not, then again). The rule is "a group has had more than max_total *distinct*
children" (docs/readme/rules/runs.md): a group now remembers its gone children (up to 1,024),
and one that comes back is the same child. Real files, a real command source, ``fleetwatch run
--once`` processes and ``tail --json``."""
from __future__ import annotations

import json

from tests.support.fwonce import once_and_tail


def _out(path, children: list[str]) -> None:
    path.write_text(json.dumps([{"group": "g", "child": c, "status": "running"} for c in children]))


def test_a_child_that_comes_back_is_not_a_new_child_of_its_group(tmp_path):
    out = tmp_path / "out.json"
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[swarm]\nmax_total = 3\n[[sources]]\nname = "swarm"\n'
                   f'kind = "command"\nentity = "swarm"\nargv = ["cat", "{out}"]\n')
    for _ in range(3):
        _out(out, ["a", "b"])
        once_and_tail(cfg)
        _out(out, ["a"])
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    assert [e for e in evs if e["type"] == "swarm.capped"] == []
    _out(out, ["a", "c", "d"])       # a, b, c, d: four distinct children
    r, evs = once_and_tail(cfg)
    assert [(e["data"]["cap"], e["data"]["count"]) for e in evs if e["type"] == "swarm.capped"] == [("max-total", 4)]
