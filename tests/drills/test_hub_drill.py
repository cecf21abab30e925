"""Hub drill: three real `fleetwatch run` hosts with seeded churn forward to a real nats-server
(JetStream, file storage, sync_interval: always); one real `fleetwatch hub` consumes. At random
moments the hub, a host (its forwarder with it) or nats-server is SIGKILLed and restarted, and
NATS is stopped for a while (3 s here, 60 s with FW_DRILL_LONG=1). Afterwards:
- every host event is in the hub's log exactly once (lost 0 / doubled 0),
- `fleetwatch verify --db hub.db` passes: every host chain intact, no gap,
- the hub's fleet view equals the union of the hosts' own views (``host/agent`` -> class),
- no condition was pushed twice (no condition revision is in two recorded notice.sent; every
  recorded notice was delivered; a delivered push with no notice.sent only in the documented
  window of a hub SIGKILL between the receiver's 200 and the commit: at most one per hub kill).
- when a host row is missing, the failure says which row, its type, whether its host's
  forwarder position passed it and whether the stream holds it.
Skipped with a clear message when nats-server is absent."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import apsw
import pytest

from tests.drills.churn import Churn
from tests.support.natsserver import MISSING, NatsServer, binary
from tests.support.notifyloop import Receiver
from tests.support.exe import FLEETWATCH

LONG = bool(os.environ.get("FW_DRILL_LONG"))
EXE = FLEETWATCH
HOSTS = ("h1", "h2", "h3")
CHURN_S = 90.0 if LONG else 12.0
OUTAGE_S = 60.0 if LONG else 3.0
KILLS = 30 if LONG else 6


def ro(path: Path) -> apsw.Connection:
    return apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)


class Proc:
    def __init__(self, argv: list[str], log: Path):
        self.argv, self.log, self.p = argv, log, None
        self.kills = 0

    def start(self) -> None:
        self.p = subprocess.Popen(self.argv, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def kill(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        self.kills += 1

    def term(self) -> int:
        self.p.send_signal(signal.SIGTERM)
        return self.p.wait(60)


def host_cfg(tmp: Path, h: str, url: str) -> Path:
    (tmp / h / "fleet").mkdir(parents=True)
    cfg = tmp / h / "c.toml"
    cfg.write_text(f'[store]\npath = "{tmp / h}/e.db"\ndurability = "normal"\n'
                   f'[watch]\ninterval = "100ms"\ndebounce = "20ms"\n'
                   f'[classify]\nstall_after = "3000d"\nclaim_unverified_after = "3000d"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp / h}/fleet/*/goal.json"\n'
                   f'[forward]\nnats = "{url}"\nhost = "{h}"\nbatch = 50\nheartbeat = "1s"\n')
    return cfg


def hub_cfg(tmp: Path, url: str, rx: Receiver) -> Path:
    cfg = tmp / "hub.toml"
    cfg.write_text(f'[store]\npath = "{tmp}/hub.db"\ndurability = "normal"\n'
                   f'[hub]\nnats = "{url}"\nsilent_after = "10m"\nack_wait = "2s"\nbatch = 100\n'
                   f'[notify]\nurls = ["{rx.url()}"]\ngroup_wait = "2s"\ngroup_interval = "1s"\n'
                   f'repeat_interval = "100d"\nretry = ["1s"]\n')
    return cfg


def host_rows(db: Path) -> tuple[str, dict[int, str]]:
    with ro(db) as c:
        chain = c.execute("SELECT hash FROM events WHERE seq=1").fetchall()[0][0][:8].hex()
        return chain, dict(c.execute("SELECT seq, id FROM events"))


def fleet_view(db: Path, prefix: str = "") -> dict[str, str]:
    from events.log import EventLog
    from watcher.runtime.state import Projections

    lg = EventLog(str(db), create=False)
    try:
        return {prefix + a: v["class"] for a, v in Projections.load(lg)["fleet"]["agents"].items()}
    finally:
        lg.close()


def wait(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def hosts_at_hub(tmp: Path) -> set[str]:
    try:
        with ro(tmp / "hub.db") as c:
            return {h for (h,) in c.execute("SELECT DISTINCT host FROM hub_origin")}
    except apsw.Error:
        return set()


def missing_at_hub(tmp: Path) -> dict[str, list[int]]:
    """host -> the seqs of its (current) chain the hub's log does not hold."""
    try:
        with ro(tmp / "hub.db") as hub:
            held = set(hub.execute("SELECT host, chain, seq FROM hub_origin"))
    except apsw.SQLError:
        held = set()
    out = {}
    for h in HOSTS:
        chain, rows = host_rows(tmp / h / "e.db")
        out[h] = sorted(s for s in rows if (h, chain, s) not in held)
    return out


def positions(tmp: Path) -> dict[str, tuple[int, int]]:
    """host -> (its forwarder's recorded position, its log's head)."""
    out = {}
    for h in HOSTS:
        with ro(tmp / h / "e.db") as c:
            head = c.execute("SELECT max(seq) FROM events").fetchall()[0][0] or 0
            try:
                pos = (c.execute("SELECT max(seq) FROM fw_position").fetchall()[0][0] or 0)
            except apsw.SQLError:
                pos = 0
        out[h] = (pos, head)
    return out


def caught_up(tmp: Path) -> bool:
    """Every host's forwarder position is its head AND the hub holds every host row (by
    (host, chain, seq), not by count). A count or a fixed sleep is not the condition: a row
    committed at SIGTERM (watcher.stopped) is forwarded by the stop's drain, so the drill waits
    for the positions, and a hub that is still folding a redelivery is waited for by rows."""
    return all(p == h for p, h in positions(tmp).values()) and not any(missing_at_hub(tmp).values())


def in_stream(url: str, want: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which (host, seq) of ``want`` the stream holds (an ephemeral ordered scan of headers)."""
    import asyncio

    import nats

    async def scan() -> set[tuple[str, int]]:
        nc = await nats.connect(url, connect_timeout=2)
        found = set()
        try:
            js = nc.jetstream()
            last = (await js.stream_info("FLEETWATCH")).state.last_seq
            sub = await js.subscribe("fleetwatch.>", ordered_consumer=True)
            n = 0
            while n < last:
                m = await sub.next_msg(timeout=5)
                n = m.metadata.sequence.stream
                key = (m.headers.get("Fw-Host", ""), int(m.headers.get("Fw-Seq", "0")))
                if key in want:
                    found.add(key)
        finally:
            await nc.close()
        return found

    return asyncio.run(scan())


def diagnose(tmp: Path, url: str | None) -> list[str]:
    """One line per host row missing at the hub: its type, whether its host's forwarder position
    passed it (the stream acknowledged it) and whether the stream holds it."""
    miss = missing_at_hub(tmp)
    pos = positions(tmp)
    want = {(h, s) for h, ss in miss.items() for s in ss}
    held: set | str = set()
    if want and url:
        try:
            held = in_stream(url, want)
        except Exception as e:  # the diagnosis must not hide the failure it explains
            held = f"unknown ({type(e).__name__})"
    out = []
    for h, ss in miss.items():
        with ro(tmp / h / "e.db") as c:
            types = dict(c.execute("SELECT seq, type FROM events"))
        for s in ss:
            where = held if isinstance(held, str) else ("yes" if (h, s) in held else "no")
            out.append(f"{h} seq {s} type={types.get(s)} fw_position={pos[h][0]} head={pos[h][1]} "
                       f"passed={pos[h][0] >= s} in_stream={where}")
    return out


@pytest.mark.drill
@pytest.mark.skipif(not LONG, reason="the hub drill runs in make drills (FW_DRILL_LONG=1): its short version was "
                    "make test's longest test (~20 s); make test keeps tests/watcher/hub/test_hub.py's kill and restart cases")
def test_hub_drill(tmp_path, capsys):
    if binary() is None:
        pytest.skip(MISSING)
    seed = int(os.environ.get("FW_DRILL_SEED", "20261201"))
    rng = random.Random(seed)
    rx = Receiver()
    nats = NatsServer(tmp_path / "nats").start()
    churns = {h: Churn(tmp_path / h / "fleet", seed + i, agents=12, t0=time.time(), p_corrupt=0.05)
              for i, h in enumerate(HOSTS) if host_cfg(tmp_path, h, nats.url)}
    hosts = {h: Proc([EXE, "run", "--config", str(tmp_path / h / "c.toml"), "--log-level", "warning"],
                     tmp_path / h / "run.log") for h in HOSTS}
    hub = Proc([EXE, "hub", "--config", str(hub_cfg(tmp_path, nats.url, rx)), "--log-level", "warning"],
               tmp_path / "hub.log")
    for p in (*hosts.values(), hub):
        p.start()
    kills = {"hub": 0, "host": 0, "nats": 0}
    try:
        # one RECLAMA on two hosts at once (same agent name, within group_wait): one grouped push
        wait(lambda: hosts_at_hub(tmp_path) == set(HOSTS), 60, "every host forwarding")
        for h in ("h1", "h2"):
            d = tmp_path / h / "fleet" / "twin"
            d.mkdir()
            (d / "goal.json").write_text('{"agent": "twin", "state": "waiting", "phase": "preguntando", '
                                         '"dod_contract": "c"}')
        wait(lambda: any("twin" in p.get("message", "") for p in rx.posts), 60, "the twin push")
        time.sleep(1.0)  # a second push would come within group_wait: give it the chance to show
        end = time.monotonic() + CHURN_S
        next_kill = time.monotonic() + rng.uniform(0.5, CHURN_S / KILLS)
        outage_at = time.monotonic() + CHURN_S / 2
        while time.monotonic() < end:
            for c in churns.values():
                c.step()
            time.sleep(rng.uniform(0.01, 0.05))
            if time.monotonic() >= outage_at:
                outage_at = float("inf")
                nats.stop()
                t_out = time.monotonic() + OUTAGE_S
                while time.monotonic() < t_out:  # hosts keep churning while NATS is away
                    for c in churns.values():
                        c.step()
                    time.sleep(0.05)
                nats.start()
            if time.monotonic() >= next_kill:
                next_kill = time.monotonic() + rng.uniform(0.5, CHURN_S / KILLS)
                what = rng.choice(("hub", "host", "nats"))
                kills[what] += 1
                if what == "hub":
                    hub.kill()
                    hub.start()
                elif what == "host":
                    p = hosts[rng.choice(HOSTS)]
                    p.kill()
                    p.start()
                else:
                    nats.kill()
                    nats.start()
        # settle: every host's position at its head and every row at the hub (a generous bound,
        # only reached on a real loss: the diagnosis below then says which row and where it stopped)
        deadline = time.monotonic() + 180
        while not caught_up(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        for p in hosts.values():
            assert p.term() == 0, (p.log.read_text()[-2000:])
        # the hosts are stopped: their heads are final (watcher.stopped included), so this is the
        # condition "every host row is acknowledged by the stream and held by the hub"
        deadline = time.monotonic() + 120
        while not caught_up(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)  # let the last notices go out and be recorded
        diagnosis = diagnose(tmp_path, nats.url)
        assert hub.term() == 0, hub.log.read_text()[-2000:]
    finally:
        for p in (*hosts.values(), hub):
            if p.p is not None and p.p.poll() is None:
                p.p.kill()
        nats.stop()
        rx.close()

    # exactly once: every host row is one hub event with id <host>/<chain>/<id>
    with ro(tmp_path / "hub.db") as c:
        hub_ids = {}
        for (i,) in c.execute("SELECT id FROM events"):
            hub_ids[i] = hub_ids.get(i, 0) + 1
        sent = [r[0] for r in c.execute("SELECT data FROM events WHERE type='notice.sent'")]
    lost, doubled, total = [], [], 0
    for h in HOSTS:
        chain, rows = host_rows(tmp_path / h / "e.db")
        total += len(rows)
        for seq, id_ in rows.items():
            n = hub_ids.get(f"{h}/{chain}/{quote(id_, safe='')}", 0)
            if n == 0:
                lost.append(f"{h} seq {seq}")
            elif n > 1:
                doubled.append(f"{h} seq {seq}")
    v = subprocess.run([EXE, "verify", "--db", str(tmp_path / "hub.db")], capture_output=True, text=True)
    union = {}
    for h in HOSTS:
        union.update(fleet_view(tmp_path / h / "e.db", f"{h}/"))
    hub_view = fleet_view(tmp_path / "hub.db")
    st = subprocess.run([EXE, "status", "--json", "--db", str(tmp_path / "hub.db")], capture_output=True, text=True)
    import json

    shown = {a["agent"]: a["class"] for a in json.loads(st.stdout)["agents"]}
    import msgspec

    keys = [k for d in sent for k in msgspec.json.decode(d)["keys"]]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    twin_pushes = [p for p in rx.posts if "h1/twin" in p.get("message", "") or "h2/twin" in p.get("message", "")]
    with capsys.disabled():
        print(f"\nhub drill: seed={seed} hosts={len(HOSTS)} host events={total} kills={kills} "
              f"host restarts={sum(p.kills for p in hosts.values())} outage={OUTAGE_S:.0f}s "
              f"lost={len(lost)} doubled={len(doubled)} pushes={len(rx.posts)} notices recorded={len(sent)} "
              f"pushes unrecorded (hub killed between 200 and notice.sent)={len(rx.posts) - len(sent)} "
              f"conditions pushed twice={len(twice)} twin pushes={len(twin_pushes)} "
              f"agents hub={len(hub_view)} union={len(union)}")
        for line in diagnosis[:10]:
            print(f"hub drill: missing at the hub: {line}")
    assert not lost, (lost[:10], diagnosis[:10])
    assert not doubled, doubled[:10]
    assert v.returncode == 0, v.stdout + v.stderr
    assert all(f"host {h} chain" in v.stdout for h in HOSTS), v.stdout
    assert hub_view == union, {k: (hub_view.get(k), union.get(k)) for k in set(hub_view) | set(union)
                               if hub_view.get(k) != union.get(k)}
    assert shown and all(union.get(a) == c for a, c in shown.items()), st.stdout[:500]  # HOST/AGENT names
    assert {a for a, c in union.items() if c != "CERRADO"} <= set(shown)
    assert not twice, twice[:5]
    # every recorded notice was delivered; a push delivered with no notice.sent is the one window
    # the notifier documents (the hub SIGKILLed between the receiver's 200 and the commit of
    # notice.sent; docs/hub-scale.md "hub notify", the delivery drills): at most one per hub kill
    assert len(sent) <= len(rx.posts) <= len(sent) + kills["hub"], (len(rx.posts), len(sent), kills)
    assert len(twin_pushes) == 1 and all(n in twin_pushes[0]["message"] for n in ("h1/twin", "h2/twin")), twin_pushes
