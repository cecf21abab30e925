"""One host silencing another at the hub, and two hubs splitting one consumer (issue 47), on a real
nats-server: a rogue host with its own subject read one of vm1's messages, published on its own
subject with the message ids vm1 would use next, and JetStream (whose duplicate window is per
stream) dropped vm1's real rows as duplicates: the hub kept vm1/a1 TRABAJANDO, vm1 was never
silent and `verify` said ok. Two hubs with their own logs on the default consumer each got part of
the stream, and neither said so."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from events.log import EventLog
from tests.support.fwcli import fw
from tests.support.natsserver import MISSING, binary
from tests.support.hubkit import T0, HubThread, classified, fwd_cfg, hub_cfg, hub_rows, until
from watcher.hub import store, wire
from watcher.hub.forwarder import Forwarder, ensure_stream

pytestmark = pytest.mark.skipif(binary() is None, reason=MISSING)


def _events(db: str, type_: str) -> list[dict]:
    r = fw("tail", "--json", "-n", "100000", "--db", db)
    return [json.loads(ln)["data"] for ln in r.stdout.splitlines()
            if ln.startswith("{") and json.loads(ln)["type"] == type_]


def _agent_class(db: str, agent: str) -> str | None:
    r = fw("status", "--json", "--db", db)
    for a in json.loads(r.stdout or "{}").get("agents", []):
        if a.get("agent") == agent:
            return a.get("class")
    return None


def _poison(url: str, k: int = 30) -> dict:
    """The rogue vm2: subscribe, read one vm1 message (its chain and its per-process id prefix),
    then publish on its OWN subject the ids vm1's next ``k`` rows would carry (as the old ids were
    made, and as a guess at today's: the seq with any hash)."""
    import nats

    async def go() -> dict:
        nc = await nats.connect(url)
        js = nc.jetstream()
        await ensure_stream(js, "FLEETWATCH")
        seen: asyncio.Future = asyncio.get_running_loop().create_future()

        async def first(msg) -> None:
            if not seen.done():
                seen.set_result(dict(msg.headers or {}))

        sub = await nc.subscribe("fleetwatch.vm1.>", cb=first)
        hdrs = await asyncio.wait_for(seen, 30)
        await sub.unsubscribe()
        chain, eid, seq = hdrs[wire.H_CHAIN], hdrs[wire.H_ID], int(hdrs[wire.H_SEQ])
        prefix, n = eid[:16], int(eid[16:], 16)
        for i in range(1, k + 1):
            for mid in (f"vm1/{chain}/{prefix}{n + i:016x}", f"vm1/{chain}/{seq + i}/{'00' * 32}"):
                await js.publish("fleetwatch.vm2.agent.classified", b'{"agent": "x"}',
                                 headers={"Nats-Msg-Id": mid, wire.H_HOST: "vm2"})
        await nc.close()
        return hdrs

    return asyncio.run(go())


def test_a_host_cannot_silence_another_with_its_message_ids(tmp_path, nats_server):
    vm1 = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    vm1.append([classified(f"a{i}", "TRABAJANDO") for i in range(3)], T0)
    fwd = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "vm1.db")).start()
    hub_db = str(tmp_path / "hub.db")
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), hub_db)
    try:
        # the rogue reads one of vm1's messages as it goes by, then poisons the ids that follow
        got: dict = {}
        t = threading.Thread(target=lambda: got.update(_poison(nats_server.url)))
        t.start()
        until(lambda: t.is_alive(), what="the rogue listening")
        time.sleep(0.5)   # its subscription made (a later message is only read later)
        vm1.append([classified("a0", "RECLAMA", "TRABAJANDO")], T0 + 1)   # the message the rogue reads
        t.join(60)
        assert got, "the rogue never saw a vm1 message"
        vm1.append([classified("a1", "RECLAMA", "TRABAJANDO"), classified("a2", "RECLAMA", "TRABAJANDO")], T0 + 2)
        until(lambda: fwd.stats["position"] == 6, what="vm1 forwarded everything")
        until(lambda: sum(1 for i in hub_rows(hub_db) if i.startswith("vm1/")) == 6, timeout=60,
              what="all six vm1 rows at the hub")
        until(lambda: hub.hub.stats["refused_other"] >= 1, what="the rogue's messages refused")
    finally:
        fwd.stop(2.0)
        hub.close()
        vm1.close()
    assert fwd.stats.get("stolen", 0) == 0            # the stream dropped none of vm1's rows
    assert _agent_class(hub_db, "vm1/a1") == "RECLAMA" and _agent_class(hub_db, "vm1/a2") == "RECLAMA"
    refused = _events(hub_db, "host.refused")
    assert [(r["host"], r["names"], r["why"]) for r in refused] == [("vm2", "vm1", wire.Reject.MSG_ID.value)]
    assert not [i for i in hub_rows(hub_db) if i.startswith("vm2/")]
    r = fw("verify", "--db", hub_db)
    assert r.returncode == 0 and "host vm1 chain" in r.stdout and "ok, 6 events" in r.stdout, r.stdout + r.stderr


def _publish_rows(url: str, host_log: EventLog, host: str, skip: set[int]) -> None:
    import nats

    chain = store.chain_id(host_log.db)

    async def go() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        await ensure_stream(js, "FLEETWATCH")
        for r in host_log.read(0, decode=False):
            if r.seq not in skip:
                await js.publish(wire.subject(host, r.type), r.data, headers=wire.headers(host, chain, r))
        await nc.close()

    asyncio.run(go())


def test_a_hole_in_a_host_chain_is_said_and_fails_verify(tmp_path, nats_server):
    vm1 = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    vm1.append([classified(f"a{i}", "TRABAJANDO") for i in range(8)], T0)
    _publish_rows(nats_server.url, vm1, "vm1", skip={4, 5})
    hub_db = str(tmp_path / "hub.db")
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), hub_db)
    try:
        until(lambda: sum(1 for i in hub_rows(hub_db) if i.startswith("vm1/")) == 6, what="six rows at the hub")
        until(lambda: _events(hub_db, "host.gap"), what="the gap said")
        conds = hub.hub.w.proj["notify"]["conds"]
    finally:
        hub.close()
        vm1.close()
    assert [(g["host"], g["first"], g["last"]) for g in _events(hub_db, "host.gap")] == [("vm1", 4, 5)]
    assert any(c["cls"] == "HOST_GAP" for c in conds.values())   # what the hub's notifier pushes
    r = fw("verify", "--db", hub_db)
    assert r.returncode == 1 and "GAPS" in r.stdout and "missing 4..5" in r.stdout, r.stdout + r.stderr


def test_rows_the_stream_acknowledged_and_never_delivered_are_a_gap_at_the_tail(tmp_path, nats_server):
    """Nothing arrives after them, so no stored row is out of order: the host's heartbeat (its
    forwarder's position) against the hub's last row, once the stream is drained, says it."""
    import nats

    vm1 = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    vm1.append([classified(f"a{i}", "TRABAJANDO") for i in range(6)], T0)
    fwd = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "vm1.db")).start()
    until(lambda: fwd.stats["position"] == 6, what="vm1 forwarded")

    async def drop_tail() -> None:   # what a poisoned id did: acked to vm1, never in the stream
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        for seq in (5, 6):
            await js.delete_msg("FLEETWATCH", seq)
        await nc.close()

    asyncio.run(drop_tail())
    hub_db = str(tmp_path / "hub.db")
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), hub_db)
    try:
        until(lambda: _events(hub_db, "host.gap"), timeout=60, what="the tail gap said")
    finally:
        fwd.stop(2.0)
        hub.close()
        vm1.close()
    assert [(g["first"], g["last"]) for g in _events(hub_db, "host.gap")] == [(5, 6)]
    r = fw("verify", "--db", hub_db)
    assert r.returncode == 1 and "missing 5..6" in r.stdout, r.stdout


def test_two_hubs_never_split_one_consumer_unknowingly(tmp_path, nats_server):
    vm1 = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    vm1.append([classified(f"a{i}", "TRABAJANDO") for i in range(40)], T0)
    fwd = Forwarder(fwd_cfg(nats_server.url, "vm1", batch=7), str(tmp_path / "vm1.db")).start()
    dbs = {n: tmp_path / n for n in ("a", "b", "c", "d")}
    for d in dbs.values():
        d.mkdir()
    # by default each hub has its own consumer: both get everything
    hubs = [HubThread(hub_cfg(dbs[n], nats_server.url), str(dbs[n] / "hub.db")) for n in ("a", "b")]
    try:
        for n in ("a", "b"):
            until(lambda n=n: sum(1 for i in hub_rows(str(dbs[n] / "hub.db")) if i.startswith("vm1/")) == 40,
                  timeout=60, what=f"hub {n} has all 40")
        assert hubs[0].hub.consumer != hubs[1].hub.consumer
    finally:
        for h in hubs:
            h.close()
    # one consumer named for both: the second refuses it and says so
    first = HubThread(hub_cfg(dbs["c"], nats_server.url, consumer="shared"), str(dbs["c"] / "hub.db"))
    try:
        until(lambda: sum(1 for i in hub_rows(str(dbs["c"] / "hub.db")) if i.startswith("vm1/")) == 40,
              timeout=60, what="the first hub has all 40")
        second = HubThread(hub_cfg(dbs["d"], nats_server.url, consumer="shared"), str(dbs["d"] / "hub.db"))
        try:
            until(lambda: second.hub.stats["consumer_taken"] >= 1, what="the second hub refusing")
            for n, says in (("c", "hub: consumer shared is this hub's"), ("d", "hub: consumer shared belongs to another hub")):
                conf = dbs[n] / "hub.toml"
                conf.write_text(f'[store]\npath = "{dbs[n]}/hub.db"\n[hub]\nnats = "{nats_server.url}"\nconsumer = "shared"\n')
                out = fw("doctor", "--config", str(conf)).stdout
                assert says in out, out
            vm1.append([classified(f"a{i}", "RECLAMA", "TRABAJANDO") for i in range(40)], T0 + 1)
            until(lambda: sum(1 for i in hub_rows(str(dbs["c"] / "hub.db")) if i.startswith("vm1/")) == 80,
                  timeout=60, what="the first hub has all 80")
        finally:
            second.close()
    finally:
        first.close()
        fwd.stop(2.0)
        vm1.close()
    d_db = str(dbs["d"] / "hub.db")
    assert not [i for i in hub_rows(d_db) if i.startswith("vm1/")]
    (taken,) = _events(d_db, "hub.consumer_taken")
    assert taken["consumer"] == "shared" and taken["owner"].startswith("fleetwatch hub ")
