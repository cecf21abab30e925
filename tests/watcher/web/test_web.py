"""The action endpoint and phone page: a real werkzeug server on 127.0.0.1, a real HTTP client
(urllib), a real EventLog. Time for token expiry is a virtual clock handed to the app."""
from __future__ import annotations

import os
import stat

import pytest

pytest.importorskip("werkzeug")

from events.log import EventLog  # noqa: E402
from events.types import AgentClassified  # noqa: E402
from projections.notify import fold as notify  # noqa: E402
from watcher.runtime.links import KeyError_, check, key_path, link, load_key, sign  # noqa: E402
from watcher.runtime.state import Projections  # noqa: E402

from tests.support.webpage import SECRET, T0, Site, make_cfg  # noqa: E402


def test_page_lists_items_and_post_buttons(site):
    code, html, headers = site.req(f"/n/{site.notice}?t={site.token}")
    assert code == 200
    assert "a1" in html and "a2" in html and "RECLAMA" in html
    for label in ("Acknowledge", "Snooze 1h all", "Silence all agents 1d"):   # 2 items: the buttons act on both
        assert label in html
    # per item (2 open): Acknowledge, Snooze 1h; then all at once: Acknowledge, Snooze 1h, Silence
    assert html.count("<form method=post") == 2 * 2 + 3 and "<script" not in html.lower()
    assert headers["Referrer-Policy"] == "no-referrer" and "script-src" not in headers["Content-Security-Policy"]
    assert f"/n/{site.notice}/fleet?t=" in html


@pytest.mark.parametrize("token", ["", "garbage", "zz.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"])
def test_no_valid_token_is_403_and_changes_nothing(site, token):
    before = len(site.events())
    assert site.req(f"/n/{site.notice}?t={token}")[0] == 403
    for action in ("ack", "snooze", "silence"):
        assert site.req(f"/n/{site.notice}/{action}", {"t": token})[0] == 403
    assert len(site.events()) == before


def test_token_names_one_notice(site, tmp_path):
    other = "n" + "0" * 15
    tok_other = sign(site.key, other, T0, 86400)
    assert site.req(f"/n/{site.notice}?t={tok_other}")[0] == 403
    assert site.req(f"/n/{site.notice}/ack", {"t": tok_other})[0] == 403
    assert check(site.key, site.notice, site.token, T0 + 20)
    assert not check(b"another key.....", site.notice, site.token, T0 + 20)


def test_token_expires_after_24h(site):
    site.clock.t = T0 + 20 + 86400 - 1
    assert site.req(f"/n/{site.notice}?t={site.token}")[0] == 200
    site.clock.t = T0 + 20 + 86400
    before = len(site.events())
    code, html, _ = site.req(f"/n/{site.notice}?t={site.token}")
    assert code == 410 and "expired" in html and "newest push" in html   # the way on (issue 45)
    assert site.req(f"/n/{site.notice}/ack", {"t": site.token})[0] == 410
    assert len(site.events()) == before


def test_actions_are_post_only(site):
    code, _, headers = site.req(f"/n/{site.notice}/ack?t={site.token}")
    assert code == 405 and "POST" in headers.get("Allow", "")
    assert site.req(f"/n/{site.notice}", {"t": site.token})[0] == 405          # the page itself takes no POST
    assert site.req(f"/n/{site.notice}/nuke", {"t": site.token})[0] == 404
    assert not site.events(["notice.acked", "silence.added"])


def test_acknowledge_appends_notice_acked_via_web(site):
    code, _, headers = site.req(f"/n/{site.notice}/ack", {"t": site.token})
    assert code == 303 and headers["Location"].startswith(f"/n/{site.notice}?t=") and "done=ack" in headers["Location"]
    acks = site.events(["notice.acked"])
    assert len(acks) == 1
    ev = acks[0].event
    assert ev.via == "web" and ev.notice == site.notice and ev.until == ""
    assert sorted(c.partition("|")[0] for c in ev.conditions) == ["agent:a1", "agent:a2"]
    code, html, _ = site.req(headers["Location"])
    assert code == 200 and "Acknowledged" in html and "acked by web:phone" in html


def test_snooze_acks_for_one_hour(site):
    assert site.req(f"/n/{site.notice}/snooze", {"t": site.token})[0] == 303
    ev = site.events(["notice.acked"])[0].event
    from events.log import parse_iso

    assert parse_iso(ev.until) == pytest.approx(T0 + 20 + 3600, abs=0.01)


def test_silence_adds_one_silence_per_agent_for_a_day(site):
    assert site.req(f"/n/{site.notice}/silence", {"t": site.token})[0] == 303
    sil = [r.event for r in site.events(["silence.added"])]
    assert sorted(s.subject_match for s in sil) == ["agent:a1", "agent:a2"]
    from events.log import parse_iso

    assert all(parse_iso(s.until) == pytest.approx(T0 + 20 + 86400, abs=0.01) for s in sil)
    st = Projections.load(EventLog(site.db, create=False))["notify"]
    assert len(st["silences"]) == 2       # the fold sees them (tail, board, rebuild do too)


def test_fleet_page_needs_you_first(tmp_path):
    s = Site(tmp_path, agents=("a1",))
    try:
        log = EventLog(s.db)
        log.append([AgentClassified(agent="w1", to="TRABAJANDO", state="busy"),
                    AgentClassified(agent="s1", to="ESTANCADO", state="idle")], T0 + 12)
        log.close()
        code, html, _ = s.req(f"/n/{s.notice}/fleet?t={s.token}")
        assert code == 200
        assert html.index("a1") < html.index("s1") < html.index("w1")
        assert "need attention" in html
        assert "today: 0 DoD met" in html and "waited on you" in html     # the report's line for today
    finally:
        s.close()


def test_hostile_agent_id_is_escaped_on_the_page(tmp_path):
    evil = "<img src=x onerror=alert(1)>\x1b]0;t\x07\u202e"
    s = Site(tmp_path, agents=(evil,))
    try:
        code, html, _ = s.req(f"/n/{s.notice}?t={s.token}")
        assert code == 200 and "<img" not in html and "\x1b" not in html and "\u202e" not in html
        assert "&lt;img" in html
    finally:
        s.close()


def test_key_file_0600_outside_the_log_and_refused_when_open(tmp_path):
    cfg = make_cfg(tmp_path)
    p = key_path(cfg)
    key = load_key(p)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600 and len(key) == 32
    assert load_key(p) == key                                   # stable
    assert not p.startswith(str(tmp_path / "e.db"))
    os.chmod(p, 0o644)
    with pytest.raises(KeyError_):
        load_key(p)
    os.chmod(p, 0o600)
    os.symlink(p, tmp_path / "link.key")
    with pytest.raises(KeyError_):
        load_key(str(tmp_path / "link.key"))                  # no symlink followed


def test_link_has_no_apprise_secret(tmp_path):
    cfg = make_cfg(tmp_path)
    key = load_key(key_path(cfg))
    url = link(cfg, key, "n0123456789abcde", T0)
    assert url.startswith("https://fleet.example.net/n/n0123456789abcde?t=")
    assert SECRET not in url and key.hex() not in url


def test_healthz_and_unknown_paths(site):
    assert site.req("/healthz")[:2] == (200, "ok\n")
    assert site.req("/etc/passwd")[0] == 404
    assert site.req(f"/n/../../etc?t={site.token}")[0] in (403, 404)


def test_oversized_post_is_refused(site):
    code = site.req(f"/n/{site.notice}/ack", {"t": site.token, "x": "y" * 100_000})[0]
    assert code == 413 and not site.events(["notice.acked"])


def test_notify_fold_sees_the_web_ack(site):
    site.req(f"/n/{site.notice}/ack", {"t": site.token})
    log = EventLog(site.db, create=False)
    st = Projections.load(log)["notify"]
    log.close()
    acked = [c for c in st["conds"].values() if c.get("acked") is not None]
    assert len(acked) == 2 and all(c["acked"] == notify.NEVER for c in acked)
