"""Every push carries the log's head (``log head SEQ:HASH8``): the phone keeps an anchor of the
log outside the file, so a cut tail shows against the last push. A real `fleetwatch run`, a real
local HTTP receiver, the real log."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

from events.log import EventLog
from tests.support.notifyloop import Receiver
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def test_push_body_names_the_log_head(tmp_path):
    rx = Receiver()
    fleet = tmp_path / "fleet" / "a1"
    fleet.mkdir(parents=True)
    (fleet / "goal.json").write_text(json.dumps({"agent": "a1", "state": "waiting", "phase": "preguntando",
                                                 "dod_contract": "c", "last_activity": time.time()}))
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[watch]\ninterval = "200ms"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/fleet/*/goal.json"\n'
                   f'[notify]\nurls = ["{rx.url()}"]\ngroup_wait = "0s"\n')
    p = subprocess.Popen([FW, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={**os.environ, "FLEETWATCH_CONFIG": str(cfg)})
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end and not rx.posts:
            time.sleep(0.05)
        assert rx.posts, "no push"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(20)
        rx.close()
    body = rx.posts[0]["message"]
    m = re.search(r"^log head (\d+):([0-9a-f]{8})$", body, re.M)
    assert m, body
    seq, h8 = int(m.group(1)), m.group(2)
    log = EventLog(str(tmp_path / "e.db"), create=False, readonly=True)
    try:
        rec = [r for r in log.read(seq - 1, limit=1)][0]
        assert rec.seq == seq and rec.hash.hex()[:8] == h8        # the head it names is in the chain
    finally:
        log.close()
