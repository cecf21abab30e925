"""`verify --expect-head` with the heads a user actually holds. Real logs, real subprocesses.

The short head a push body carries ("log head 1234:9f2c1a2b", which the log guide names as a
head to pass) is accepted, not only 64 hex digits, and 0:<genesis> (the head of an empty log,
which every log holds) verifies, not "BROKEN at seq 0".
"""
from __future__ import annotations

import time

from events.log import EventLog
from events.types import DodVerdict
from tests.support.fwcli import fw


def make_log(path: str) -> str:
    with EventLog(path) as log:
        log.append([DodVerdict(agent=f"a{i}", verdict="met", verifier="me", evidence="e", source="cli")
                    for i in range(4)], time.time())
        return log.head_label()  # what a push body carries: SEQ:HASH8


def test_expect_head_takes_the_short_head_of_a_push_body(tmp_path):
    db = str(tmp_path / "events.db")
    label = make_log(db)
    seq, short = label.split(":")
    ok = fw("verify", "--expect-head", label, "--db", db)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: 4 events"), ok.stderr
    wrong = f"{seq}:{short[:7]}{'0' if short[7] != '0' else '1'}"
    bad = fw("verify", "--expect-head", wrong, "--db", db)
    assert bad.returncode == 1 and f"seq {seq}: hash differs" in bad.stdout, (bad.stdout, bad.stderr)
    too_short = fw("verify", "--expect-head", f"{seq}:{short[:4]}", "--db", db)
    assert too_short.returncode == 2 and "8 to 64 hex digits" in too_short.stderr


def test_expect_head_of_the_genesis_is_held_by_every_log(tmp_path):
    db = str(tmp_path / "events.db")
    make_log(db)
    r = fw("verify", "--expect-head", "0:" + "0" * 64, "--db", db)
    assert r.returncode == 0, (r.stdout, r.stderr)
    r = fw("verify", "--expect-head", "0:" + "0" * 63 + "1", "--db", db)
    assert r.returncode == 1 and "seq 0: hash differs" in r.stdout
