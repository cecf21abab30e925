"""The hub shows its own health (issue 45 item 8), through the real CLI over a real nats-server:
`status` at the hub says per host whether it is heard, the age of its last word, its last event's
time and the lag; with NATS down the data is marked stale since the last connected moment; the
hub's events keep their host's time (an event caught up after an outage is not dated at its
arrival); a stopped hub is said. The board's header and the phone's fleet page show the same."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from events.log import EventLog
from tests.support.fwcli import ENV, FW, fw
from tests.support.hubkit import needs_nats, until



def _goal(root, agent: str, state: str) -> None:
    d = root / agent
    d.mkdir(parents=True, exist_ok=True)
    (d / "g.tmp").write_text(json.dumps({"agent": agent, "state": state, "phase": "haciendo", "dod_contract": "c",
                                         "task": "t"}))
    os.replace(d / "g.tmp", d / "goal.json")


def _hub_status(cfg) -> dict:
    r = fw("status", "--json", "--config", str(cfg))
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout else {}


def _times(db: str, subject: str, to: str) -> list[str]:
    log = EventLog(db, create=False, readonly=True)
    try:
        return [r.time for r in log.read(types=["agent.classified"]) if r.subject == subject and r.event.to == to]
    finally:
        log.close()


@needs_nats
def test_hub_health_stale_data_and_host_time_through_an_outage(tmp_path, nats_server):
    goals = tmp_path / "goals"
    _goal(goals, "a1", "busy")
    host_cfg = tmp_path / "host.toml"
    host_cfg.write_text(f'[store]\npath = "{tmp_path}/host.db"\ndurability = "normal"\n[watch]\ninterval = "200ms"\n'
                        f'[forward]\nnats = "{nats_server.url}"\nhost = "vm1"\nheartbeat = "1s"\n'
                        f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n')
    hub_cfg = tmp_path / "hub.toml"
    hub_cfg.write_text(f'[store]\npath = "{tmp_path}/hub.db"\ndurability = "normal"\n'
                       f'[hub]\nnats = "{nats_server.url}"\nsilent_after = "30s"\nack_wait = "2s"\n')
    procs = [subprocess.Popen([*FW, cmd, "--config", str(c)], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for cmd, c in (("hub", hub_cfg), ("run", host_cfg))]
    try:
        def up():
            st = _hub_status(hub_cfg)
            hub = st.get("hub") or {}
            return hub.get("connected") and any(h["host"] == "vm1" and h["connected"] for h in hub["hosts"]) \
                and any(a["agent"] == "vm1/a1" for a in st["agents"]) and st
        st = until(up, 90, "the hub connected and vm1 heard")
        [vm1] = [h for h in st["hub"]["hosts"] if h["host"] == "vm1"]
        assert vm1["age_s"] is not None and vm1["last_event"] and vm1["lag_s"] is not None
        assert st["hub"]["stale"] is False and [a["stale"] for a in st["agents"] if a["agent"] == "vm1/a1"] == [False]
        text = fw("status", "--config", str(hub_cfg)).stdout
        assert "hub: NATS up, 1/1 hosts heard" in text and "vm1  heard" in text and "last event" in text
        # the hub's copy of an event carries the host's time
        host_t = _times(str(tmp_path / "host.db"), "agent:a1", "TRABAJANDO")
        assert host_t and _times(str(tmp_path / "hub.db"), "agent:vm1/a1", "TRABAJANDO") == host_t

        nats_server.kill()
        st = until(lambda: (s := _hub_status(hub_cfg)).get("hub", {}).get("stale") and s, 60, "stale at the hub")
        assert st["hub"]["connected"] is False and st["hub"]["stale_since"]
        assert [a["stale"] for a in st["agents"] if a["agent"] == "vm1/a1"] == [True]   # each agent marked too
        text = fw("status", "--config", str(hub_cfg)).stdout
        assert "hub: NATS DOWN for" in text and "data stale since" in text
        _goal(goals, "a1", "waiting")                      # happens on the host while the hub cannot hear
        until(lambda: _times(str(tmp_path / "host.db"), "agent:a1", "RECLAMA"), 60, "RECLAMA on the host")
        time.sleep(1.5)                                    # so that arrival and event differ by over a second
        nats_server.start()
        until(lambda: _times(str(tmp_path / "hub.db"), "agent:vm1/a1", "RECLAMA"), 90, "RECLAMA caught up at the hub")
        assert _times(str(tmp_path / "hub.db"), "agent:vm1/a1", "RECLAMA") == \
            _times(str(tmp_path / "host.db"), "agent:a1", "RECLAMA")
        until(lambda: (_hub_status(hub_cfg).get("hub") or {}).get("connected"), 60, "reconnected")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(30)
    text = fw("status", "--config", str(hub_cfg)).stdout
    assert "hub: NOT RUNNING" in text and "data stale since" in text


def test_hub_line_on_the_phone_and_the_board_header():
    """The same view in the phone's fleet page and the board's header (pure renderers)."""
    pytest.importorskip("textual")
    from events.timefmt import parse_iso
    from projections.present.hub import hub_line, hub_view
    from watcher.board.app import header
    from watcher.web.pages import fleet_page

    doc = {"written_at": "2027-01-15T08:00:00Z", "running": True, "silent_after": 60,
           "nats": {"connected": False, "since": "2027-01-15T07:57:00Z", "last_up": "2027-01-15T07:57:00Z"},
           "hosts": {"vm1": {"last_seen": "2027-01-15T07:56:59Z", "last_event": "2027-01-15T07:56:50Z",
                             "lag_s": 0.2, "silent": False}}}
    now = parse_iso("2027-01-15T08:00:01Z")
    v = hub_view(doc, now, 60)
    line = hub_line(v)
    assert line.startswith("hub: NATS DOWN for 3m") and "data stale since 2027-01-15T07:57:00" in line
    assert "0/1 hosts heard (vm1 3m ago)" in line
    page = fleet_page({"fleet": {"agents": {}, "sources": {}}}, now, "/back", hub=line, stale=True)
    assert "class='hub stale'" in page and "NATS DOWN" in page
    head = header({"agents": [], "classes": {}, "sources": [], "notify": {}, "head": 7, "hub": v}, "", 200)
    assert "hub: NATS DOWN" in head.plain and "stale" in head.plain
    from projections.present.hub import mark_stale
    from watcher.board.layout import columns, row_cells

    rows = [{"agent": "vm1/a1", "class": "RECLAMA", "age_s": 125.0, "dod_status": "pending"}]
    mark_stale(rows, v)
    cells = row_cells(rows[0], columns(120, 8), now, False)
    assert rows[0]["stale"] and "≈2m" in [c.plain for c in cells]
    # a status file the hub stopped writing is a hub not running
    assert hub_view(doc, now + 60, 60)["running"] is False


def test_one_append_keeps_each_events_own_time_and_the_chain_verifies(tmp_path):
    """``Pending.time``: a batch appended at once (one transaction) with each event's own time;
    the hub's host times: a time ahead of the hub's clock is the hub's (``host_times``)."""
    from events.records import Pending
    from events.timefmt import iso
    from events.types import AgentClassified
    from watcher.hub import wire
    from watcher.hub.health import host_times

    log = EventLog(str(tmp_path / "e.db"), durability="normal")
    try:
        seqs = log.append([Pending(AgentClassified(agent=f"a{i}", to="RECLAMA", source="f"), time=1000.0 + i)
                           for i in range(3)] + [AgentClassified(agent="b", to="RECLAMA", source="f")], 5000.0)
        got = [r.time for r in log.read()]
        assert len(seqs) == 4 and got == [iso(1000.0), iso(1001.0), iso(1002.0), iso(5000.0)]
        assert log.verify().ok
    finally:
        log.close()
    o = lambda t: wire.Origin("vm1", "00" * 8, 1, "i", t, "agent.classified", "agent:a", 1, b"{}", b"")  # noqa: E731
    assert host_times([o(iso(900.0)), o(iso(99999.0)), o("not a time")], 1000.0) == [900.0, 1000.0, 1000.0]
