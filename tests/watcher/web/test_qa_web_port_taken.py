"""`fleetwatch run` whose `[web] listen` port is taken keeps watching without the page, and says
why in one line naming the address (run.py's contract for [web]). Real `fleetwatch run`, a real
socket holding the port.

Found: werkzeug answers a failed bind with a message on stderr and `sys.exit(1)`, so the watcher
exited 1 ("Port N is in use by another program...") — the fleet unwatched, and restarted in a loop
by the unit — instead of the typed error the watcher logs before running on."""
from __future__ import annotations

import socket

from tests.support.fleet import Watcher, config, events, goal
from tests.support.waiting import wait_for


def test_a_taken_web_port_leaves_the_watcher_running_and_says_so(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    goal(tmp_path / "goals", "a1", state="busy", task="t")
    cfg = config(tmp_path, web_port=port)
    w = Watcher(cfg)
    try:
        wait_for(lambda: events(cfg, "agent.classified"), timeout=60)
        goal(tmp_path / "goals", "a1", state="waiting", task="t")        # still ticking after the web start
        wait_for(lambda: any(e["data"]["to"] == "RECLAMA" for e in events(cfg, "agent.classified")), timeout=60)
        assert w.p.poll() is None, (cfg.parent / "run.log").read_text()
    finally:
        w.stop()
        holder.close()
    out = (cfg.parent / "run.log").read_text()
    assert f"web: not started: cannot listen on 127.0.0.1:{port}" in out, out
    assert "is in use by another program" not in out
