"""The multi-host hub: wire format (hostile messages), per-host chains at the hub, liveness on a
virtual clock, and the forwarder -> JetStream -> hub path on a real nats-server started here
(skipped with a clear message when the binary is absent). Real SQLite files, real threads."""
from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import apsw
import pytest

from events.log import EventLog, Pending
from events.types import NoticeSent, SourceFailed, WatcherStarted
from watcher.config import parse
from watcher.hub import store, wire
from watcher.hub.forwarder import Forwarder
from watcher.hub.hub import Hub, Seen, silent_changes

from tests.support.hubkit import T0, HubThread, classified, fwd_cfg, hub_cfg, hub_rows, needs_nats, until
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


def origin_of(rec, host="vm1", chain="00" * 8) -> wire.Origin:
    o = wire.parse(wire.subject(host, rec.type), wire.headers(host, chain, rec), rec.data)
    assert isinstance(o, wire.Origin), o
    return o


# ---- wire: hostile input ---------------------------------------------------------------------
def test_host_name_defaults_to_a_subject_token():
    assert wire.host_name("vm1") == "vm1"
    assert wire.host_name("", "My Box.example.com") == "My-Box"
    assert wire.host_name("", "***") == "host"
    assert wire.subject("vm1", "agent.classified") == "fleetwatch.vm1.agent.classified"
    assert wire.subject("vm1", "a b*>") == "fleetwatch.vm1.other"


def test_newline_in_agent_id_cannot_inject_headers(log):
    (seq,) = log.append([classified("a\r\nNats-Msg-Id: evil", "RECLAMA")], T0)
    rec = next(log.read(0))
    h = wire.headers("vm1", "ab" * 8, rec)
    assert all("\n" not in v and "\r" not in v for v in h.values())
    o = wire.parse(wire.subject("vm1", rec.type), h, rec.data)
    assert isinstance(o, wire.Origin) and o.subject == rec.subject and o.id == rec.id


@pytest.mark.parametrize("subj,hdrs,payload,why", [
    ("other.vm1.agent.classified", None, b"{}", wire.Reject.SUBJECT),
    ("fleetwatch.v*1.agent.classified", None, b"{}", wire.Reject.SUBJECT),
    ("fleetwatch.vm1", None, b"{}", wire.Reject.SUBJECT),
    ("fleetwatch.vm1.agent.classified", None, b"{}", wire.Reject.HEADERS),
    ("fleetwatch.vm1.agent.classified", {"Fw-Seq": "x"}, b"{}", wire.Reject.HEADERS),
])
def test_malformed_messages_are_refused_with_a_reason(subj, hdrs, payload, why):
    assert wire.parse(subj, hdrs, payload) is why


def test_forged_host_header_and_bad_fields_are_refused(log):
    log.append([classified("a1", "RECLAMA")], T0)
    rec = next(log.read(0))
    h = wire.headers("vm1", "ab" * 8, rec)
    assert wire.parse("fleetwatch.vm2.agent.classified", h, rec.data) is wire.Reject.MSG_ID  # its id names vm1
    without_id = {k: v for k, v in h.items() if k != wire.NATS_MSG_ID}
    assert wire.parse("fleetwatch.vm2.agent.classified", without_id, rec.data) is wire.Reject.HOST_MISMATCH
    for k, v in (("Fw-Hash", "zz"), ("Fw-Seq", "0"), ("Fw-Chain", "short"), ("Fw-Version", "-1")):
        assert wire.parse("fleetwatch.vm1.agent.classified", {**h, k: v}, rec.data) is wire.Reject.HEADERS
    assert wire.parse("fleetwatch.vm1.agent.classified", h, b"[1]") is wire.Reject.NOT_JSON
    assert wire.parse("fleetwatch.vm1.agent.classified", h, b"{" + b" " * wire.MAX_PAYLOAD) is wire.Reject.TOO_LARGE


def test_hub_event_prefixes_identities_and_wraps_host_local_types(log):
    log.append([classified("a7", "RECLAMA"), SourceFailed(source="fleet", error="x"),
                NoticeSent(notice="n1", covers=[1]), WatcherStarted(version="1", pid=1)], T0)
    recs = list(log.read(0))
    ev = wire.to_hub(origin_of(recs[0]))
    assert ev.agent == "vm1/a7" and ev.subject == "agent:vm1/a7" and ev.source == "vm1/fleet"
    assert wire.to_hub(origin_of(recs[1])).subject == "source:vm1/fleet"
    for r in recs[2:]:
        he = wire.to_hub(origin_of(r))
        assert he.__struct_config__.tag == "host.event" and he.kind == r.type and he.seq == r.seq
    junk = wire.Origin("vm1", "00" * 8, 9, "i", "t", "agent.classified", "s", 1, b'{"agent": 5}', b"\0" * 32)
    assert wire.to_hub(junk).__struct_config__.tag == "host.event"  # undecodable: kept, not folded


# ---- per-host chains at the hub --------------------------------------------------------------
def _hub_with_origins(tmp_path: Path, host_log: EventLog, skip: set[int] = frozenset(), alter: int | None = None):
    hub = EventLog(str(tmp_path / "hub.db"), durability="normal")
    from watcher.hub.hub import OriginLog

    olog = OriginLog(hub)
    chain = store.chain_id(host_log.db)
    origins = [origin_of(r, chain=chain) for r in host_log.read(0) if r.seq not in skip]
    if alter is not None:
        origins = [o if o.seq != alter else wire.Origin(*[getattr(o, f) for f in o.__struct_fields__][:8],
                                                        o.data.replace(b"RECLAMA", b"TRABAJANDO"), o.hash)
                   for o in origins]
    olog.stage(origins)
    olog.append([Pending(wire.to_hub(o), id=o.hub_id) for o in origins], T0)
    return hub


def test_verify_hosts_reports_gaps_per_host(tmp_path, log):
    log.append([classified(f"a{i}", "RECLAMA") for i in range(6)], T0)
    hub = _hub_with_origins(tmp_path, log, skip={1, 4, 5})
    (c,) = store.verify_hosts(hub.db)
    assert c.gaps == [[1, 1], [4, 5]] and c.bad_seq is None and c.count == 3 and not c.ok
    _, lines, ok = store.host_report(hub.db)
    assert not ok and "missing 1, 4..5" in lines[0]


def test_verify_hosts_catches_an_altered_host_row(tmp_path, log):
    log.append([classified(f"a{i}", "RECLAMA") for i in range(4)], T0)
    hub = _hub_with_origins(tmp_path, log, alter=3)
    (c,) = store.verify_hosts(hub.db)
    assert c.bad_seq == 3 and not c.gaps


def test_verify_cli_on_a_hub_log_lists_each_host(tmp_path, log, cli):
    log.append([classified("a1", "RECLAMA")], T0)
    hub = _hub_with_origins(tmp_path, log)
    hub.close()
    r = cli("verify", "--db", str(tmp_path / "hub.db"))
    assert r.exit_code == 0, r.output
    assert "host vm1 chain" in r.output and ": ok, 1 events" in r.output
    with apsw.Connection(str(tmp_path / "hub.db")) as c:
        c.execute("DELETE FROM hub_origin WHERE seq=1")
    log.append([classified("a2", "RECLAMA")], T0)
    hub = EventLog(str(tmp_path / "hub.db"), durability="normal")
    from watcher.hub.hub import OriginLog

    olog = OriginLog(hub)
    o = origin_of(list(log.read(1))[0], chain=store.chain_id(log.db))
    olog.stage([o])
    olog.append([Pending(wire.to_hub(o), id=o.hub_id)], T0)
    hub.close()
    r = cli("verify", "--db", str(tmp_path / "hub.db"))
    assert r.exit_code == 1 and "GAPS" in r.output and "missing 1" in r.output


def test_a_stale_forwarder_cannot_move_the_position_back(tmp_path):
    """Regression (CI, once in a full run: the exactly-once test found vm1's position at 57, not
    100): a forwarder stopped while NATS was away can outlive ``stop`` (still awaiting acks), and
    its last write then put its older position over its successor's. On one chain the recorded
    position only moves forward; a new chain (the log recreated) starts again."""
    db = apsw.Connection(str(tmp_path / "vm1.db"))
    db.execute(store.POSITION_DDL)
    store.write_position(db, "FLEETWATCH", "vm1", "c1", 100)   # the successor, caught up
    store.write_position(db, "FLEETWATCH", "vm1", "c1", 57)    # the stale thread, late
    assert store.read_position(db, "FLEETWATCH", "vm1") == ("c1", 100)
    store.write_position(db, "FLEETWATCH", "vm1", "c2", 3)     # a recreated log: a new chain
    assert store.read_position(db, "FLEETWATCH", "vm1") == ("c2", 3)
    store.write_position(db, "FLEETWATCH", "vm2", "c1", 5)     # another host: its own row
    assert store.read_position(db, "FLEETWATCH", "vm1") == ("c2", 3)



# ---- liveness (virtual clock) ----------------------------------------------------------------
@pytest.mark.parametrize("seen,silent,mono,want", [
    ({"a": 0.0}, set(), 299.0, []),
    ({"a": 0.0}, set(), 300.0, [("a", Seen.SILENT, 300.0)]),
    ({"a": 290.0}, {"a"}, 300.0, [("a", Seen.RESUMED, 10.0)]),
    ({"a": 0.0}, {"a"}, 900.0, []),
    ({}, {"a"}, 900.0, []),
])
def test_silent_changes(seen, silent, mono, want):
    assert silent_changes(seen, silent, mono, 300.0) == want


def test_host_silent_is_one_condition_until_it_resumes(tmp_path):
    cfg = parse(f'[store]\npath = "{tmp_path}/hub.db"\n[hub]\nsilent_after = "5m"\n')
    elog = EventLog(str(tmp_path / "hub.db"), durability="normal")
    hub = Hub(cfg, elog, mono=0.0)
    hub.seen("vm1", 0.0, T0)
    assert hub.liveness(299.0, T0 + 299) == 0
    assert hub.liveness(300.0, T0 + 300) == 1
    assert hub.liveness(400.0, T0 + 400) == 0  # a level persisting: no event
    conds = [c for c in hub.w.proj["notify"]["conds"].values() if c["cls"] == "HOST_SILENT"]
    assert len(conds) == 1 and conds[0]["cleared"] is None and conds[0]["name"] == "vm1"
    hub.seen("vm1", 500.0, T0 + 500)
    assert hub.liveness(500.0, T0 + 500) == 1
    assert conds[0]["cleared"] is not None
    types = [r.type for r in elog.read(0)]
    assert types.count("host.silent") == 1 and types.count("host.resumed") == 1
    # a restarted hub knows which hosts are silent from the log, and does not re-mark them
    hub.seen("vm1", 0.0, T0)
    hub.liveness(1000.0, T0 + 1000)
    again = Hub(cfg, elog, mono=2000.0)
    assert again.silent == {"vm1"} and again.liveness(2100.0, T0 + 2100) == 0


# ---- through a real nats-server --------------------------------------------------------------
@needs_nats
def test_forward_to_hub_exactly_once_across_a_nats_kill_and_restarts(tmp_path, nats_server):
    hosts = {}
    for h in ("vm1", "vm2"):
        hosts[h] = EventLog(str(tmp_path / f"{h}.db"), durability="normal")
        hosts[h].append([classified(f"a{i}", "RECLAMA") for i in range(50)], T0)
    fw = {h: Forwarder(fwd_cfg(nats_server.url, h, batch=7), str(tmp_path / f"{h}.db")).start() for h in hosts}
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
    until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm")) >= 100,
          what="first 100 events at the hub")
    nats_server.kill()  # acknowledged writes survive (sync_interval: always)
    for h, lg in hosts.items():
        lg.append([classified(f"a{i}", "TRABAJANDO", "RECLAMA") for i in range(50)], T0 + 1)
    fw["vm1"].stop(0.5)  # a forwarder stopped while NATS is away resumes from its position
    nats_server.start()
    fw["vm1"] = Forwarder(fwd_cfg(nats_server.url, "vm1", batch=7), str(tmp_path / "vm1.db")).start()
    until(lambda: all(f.stats["position"] == 100 for f in fw.values()), what="forwarders caught up")
    until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm")) >= 200,
          what="200 host events at the hub")
    for f in fw.values():
        f.stop(2.0)
    hub.close()
    rows = hub_rows(str(tmp_path / "hub.db"))
    assert all(n == 1 for n in rows.values())
    assert sum(1 for i in rows if i.startswith(("vm1/", "vm2/"))) == 200
    lg = EventLog(str(tmp_path / "hub.db"), durability="normal")
    chains, lines, ok = store.host_report(lg.db)
    assert ok and {c.host for c in chains} == {"vm1", "vm2"} and all(c.count == 100 for c in chains), lines
    from watcher.runtime.state import Projections

    agents = Projections.load(lg)["fleet"]["agents"]
    assert sorted(agents) == sorted(f"{h}/a{i}" for h in hosts for i in range(50))
    assert {a["class"] for a in agents.values()} == {"TRABAJANDO"}
    for h, hl in hosts.items():
        assert store.read_position(hl.db, "FLEETWATCH", h)[1] == 100


@needs_nats
def test_rejected_messages_are_termed_not_retried(tmp_path, nats_server):
    import nats

    async def junk():
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        from watcher.hub.forwarder import ensure_stream

        await ensure_stream(js, "FLEETWATCH")
        await js.publish("fleetwatch.vm9.agent.classified", b"not json", headers={"Fw-Seq": "1"})
        await js.publish("fleetwatch.vm9.agent.classified", b"{}")
        await nc.close()

    asyncio.run(junk())
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
    until(lambda: hub.hub.stats["rejected"] == 2, what="two rejects")
    hub.close()
    assert not any(i.startswith("vm9") for i in hub_rows(str(tmp_path / "hub.db")))


def test_forwarder_never_blocks_the_tick_when_nats_is_unreachable(tmp_path):
    """`run --once` with [forward] pointing at a closed port: the tick commits, the run ends,
    the events stay in the local log at position 0 (forwarded later)."""
    from tests.support.natsserver import free_port

    fleet = tmp_path / "fleet" / "a1"
    fleet.mkdir(parents=True)
    (fleet / "goal.json").write_text('{"agent": "a1", "state": "waiting", "phase": "haciendo", "dod_contract": "c"}')
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n[forward]\nnats = "nats://127.0.0.1:{free_port()}"\n'
                   f'host = "vm1"\n')
    r = subprocess.run([EXE, "run", "--once", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lg = EventLog(str(tmp_path / "e.db"), create=False)
    assert [x.type for x in lg.read(0, types=["agent.classified"])] == ["agent.classified"]
    assert store.read_position(lg.db, "FLEETWATCH", "vm1") == ("", 0)


def test_hub_command_needs_a_hub_section(tmp_path):
    cfg = tmp_path / "hub.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/hub.db"\n')
    r = subprocess.run([EXE, "hub", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "[hub]" in r.stderr
    cfg.write_text(f'[store]\npath = "{tmp_path}/hub.db"\n[hub]\nnats = "http://x"\n')
    r = subprocess.run([EXE, "hub", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "hub.nats" in r.stderr


def test_install_service_hub_writes_the_hub_unit(tmp_path, cli):
    cfg = tmp_path / "hub.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/hub.db"\n[hub]\n')
    r = cli("install-service", "--hub", "--config", str(cfg))
    assert r.exit_code == 0, r.output
    unit = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "fleetwatch-hub.service"
    text = unit.read_text()
    assert f" hub --config {cfg}" in text and "NoNewPrivileges=yes" in text and "Type=notify" in text
    assert not (unit.parent / "fleetwatch.service").exists()  # --hub writes only the hub's unit
    assert "fleetwatch-hub.service" in r.output


def test_second_hub_on_one_log_exits_3(tmp_path):
    from tests.support.natsserver import free_port

    cfg = tmp_path / "hub.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/hub.db"\n[hub]\nnats = "nats://127.0.0.1:{free_port()}"\n')
    first = subprocess.Popen([EXE, "hub", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:  # the first hub holds the log while it retries an unreachable NATS
        until(lambda: (tmp_path / "hub.db").exists(), what="the first hub's log")
        second = subprocess.run([EXE, "hub", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
        assert second.returncode == 3 and "held by pid" in second.stderr, second.stderr
    finally:
        first.terminate()  # a stop while NATS is unreachable ends the hub promptly, exit 0
        assert first.wait(30) == 0, first.stderr.read()


@needs_nats
def test_recreated_host_log_is_a_new_chain_at_the_hub(tmp_path, nats_server):
    db = tmp_path / "vm1.db"
    lg = EventLog(str(db), durability="normal")
    lg.append([classified("a1", "RECLAMA")], T0)
    lg.close()
    f = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(db)).start()
    until(lambda: f.stats["position"] == 1, what="first chain forwarded")
    f.stop(1.0)
    keep = store.read_position(apsw.Connection(str(db)), "FLEETWATCH", "vm1")
    for p in tmp_path.glob("vm1.db*"):
        p.unlink()
    lg = EventLog(str(db), durability="normal")  # the user deleted the log: a new chain from seq 1
    with lg.db:
        lg.db.execute(store.POSITION_DDL)
        store.write_position(lg.db, "FLEETWATCH", "vm1", *keep)  # as if restored from a backup
    lg.append([classified("a1", "TRABAJANDO"), classified("a2", "RECLAMA")], T0)
    lg.close()
    f = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(db)).start()
    until(lambda: f.stats["position"] == 2, what="new chain forwarded from seq 1")
    f.stop(1.0)
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
    until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm1/")) == 3, what="3 rows")
    hub.close()
    chains, lines, ok = store.host_report(EventLog(str(tmp_path / "hub.db"), create=False).db)
    assert ok and sorted(c.count for c in chains) == [1, 2], lines


@needs_nats
def test_hub_ack_does_not_cover_messages_a_killed_hub_fetched_but_never_committed(tmp_path, nats_server):
    """Regression (hub drill: 'h2 seq 269' lost). A hub killed between fetch and commit leaves
    its messages pending with the consumer until ack_wait; a restarted hub meanwhile gets the
    NEWER messages (the window max_ack_pending=batch is not full). With AckPolicy.ALL its ack of
    the newest one acknowledged the never-committed older ones too: never redelivered, lost.
    Every message is now acked by itself (AckPolicy.EXPLICIT), and a hub that finds unacked
    messages at connect recreates the consumer at its ack floor: 1..5 come back at once, in order."""
    import nats
    from nats.js.api import AckPolicy

    cfg = hub_cfg(tmp_path, nats_server.url, ack_wait="4s")
    HubThread(cfg, str(tmp_path / "hub.db")).close()  # creates the stream and the durable consumer
    host = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    host.append([classified(f"a{i}", "RECLAMA") for i in range(10)], T0)
    fw = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "vm1.db")).start()
    until(lambda: fw.stats["position"] == 10, what="10 rows in the stream")
    fw.stop(2.0)

    async def dying_hub() -> list[int]:  # fetches the first 5 under the hub's durable, then dies
        nc = await nats.connect(nats_server.url)
        psub = await nc.jetstream().pull_subscribe("fleetwatch.>", durable=cfg.hub.consumer, stream=cfg.hub.stream)
        got = await psub.fetch(5, timeout=5)
        policy = (await psub.consumer_info()).config.ack_policy
        await nc.close()
        return [int(m.headers[wire.H_SEQ]) for m in got], policy

    seqs, policy = asyncio.run(dying_hub())
    assert seqs == [1, 2, 3, 4, 5]
    hub = HubThread(cfg, str(tmp_path / "hub.db"))  # within ack_wait: the window would serve 6..10 first
    try:
        until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm1/")) == 10,
              timeout=40, what="all 10 host rows at the hub")
    finally:
        hub.close()
    assert all(n == 1 for n in hub_rows(str(tmp_path / "hub.db")).values())
    with apsw.Connection(str(tmp_path / "hub.db"), flags=apsw.SQLITE_OPEN_READONLY) as c:  # folded in order
        assert [s for (s,) in c.execute("SELECT seq FROM hub_origin ORDER BY hub_seq")] == list(range(1, 11))
    assert policy == AckPolicy.EXPLICIT
