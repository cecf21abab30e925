"""The hub fed hostile messages on a real nats-server: rows whose chain is forged or broken."""
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace as NS

import pytest

from events.log import EventLog
from tests.support.natsserver import MISSING, binary
from tests.support.hubkit import T0, HubThread, classified, fwd_cfg, hub_cfg, hub_rows, until
from watcher.hub import store, wire
from watcher.hub.forwarder import Forwarder, ensure_stream

pytestmark = pytest.mark.skipif(binary() is None, reason=MISSING)


def _publish(url: str, msgs: list[tuple[str, dict, bytes]]) -> None:
    import nats

    async def go():
        nc = await nats.connect(url)
        js = nc.jetstream()
        await ensure_stream(js, "FLEETWATCH")
        for subj, hdrs, data in msgs:
            await js.publish(subj, data, headers=hdrs)
        await nc.close()

    asyncio.run(go())


def _forged(host: str, chain: str, seq: int, id_: str, data: bytes, hash_: bytes) -> tuple[str, dict, bytes]:
    rec = NS(seq=seq, id=id_, time="2027-01-15T08:00:00.000Z", type="agent.classified", subject="agent:a1",
             version=1, hash=hash_, data=data)
    return wire.subject(host, rec.type), wire.headers(host, chain, rec), data


def _agents(db: str) -> dict:
    from watcher.runtime.state import Projections

    lg = EventLog(db, durability="normal")
    try:
        return Projections.load(lg)["fleet"]["agents"]
    finally:
        lg.close()


def _verify_ok(db: str) -> None:
    lg = EventLog(db, durability="normal")
    try:
        _, lines, ok = store.host_report(lg.db)
    finally:
        lg.close()
    assert ok, lines


def test_forged_rows_are_refused_before_the_hub_folds_them(tmp_path, nats_server):
    """A message for vm1 with a new event id at a seq the hub already holds, and a row at the
    next seq whose hash does not follow vm1's chain, are both refused (termed, counted) before
    the hub folds them: vm1/a1 keeps its class, `verify` stays right, and the genuine next row
    lands."""
    host = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    host.append([classified("a1", "RECLAMA"), classified("a2", "RECLAMA")], T0)
    chain = store.chain_id(host.db)
    fw = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "vm1.db")).start()
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
    try:
        until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm1/")) >= 2,
              what="the genuine rows at the hub")
        lie = classified("a1", "DICE_TERMINADO", "RECLAMA")
        from events.types import encode_data

        data = encode_data(lie)
        _publish(nats_server.url, [
            _forged("vm1", chain, 1, "forged-at-a-held-seq", data, b"\x11" * 32),   # seq 1 is held
            _forged("vm1", chain, 3, "forged-next", data, b"\x22" * 32),            # does not link
        ])
        until(lambda: hub.hub.stats["received"] >= 4, what="the forged rows at the hub")
        host.append([classified("a2", "TRABAJANDO", "RECLAMA")], T0 + 1)          # the genuine seq 3
        until(lambda: _agents(str(tmp_path / "hub.db")).get("vm1/a2", {}).get("class") == "TRABAJANDO",
              what="the genuine seq 3")
    finally:
        fw.stop(2.0)
        hub.close()
        host.close()
    rows = hub_rows(str(tmp_path / "hub.db"))
    assert _agents(str(tmp_path / "hub.db"))["vm1/a1"]["class"] == "RECLAMA"
    assert not any("forged" in i for i in rows), sorted(rows)
    assert hub.hub.stats["rejected"] == 2
    _verify_ok(str(tmp_path / "hub.db"))


def test_a_row_whose_hash_does_not_follow_is_refused_in_the_same_batch(tmp_path):
    """The link is checked against rows of the same batch too (not yet stored)."""
    from watcher.hub.hub import Hub

    host = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    host.append([classified(f"a{i}", "RECLAMA") for i in range(3)], T0)
    chain = store.chain_id(host.db)
    recs = list(host.read(0))
    msgs = [(wire.subject("vm1", r.type), wire.headers("vm1", chain, r), r.data) for r in recs]
    bad = NS(**{f: getattr(recs[2], f) for f in ("seq", "id", "time", "type", "subject", "version", "hash")},
             data=recs[2].data)
    msgs[2] = (msgs[2][0], wire.headers("vm1", chain, bad), recs[2].data.replace(b"RECLAMA", b"CERRADO"))
    cfg = hub_cfg(tmp_path, "nats://127.0.0.1:1")
    elog = EventLog(str(tmp_path / "hub.db"), durability="normal")
    try:
        h = Hub(cfg, elog)
        origins, rejected = h.accept(msgs, 0.0, time.time())
        assert [o.seq for o in origins] == [1, 2] and rejected == [2]
    finally:
        elog.close()
        host.close()


def test_two_machines_with_one_host_name_are_named_not_merged_silently(tmp_path, nats_server, caplog):
    """Two machines forwarding under one host name (vm1) are two chains interleaving at the hub:
    the hub says so (an error in its log, counted) rather than silently merging their a1 into one
    vm1/a1."""
    a = EventLog(str(tmp_path / "A.db"), durability="normal")
    b = EventLog(str(tmp_path / "B.db"), durability="normal")
    a.append([classified("a1", "RECLAMA")], T0)
    fa = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "A.db")).start()
    until(lambda: fa.stats["position"] == 1, what="A forwarded")
    b.append([classified("a1", "TRABAJANDO")], T0 + 1)
    fb = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "B.db")).start()
    until(lambda: fb.stats["position"] == 1, what="B forwarded")
    a.append([classified("a2", "RECLAMA")], T0 + 2)
    until(lambda: fa.stats["position"] == 2, what="A forwarded again")
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
    try:
        until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm1/")) >= 3, what="3 rows")
        until(lambda: hub.hub.stats["shared_name"] >= 1, 5, what="the shared name noticed")
    finally:
        fa.stop(2.0)
        fb.stop(2.0)
        hub.close()
        a.close()
        b.close()
    assert any("two machines forward as vm1" in r.getMessage() for r in caplog.records)


def test_a_recreated_host_log_is_not_a_shared_name(tmp_path):
    """The old chain stops when the log is recreated: no alarm; it speaking again is one."""
    from watcher.hub.hub import Hub

    logs = []
    for name in ("old", "new"):
        lg = EventLog(str(tmp_path / f"{name}.db"), durability="normal")
        lg.append([classified("a1", "RECLAMA"), classified("a2", "RECLAMA")], T0)
        logs.append(lg)
    msgs = {}
    for name, lg in zip(("old", "new"), logs):
        chain = store.chain_id(lg.db)
        msgs[name] = [(wire.subject("vm1", r.type), wire.headers("vm1", chain, r), r.data) for r in lg.read(0)]
    elog = EventLog(str(tmp_path / "hub.db"), durability="normal")
    try:
        h = Hub(hub_cfg(tmp_path, "nats://127.0.0.1:1"), elog)
        h.commit(h.accept(msgs["old"][:1] + msgs["new"], 0.0, T0)[0], T0)
        assert h.stats["shared_name"] == 0
        h.commit(h.accept(msgs["old"][1:], 0.0, T0)[0], T0)     # the old log speaks again
        assert h.stats["shared_name"] == 1
        again = Hub(hub_cfg(tmp_path, "nats://127.0.0.1:1"), elog)   # a restarted hub knows the order
        again.accept(msgs["new"][:1], 0.0, T0)                        # a redelivered row: no alarm
        assert again.stats["shared_name"] == 0
    finally:
        elog.close()
        for lg in logs:
            lg.close()


def test_a_deeply_nested_payload_does_not_stop_the_hub(tmp_path, nats_server):
    """A row whose payload nests objects 1,000 deep (6 KB; a seq after a gap, so no chain link to
    check) is kept as a host.event, and every host's rows after it still reach the hub: a
    decoder's RecursionError never stops the hub consuming."""
    deep = b'{"agent":"a",' + b'"x":{' * 1000 + b"}" * 1000 + b"}"
    _publish(nats_server.url, [_forged("vm9", "ab" * 8, 5, "deep", deep, b"\x33" * 32)])
    host = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    host.append([classified("a1", "RECLAMA")], T0)
    fw = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "vm1.db")).start()
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
    try:
        until(lambda: any(i.startswith("vm1/") for i in hub_rows(str(tmp_path / "hub.db"))), 20,
              what="the genuine row after the nested one")
    finally:
        fw.stop(2.0)
        hub.close()
        host.close()
    assert _agents(str(tmp_path / "hub.db"))["vm1/a1"]["class"] == "RECLAMA"


def test_a_nats_that_comes_back_without_its_store_gets_the_rows_again(tmp_path, nats_server):
    """Rows the stream acknowledged and then lost with its store (the server came back empty)
    reach the hub all the same: the forwarder sees the stream hold fewer messages than it
    acknowledged and forwards its chain again from seq 1 (ids the hub knows are no-ops), so
    verify finds no gap."""
    import shutil

    host = EventLog(str(tmp_path / "vm1.db"), durability="normal")
    host.append([classified(f"a{i}", "RECLAMA") for i in range(10)], T0)
    fw = Forwarder(fwd_cfg(nats_server.url, "vm1"), str(tmp_path / "vm1.db")).start()
    hub = None
    try:
        until(lambda: fw.stats["position"] == 10, what="10 rows acknowledged")
        nats_server.kill()
        shutil.rmtree(nats_server.root / "js")
        nats_server.start()
        host.append([classified(f"b{i}", "RECLAMA") for i in range(5)], T0 + 1)
        until(lambda: fw.stats["position"] == 15, what="the new rows forwarded")
        hub = HubThread(hub_cfg(tmp_path, nats_server.url), str(tmp_path / "hub.db"))
        until(lambda: sum(1 for i in hub_rows(str(tmp_path / "hub.db")) if i.startswith("vm1/")) >= 15, 20,
              what="all 15 rows at the hub")
    finally:
        fw.stop(2.0)
        if hub is not None:
            hub.close()
        host.close()
    _verify_ok(str(tmp_path / "hub.db"))
