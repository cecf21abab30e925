"""A cap's episode ended halfway through a handover, so the cap was reported again one tick later.
Found attacking the missions rules from the CLI: mission m with a and b RUNNING (cap 1) gave one
children-active-cap; then, in one poll, a went DONE and c RUNNING: the fold took a's change first
(1 active: "the episode is over"), then c's (2 again), and the next tick reported a second
children-active-cap (an urgent push) for an episode that never ended. Swarm caps (max-concurrent)
the same. A tick's changes that leave the active states are now folded after the others, so an
episode ends only when the tick's count is back at the cap. Real databases and files, real
``fleetwatch run --once`` processes and ``tail --json``."""
from __future__ import annotations

import json
import sqlite3

from tests.support.fwonce import once_and_tail, sqlite_config


def test_a_handover_in_one_poll_does_not_end_the_active_cap_episode(tmp_path):
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE wps (mission TEXT, wp TEXT, state TEXT)")
    c.executemany("INSERT INTO wps VALUES ('m', ?, 'RUNNING')", [("a",), ("b",)])
    c.commit()
    cfg = sqlite_config(tmp_path, db, "SELECT mission, wp, state FROM wps")
    cfg.write_text("[missions]\nmax_children_active = 1\n" + cfg.read_text())
    once_and_tail(cfg)
    c.execute("UPDATE wps SET state = 'DONE' WHERE wp = 'a'")
    c.execute("INSERT INTO wps VALUES ('m', 'c', 'RUNNING')")
    c.commit()
    for _ in range(2):
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    assert [e["data"]["wp"] for e in evs if e["data"].get("rule") == "children-active-cap"] == ["b"]
    c.execute("UPDATE wps SET state = 'DONE' WHERE wp = 'b'")      # the episode ends: 1 active
    c.commit()
    once_and_tail(cfg)
    c.execute("UPDATE wps SET state = 'RUNNING' WHERE wp = 'b'")   # a new one
    c.commit()
    c.close()
    r, evs = once_and_tail(cfg)
    assert [e["data"]["wp"] for e in evs if e["data"].get("rule") == "children-active-cap"] == ["b", "b"]


def test_a_handover_in_one_poll_does_not_end_a_swarm_cap_episode(tmp_path):
    out = tmp_path / "out.json"
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[swarm]\nmax_concurrent = 1\n[[sources]]\nname = "swarm"\n'
                   f'kind = "command"\nentity = "swarm"\nargv = ["cat", "{out}"]\n')

    def children(**status: str) -> None:
        out.write_text(json.dumps([{"group": "g", "child": k, "status": v} for k, v in status.items()]))

    children(a="running", b="running")
    once_and_tail(cfg)
    children(a="done", b="running", c="running")
    for _ in range(2):
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    assert [e["data"]["cap"] for e in evs if e["type"] == "swarm.capped"] == ["max-concurrent"]


def test_wps_deleted_end_the_active_cap_episode_so_the_next_breach_is_reported(tmp_path):
    """A WP gone from the database (``to: null``) did not end the episode, as one going DONE did:
    a, b, c RUNNING (cap 1), then a and b deleted (1 active), then d RUNNING: no second
    children-active-cap, a breach never reported. Swarm children gone the same."""
    db = tmp_path / "missions.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE wps (mission TEXT, wp TEXT, state TEXT)")
    c.executemany("INSERT INTO wps VALUES ('m', ?, 'RUNNING')", [("a",), ("b",), ("c",)])
    c.commit()
    cfg = sqlite_config(tmp_path, db, "SELECT mission, wp, state FROM wps")
    cfg.write_text("[missions]\nmax_children_active = 1\n" + cfg.read_text())
    once_and_tail(cfg)
    c.execute("DELETE FROM wps WHERE wp IN ('a', 'b')")
    c.commit()
    once_and_tail(cfg)
    c.execute("INSERT INTO wps VALUES ('m', 'd', 'RUNNING')")
    c.commit()
    c.close()
    r, evs = once_and_tail(cfg)
    assert r.returncode == 0, r.stderr
    assert [e["data"]["count"] for e in evs if e["data"].get("rule") == "children-active-cap"] == [3, 2]


def test_swarm_children_gone_end_a_cap_episode_so_the_next_breach_is_reported(tmp_path):
    out = tmp_path / "out.json"
    cfg = tmp_path / "fw.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[swarm]\nmax_concurrent = 1\n[[sources]]\nname = "swarm"\n'
                   f'kind = "command"\nentity = "swarm"\nargv = ["cat", "{out}"]\n')
    for kids in (["a", "b", "c"], ["c"], ["c", "d"]):
        out.write_text(json.dumps([{"group": "g", "child": k, "status": "running"} for k in kids]))
        r, evs = once_and_tail(cfg)
        assert r.returncode == 0, r.stderr
    assert [e["data"]["count"] for e in evs if e["type"] == "swarm.capped"] == [3, 2]
