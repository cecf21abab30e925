"""The smaller breaks of issue 47, each through the code that shipped it: a verifier spelled with a
combining mark (``á1``: ``a`` + U+0301) was accepted as another party than agent ``a1``; a push
link's token with a trailing newline (``?t=TOKEN%0a``) was accepted."""
from __future__ import annotations

import time

from events.log import EventLog
from events.types import AgentClassified
from tests.support.fwcli import fw
from watcher.runtime.links import check, parse_items, sign


def test_a_verifier_spelled_with_a_combining_mark_is_the_agent_itself(tmp_path):
    db = str(tmp_path / "e.db")
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent="a1", to="RECLAMA", state="waiting", source="fleet", contract_sha256="x")],
                time.time())
    elog.close()
    for spelling in ("a\u03011", "\u00e11", "\u00c11"):
        r = fw("verdict", "a1", "met", "--verifier", spelling, "--evidence", "curl ok", "--db", db)
        assert r.returncode == 2 and "self-approval" in r.stderr, (spelling, r.stderr)
    r = fw("tail", "--json", "--db", db)
    assert "dod.verdict" not in r.stdout


def test_a_link_token_is_matched_whole():
    key, notice, now = b"k" * 32, "n0123456789abcde", 1_800_000_000.0
    token = sign(key, notice, now, 3600)
    assert check(key, notice, token, now)
    for bad in (token + "\n", token + "\r\n", token + "\x00", "\n" + token):
        assert not check(key, notice, bad, now), repr(bad)
    assert not check(key, notice + "\n", token, now)
    assert parse_items(key, notice, "1-" + "A" * 16 + "\n") in (None, [])
