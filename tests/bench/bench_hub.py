"""Benchmark: forwarder -> NATS JetStream -> hub on a real local nats-server (loopback, file
storage, sync_interval: always), against a baseline measured in the same run.

1. Throughput at batch 1 and 100 (forwarder ``batch`` = hub ``batch``; best of 2): N events already in a
   host log, time until all N are committed at the hub. Baseline: ``EventLog.append`` of the same
   events into a local log at the same batch size and durability (the work one hub commit does).
2. Latency host commit -> hub commit, p50/p99: one event every 20 ms on the host; the hub's commit
   clock for the row (``Hub.health.arrived``: the hub event keeps its host's time) minus the host
   row's time (both clocks of one machine).
3. Hub CPU at 3 hosts x 1k agents: three host logs with 1,000 agents each (first sight: 3,000
   events), then 5 % of each host's agents change class every second; the hub runs as a real
   `fleetwatch hub` process and its CPU (utime + stime from /proc) is read over the steady part.
Skipped rows (ok None) when nats-server is not installed.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import apsw  # noqa: E402

from events.log import EventLog, parse_iso  # noqa: E402
from events.types import AgentClassified  # noqa: E402
from tests.support.natsserver import MISSING, NatsServer, binary  # noqa: E402
from tests.support.hubkit import HubThread, fwd_cfg, hub_cfg  # noqa: E402
from watcher.hub.forwarder import Forwarder  # noqa: E402

NOW = 1_764_443_000.0
EXE = os.path.join(os.path.dirname(sys.executable), "fleetwatch")
CLASSES = ("RECLAMA", "TRABAJANDO", "DICE_TERMINADO", "ESTANCADO")


def _row(name, figure, ratio, target, ok):
    return {"name": name, "figure": figure, "ratio": ratio, "target": target, "ok": ok}


def events(n: int, agents: int = 200, off: int = 0) -> list:
    return [AgentClassified(agent=f"a{(off + i) % agents}", from_=CLASSES[(off + i) % 4], to=CLASSES[(off + i + 1) % 4],
                            state="busy", phase="haciendo", reason="bench", source="fleet") for i in range(n)]


def hub_count(db: Path) -> int:
    try:
        with apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY) as c:
            return c.execute("SELECT count(*) FROM hub_origin").fetchall()[0][0]
    except apsw.Error:
        return 0


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def local_commit(tmp: Path, n: int, batch: int) -> float:
    """ev/s of the hub's own work without NATS: the same host rows through ``Hub.commit`` (hub
    events + origins + folds, one transaction per batch, durability normal as below)."""
    from events.chain import GENESIS, row_hash
    from events.types import encode_data, tag_of
    from watcher.hub import wire
    from watcher.hub.hub import Hub

    d = tmp / f"base-{batch}"
    d.mkdir(parents=True)
    origins, prev = [], GENESIS
    for seq, ev in enumerate(events(n), 1):
        t, data, id_ = "2025-11-29T19:03:20.000Z", encode_data(ev), f"{seq:032x}"
        prev = row_hash(prev, seq, id_, t, tag_of(ev), ev.subject, seq, data)
        origins.append(wire.Origin("base", "00" * 8, seq, id_, t, tag_of(ev), ev.subject, seq, data, prev))
    lg = EventLog(str(d / "hub.db"), durability="normal")
    hub = Hub(hub_cfg(d, "nats://127.0.0.1:1"), lg)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        hub.commit(origins[i:i + batch], NOW)
    dt = time.perf_counter() - t0
    lg.close()
    return n / dt


def throughput(tmp: Path, url: str, n: int, batch: int) -> tuple[float, float]:
    """(forwarder -> JetStream ev/s with no hub running, JetStream -> hub ev/s draining that
    backlog): each side at its own pace, ``batch`` on both."""
    d = tmp / f"tp-{batch}"
    d.mkdir(parents=True)
    host = EventLog(str(d / "h.db"), durability="normal")
    for i in range(0, n, 1000):
        host.append(events(min(1000, n - i), off=i), NOW)
    host.close()
    t0 = time.perf_counter()
    fw = Forwarder(fwd_cfg(url, f"tp{batch}", batch=batch), str(d / "h.db")).start()
    ok = wait_for(lambda: fw.stats["position"] >= n, 600)
    fwd = n / (time.perf_counter() - t0)
    fw.stop(1.0)
    assert ok, f"forwarded {fw.stats['position']} of {n}"
    hub = HubThread(hub_cfg(d, url, batch=batch, consumer=f"bench{batch}"), str(d / "hub.db"))
    wait_for(lambda: hub_count(d / "hub.db") >= 1, 60)  # timed from its first commit: not its start-up
    t0, c0 = time.perf_counter(), hub_count(d / "hub.db")
    ok = wait_for(lambda: hub_count(d / "hub.db") >= n, 600)
    dt = time.perf_counter() - t0
    hub.close()
    assert ok, f"hub got {hub_count(d / 'hub.db')} of {n}"
    return fwd, (n - c0) / max(dt, 1e-6)


def raw_publish(url: str, n: int, batch: int) -> float:
    """ev/s of the bare nats-py client publishing the same payloads ``batch`` at a time and
    awaiting the stream's acks (the forwarder's same-work baseline), on its own stream."""
    import asyncio

    import nats
    from nats.js.api import StorageType, StreamConfig

    payload = b'{"agent":"a1","from":"RECLAMA","to":"TRABAJANDO","state":"busy","phase":"haciendo"}'

    async def go() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name=f"RAW{batch}", subjects=[f"raw{batch}.>"], storage=StorageType.FILE))
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            futs = [await js.publish_async(f"raw{batch}.x", payload, headers={"Nats-Msg-Id": f"{i + j}"})
                    for j in range(min(batch, n - i))]
            await asyncio.gather(*futs)
        dt = time.perf_counter() - t0
        await nc.close()
        return n / dt

    return asyncio.run(go())


class Arrivals:
    """Stands where the hub's health file goes (``Hub.health``): the hub event's time is its host's
    (no arrival clock in the log), so the arrival of each row is taken here, at the commit's clock."""

    nc = None

    def __init__(self) -> None:
        self.lat: dict[tuple[str, int], float] = {}

    def heard(self, host: str, now: float, event_time: float | None = None) -> None:
        return None

    def round(self, silent: object, now: float) -> None:
        return None

    def arrived(self, origins: list, now: float) -> None:
        for o in origins:
            self.lat.setdefault((o.host, o.seq), now - parse_iso(o.time))


def latency(tmp: Path, url: str, n: int) -> tuple[float, float]:
    d = tmp / "lat"
    d.mkdir()
    host = EventLog(str(d / "h.db"), durability="normal")
    host.append(events(1), NOW)
    hub = HubThread(hub_cfg(d, url, batch=100, consumer="benchlat"), str(d / "hub.db"))
    seen = Arrivals()
    hub.hub.health = seen   # the hub's own hook: each row's arrival (its commit's clock) minus its host time
    fw = Forwarder(fwd_cfg(url, "lat", batch=100), str(d / "h.db")).start()
    wait_for(lambda: hub_count(d / "hub.db") >= 1, 30)
    for i in range(n):
        host.append(events(1, off=i + 1), time.time())
        time.sleep(0.02)
    wait_for(lambda: hub_count(d / "hub.db") >= n + 1, 60)
    fw.stop(1.0)
    hub.close()
    host.close()
    lat = sorted(v for (h, s), v in seen.lat.items() if h == "lat" and s > 1)
    return statistics.median(lat), lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rpartition(")")[2].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def hub_cpu(tmp: Path, url: str, agents: int, seconds: float) -> tuple[float, float, float]:
    """(hub CPU % of a core in the steady part, events/s offered, first-sight catch-up s)."""
    d = tmp / "cpu"
    d.mkdir()
    hosts = {}
    for h in ("c1", "c2", "c3"):
        hosts[h] = EventLog(str(d / f"{h}.db"), durability="normal")
        hosts[h].append([AgentClassified(agent=f"a{i}", to="TRABAJANDO", state="busy", phase="haciendo",
                                         reason="first sight", source="fleet") for i in range(agents)], time.time())
    cfg = d / "hub.toml"
    cfg.write_text(f'[store]\npath = "{d}/hub.db"\ndurability = "full"\n[hub]\nnats = "{url}"\n'
                   f'consumer = "benchcpu"\nsilent_after = "1h"\n')
    EventLog(str(d / "hub.db")).close()
    p = subprocess.Popen([EXE, "hub", "--config", str(cfg), "--log-level", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fws = [Forwarder(fwd_cfg(url, h, batch=100), str(d / f"{h}.db")).start() for h in hosts]
    t0 = time.perf_counter()
    wait_for(lambda: hub_count(d / "hub.db") >= 3 * agents, 300)
    catch_up = time.perf_counter() - t0
    per_tick = max(1, agents // 20)   # 5 % of the agents per second, one tick per second per host
    sent = 3 * agents
    c0, w0 = cpu_seconds(p.pid), time.perf_counter()
    for k in range(int(seconds)):
        tick = time.perf_counter()
        for h, lg in hosts.items():
            lg.append([AgentClassified(agent=f"a{(k * per_tick + i) % agents}", from_="TRABAJANDO", to="RECLAMA"
                                       if k % 2 == 0 else "TRABAJANDO", state="busy", phase="haciendo",
                                       reason="churn", source="fleet") for i in range(per_tick)], time.time())
            sent += per_tick
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
    wait_for(lambda: hub_count(d / "hub.db") >= sent, 60)
    c1, w1 = cpu_seconds(p.pid), time.perf_counter()
    for f in fws:
        f.stop(1.0)
    p.terminate()
    p.wait(30)
    for lg in hosts.values():
        lg.close()
    return 100.0 * (c1 - c0) / (w1 - w0), 3 * per_tick, catch_up


def run(quick: bool = False) -> list[dict]:
    if binary() is None:
        return [_row("forwarder -> JetStream -> hub", f"skipped ({MISSING})", None, "runs", None)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fw-bench-hub-") as t:
        tmp = Path(t)
        def fresh(name: str) -> NatsServer:  # one server (and stream) per phase: no old messages
            return NatsServer(tmp / f"nats-{name}").start()

        for batch, n in ((1, 200 if quick else 1000), (100, 2000 if quick else 20_000)):
            fwd = got = raw = base = 0.0
            for rep in range(2):  # best of 2 of each side (a shared machine), measured interleaved
                nats = fresh(f"tp{batch}-{rep}")
                try:
                    f, g = throughput(tmp / f"r{rep}", nats.url, n, batch)
                    fwd, got = max(fwd, f), max(got, g)
                    raw = max(raw, raw_publish(nats.url, n, batch))
                finally:
                    nats.stop()
                base = max(base, local_commit(tmp / f"r{rep}", n, batch))
            r = fwd / raw
            rows.append(_row(f"events/s forwarder->JetStream, batch {batch}",
                             f"{fwd:,.0f} ev/s (bare nats-py publish {raw:,.0f})", r, "≥ 0.5× bare publish",
                             r >= 0.5))
            r = got / base
            target = 0.04 if batch == 1 else 0.15  # two round trips per fetch; batch 1 pays them per event
            rows.append(_row(f"events/s JetStream->hub, batch {batch}",
                             f"{got:,.0f} ev/s (the same hub commits without NATS {base:,.0f})", r,
                             f"≥ {target}× its commits alone", r >= target))
        nats = fresh("lat")
        try:
            p50, p99 = latency(tmp, nats.url, 50 if quick else 250)
        finally:
            nats.stop()
        rows.append(_row("latency host commit -> hub commit", f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms",
                         None, "p99 < 500 ms", p99 < 0.5))
        agents = 300 if quick else 1000
        nats = fresh("cpu")
        try:
            cpu, rate, catch = hub_cpu(tmp, nats.url, agents, 4 if quick else 15)
        finally:
            nats.stop()
        rows.append(_row(f"hub CPU, 3 hosts x {agents} agents", f"{cpu:.1f} % of a core at {rate} ev/s "
                         f"(first sight {3 * agents} events in {catch:.1f} s)", None, "< 25 % of a core",
                         cpu < 25.0))
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
