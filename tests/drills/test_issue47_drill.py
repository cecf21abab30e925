"""Issue 47's drills: a rogue host poisoning the hub's stream while two hosts write, checks that kill
the watcher's process (every way a check can name it), and checks that fill the log's disk again
and again. Real nats-server, real `fleetwatch run`, a real tmpfs. Short in make test; `make drills`
(FW_DRILL_LONG=1) runs them longer: 40 rounds, 3 claims per attack, 6 fills.

Checked: every host row at the hub exactly once and the rogue refused and said; every check run
once, the watcher up throughout and one verdict per claim; on the full disk no check run twice,
every verdict appended once space returns, watcher.stopped recorded; figures printed."""
from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from pathlib import Path

import pytest

from events.log import EventLog
from tests.support.fwcli import fw
from tests.support.natsserver import MISSING, binary
from tests.support.hostile import check, goal, rows, small_fs, start, stop, verdicts, world
from tests.support.hubkit import T0, HubThread, classified, fwd_cfg, hub_cfg, hub_rows, until
from tests.support.waiting import wait_for
from watcher.hub.forwarder import Forwarder, ensure_stream

LONG = bool(os.environ.get("FW_DRILL_LONG"))
pytestmark = pytest.mark.drill


@pytest.mark.skipif(binary() is None, reason=MISSING)
def test_hub_poisoning_drill(tmp_path, nats_server):
    """vm1 and vm2 write rounds of events; vm9 (the rogue) reads every vm1/vm2 message and
    publishes the ids of the next 50 rows of each, under both id schemes, on its own subject."""
    import nats

    rounds = 40 if LONG else 8
    hosts = {h: EventLog(str(tmp_path / f"{h}.db"), durability="normal") for h in ("vm1", "vm2")}
    for lg in hosts.values():
        lg.append([classified(f"a{i}", "TRABAJANDO") for i in range(20)], T0)
    fwds = {h: Forwarder(fwd_cfg(nats_server.url, h, batch=13), str(tmp_path / f"{h}.db")).start() for h in hosts}
    hub_db = str(tmp_path / "hub.db")
    hub = HubThread(hub_cfg(tmp_path, nats_server.url), hub_db)
    stop_rogue = threading.Event()
    sent = [0]

    def rogue() -> None:
        async def go() -> None:
            nc = await nats.connect(nats_server.url)
            js = nc.jetstream()
            await ensure_stream(js, "FLEETWATCH")
            queue: asyncio.Queue = asyncio.Queue()

            async def seen(msg) -> None:
                await queue.put(dict(msg.headers or {}))

            await nc.subscribe("fleetwatch.vm1.>", cb=seen)
            await nc.subscribe("fleetwatch.vm2.>", cb=seen)
            while not stop_rogue.is_set():
                try:
                    h = await asyncio.wait_for(queue.get(), 0.2)
                except asyncio.TimeoutError:
                    continue
                host, chain, eid, seq = h["Fw-Host"], h["Fw-Chain"], h["Fw-Id"], int(h["Fw-Seq"])
                for k in range(1, 51):
                    for mid in (f"{host}/{chain}/{eid[:16]}{int(eid[16:], 16) + k:016x}",
                                f"{host}/{chain}/{seq + k}/{random.randbytes(32).hex()}"):
                        await js.publish("fleetwatch.vm9.agent.classified", b"{}", headers={"Nats-Msg-Id": mid})
                        sent[0] += 1
            await nc.close()

        asyncio.run(go())

    t = threading.Thread(target=rogue, daemon=True)
    t.start()
    try:
        time.sleep(0.5)
        for r in range(rounds):
            for lg in hosts.values():
                lg.append([classified(f"a{i}", ("RECLAMA", "TRABAJANDO")[r % 2], ("TRABAJANDO", "RECLAMA")[r % 2])
                           for i in range(20)], T0 + r + 1)
            time.sleep(0.1)
        total = 20 * (rounds + 1)
        until(lambda: all(f.stats["position"] == total for f in fwds.values()), timeout=120, what="forwarded")
        until(lambda: sum(1 for i in hub_rows(hub_db) if i.startswith(("vm1/", "vm2/"))) == 2 * total,
              timeout=120, what="every host row at the hub")
    finally:
        stop_rogue.set()
        t.join(10)
        for f in fwds.values():
            f.stop(2.0)
        hub.close()
        for lg in hosts.values():
            lg.close()
    ids = hub_rows(hub_db)
    assert all(n == 1 for n in ids.values()) and not [i for i in ids if i.startswith("vm9/")]
    assert all(f.stats.get("stolen", 0) == 0 for f in fwds.values())
    r = fw("verify", "--db", hub_db)
    assert r.returncode == 0, r.stdout + r.stderr
    refused = [json.loads(ln)["data"] for ln in fw("tail", "--json", "-n", "100000", "--db", hub_db).stdout.splitlines()
               if '"host.refused"' in ln]
    assert refused and all(x["host"] == "vm9" for x in refused)
    print(f"\nhub poisoning drill: {2 * total} host rows, {sent[0]} poisoned ids published, all rows at the hub once")


ATTACKS = ["kill -15 $PPID", "kill -9 $PPID", "kill -9 -1", "kill -15 -1", "pkill -9 -f fleetwatch",
           "kill -STOP $PPID", "kill -9 $(pgrep -f 'watcher.entry|fleetwatch run')"]


def test_parent_killing_checks_drill(tmp_path):
    """Every attack as a check, plus an agent's own Makefile behind ["make", "test"]; several
    claims each; the watcher runs on and every claim gets exactly one verdict, its check run once."""
    claims = 3 if LONG else 1
    db = str(tmp_path / "e.db")
    fleet, cfg = world(tmp_path, db)
    runs = tmp_path / "runs"
    runs.mkdir()
    agents = {f"k{i}": check(["sh", "-c", f"echo x >> {runs}/k{i}; {a}; exit 0"]) for i, a in enumerate(ATTACKS)}
    mk = fleet / "mk"
    mk.mkdir(parents=True)
    (mk / "Makefile").write_text(f"test:\n\techo x >> {runs}/mk; kill -9 $$PPID; kill -15 -1; true\n")
    agents["mk"] = check(["make", "test"])
    for a, c in agents.items():
        goal(fleet, a, [c], claim=False)
    p = start(cfg)
    t0 = time.monotonic()
    try:
        wait_for(lambda: len(rows(db, ("agent.classified",))) >= len(agents), timeout=60)
        for n in range(claims):
            for a, c in agents.items():
                goal(fleet, a, [c])
            wait_for(lambda n=n: len(verdicts(db)) == len(agents) * (n + 1), timeout=120)
            assert p.poll() is None, "a check stopped the watcher"
            for a, c in agents.items():   # back to work: the next claim is a new one
                goal(fleet, a, [c], claim=False)
            wait_for(lambda n=n: sum(1 for r in rows(db, ("agent.classified",)) if r["data"]["to"] == "TRABAJANDO")
                     >= len(agents) * (n + 2), timeout=60)
    finally:
        assert stop(p) == 0
    counts = {a: len((runs / a).read_text().splitlines()) for a in agents}
    assert counts == dict.fromkeys(agents, claims), counts
    assert len(verdicts(db)) == len(agents) * claims
    print(f"\nparent-killing drill: {len(agents)} attacks x {claims} claims, the watcher up for "
          f"{time.monotonic() - t0:.1f}s, each check run once")


def test_disk_filling_checks_drill(tmp_path):
    """Agents whose checks fill the log's 6 MiB disk; the filler is removed after a while, then
    the next claim fills it again (cycles); nothing is checked twice, nothing decided is lost."""
    cycles = 6 if LONG else 2
    with small_fs("6m") as disk:
        if disk is None:
            pytest.skip("needs root to mount a small tmpfs (the log's disk, filled for real)")
        d = Path(disk)
        db = str(d / "e.db")
        _, cfg = world(tmp_path, db)
        cfg.write_text(cfg.read_text().replace(str(tmp_path / "fleet"), str(d / "fleet")))
        runs = tmp_path / "runs"
        runs.mkdir()

        def filler(a: str) -> dict:
            return check(["sh", "-c", f"echo x >> {runs}/{a}; head -c 100000000 /dev/zero > big; exit 1"])

        agents = [f"f{i}" for i in range(3)]
        for a in agents:
            goal(d / "fleet", a, [filler(a)], claim=False)
        p = start(cfg)
        try:
            wait_for(lambda: len(rows(db, ("agent.classified",))) >= len(agents), timeout=60)
            for c in range(cycles):
                a = agents[c % len(agents)]
                goal(d / "fleet", a, [filler(a)])
                wait_for(lambda a=a: (d / "fleet" / a / "big").exists(), timeout=60)
                time.sleep(2)                       # ticks on the full disk
                os.unlink(d / "fleet" / a / "big")  # space again
                wait_for(lambda c=c: len(verdicts(db)) == c + 1, timeout=60)
                goal(d / "fleet", a, [filler(a)], claim=False)
                assert p.poll() is None
        finally:
            assert stop(p) == 0
        counts = {a: len((runs / a).read_text().splitlines()) if (runs / a).exists() else 0 for a in agents}
        assert sum(counts.values()) == cycles and len(verdicts(db)) == cycles, counts
        assert rows(db)[-1]["type"] == "watcher.stopped"
        print(f"\ndisk-filling drill: {cycles} fills of the log's disk, {sum(counts.values())} check runs, "
              f"{len(verdicts(db))} verdicts")
