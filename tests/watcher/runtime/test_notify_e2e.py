"""Notifications end to end: a real EventLog in tmp_path, a real HTTP receiver on 127.0.0.1
(apprise ``json://``), the real Notifier worker, and a small tick driver (append → fold → step)
like the watcher loop's. Virtual clock unless the test is about wall-clock latency."""
from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from events.log import EventLog
from events.types import AgentClassified
from watcher.config import parse
from watcher.runtime.notifier import Notifier

from tests.support.notifyloop import T0, Driver, config, reclama
from tests.support.receiver import named


def test_ten_agents_one_post_naming_all(tmp_path, rx):
    d = Driver(config(tmp_path, rx.url()), tmp_path / "e.db")
    d.append([reclama(f"a{i:02d}") for i in range(10)], T0)
    for t in (T0 + 1, T0 + 5, T0 + 10, T0 + 11, T0 + 60):
        d.tick(t)
    assert len(rx.posts) == 1
    p = rx.posts[0]
    assert p["title"] == "10 need you" and all(f"a{i:02d}" in p["message"] for i in range(10))
    assert d.types().count("notice.sent") == 1
    d.close()


def test_one_reclama_is_pushed_at_its_group_wait_by_next_wake(tmp_path, rx):
    """The loop sleeps until ``next_wake``: the wake it is given is the end of group_wait, and a
    tick there pushes (a virtual clock: the real-clock version of this test flaked under load)."""
    now = [T0]
    d = Driver(config(tmp_path, rx.url(), group_wait="1s"), tmp_path / "e.db", mono=lambda: now[0])
    d.append([reclama("a1")], T0)
    d.tick(T0, settle=False)
    assert rx.posts == []
    wake = d.n.next_wake(d.proj.states, T0)
    assert wake == T0 + 1                                   # group_wait, not an interval later
    now[0] = wake
    d.tick(wake)                                            # settles: the worker's outcome recorded
    assert len(rx.posts) == 1 and d.types().count("notice.sent") == 1
    d.close()


def test_resolved_inside_group_wait_sends_nothing(tmp_path, rx):
    d = Driver(config(tmp_path, rx.url()), tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    d.tick(T0 + 3)
    d.append([AgentClassified(agent="a1", from_="RECLAMA", to="TRABAJANDO", state="busy")], T0 + 5)
    for t in (T0 + 10, T0 + 30, T0 + 3600):
        d.tick(t)
    assert rx.posts == [] and "notice.sent" not in d.types()
    d.close()


def test_500_then_recovery_delivered_once_after_failed(tmp_path, rx):
    rx.codes = [500]
    d = Driver(config(tmp_path, rx.url()), tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    d.tick(T0 + 10)                  # attempt 1 -> 500 -> notice.failed, retry in 1s
    d.tick(T0 + 10.5)                # backoff holds
    d.tick(T0 + 11)                  # attempt 2 -> 200
    d.tick(T0 + 30)
    assert rx.answered == [500, 200] and len(rx.posts) == 1
    notices = [(r.type, r.event.attempt, r.event.notice) for r in d.log.read(0, types=["notice.failed", "notice.sent"])]
    assert [(t, a) for t, a, _ in notices] == [("notice.failed", 1), ("notice.sent", 2)]
    assert notices[0][2] == notices[1][2]
    d.close()


def test_receiver_down_abandons_to_service_log(tmp_path, rx, caplog):
    rx.codes = [500, 500, 500, 500]
    d = Driver(config(tmp_path, rx.url()), tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    with caplog.at_level(logging.WARNING, logger="fleetwatch.notify"):
        for t in (T0 + 10, T0 + 11, T0 + 12, T0 + 13):
            d.tick(t)
    assert [r.type for r in d.log.read(0, types=["notice.failed", "notice.abandoned"])] == \
        ["notice.failed", "notice.failed", "notice.abandoned"]
    assert any("abandoned" in r.getMessage() and "RECLAMA a1" in r.getMessage() for r in caplog.records)
    d.close()


def test_restart_after_sending_resends_nothing(tmp_path, rx):
    cfg = config(tmp_path, rx.url())
    d = Driver(cfg, tmp_path / "e.db")
    d.append([reclama("a1"), reclama("a2")], T0)
    d.tick(T0 + 10)
    assert len(rx.posts) == 1
    d.close()
    d2 = Driver(cfg, tmp_path / "e.db")           # new Notifier, state folded from the same log
    for t in (T0 + 11, T0 + 600, T0 + 3600):
        d2.tick(t)
    assert len(rx.posts) == 1
    d2.close()


def test_silence_command_records_not_sends(tmp_path, rx):
    from watcher.cli import app

    cfg = config(tmp_path, rx.url())
    cfgfile = tmp_path / "c.toml"
    cfgfile.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{rx.url()}"]\n')
    d = Driver(cfg, tmp_path / "e.db")
    r = CliRunner().invoke(app, ["silence", "a1", "--for", "1h", "--reason", "on it", "--force", "--config", str(cfgfile)])
    assert r.exit_code == 0, r.output
    sid = r.output.split()[1].rstrip(":")
    r = CliRunner().invoke(app, ["silences", "--json", "--config", str(cfgfile)])
    assert json.loads(r.output)["id"] == sid
    now = time.time()                              # silences are in wall-clock time
    d.append([reclama("a1"), reclama("a2")], now)
    d.tick(now + 10)
    d.tick(now + 20)
    assert len(rx.posts) == 1 and named(rx.posts[0]["message"]) == ["a2"]
    sil = [r.event for r in d.log.read(0, types=["notice.silenced"])]
    assert len(sil) == 1 and sil[0].silence == sid
    r = CliRunner().invoke(app, ["unsilence", sid, "--config", str(cfgfile)])
    assert r.exit_code == 0
    assert CliRunner().invoke(app, ["unsilence", sid, "--config", str(cfgfile)]).exit_code == 1
    d.tick(now + 30)
    assert len(rx.posts) == 2 and named(rx.posts[1]["message"]) == ["a1"]
    d.close()


def test_flapping_agent_one_flapping_notice(tmp_path, rx):
    d = Driver(config(tmp_path, rx.url()), tmp_path / "e.db")
    t = T0
    for i in range(16):
        to = "RECLAMA" if i % 2 == 0 else "TRABAJANDO"
        d.append([AgentClassified(agent="a1", to=to, state="waiting" if to == "RECLAMA" else "busy")], t)
        d.tick(t)
        t += 1
    d.append([AgentClassified(agent="a1", to="TRABAJANDO", state="busy")], t)
    for dt in (10, 20, 60, 300):
        d.tick(t + dt)
    assert [p["title"] for p in rx.posts] == ["1 flapping"]
    d.close()


def test_nudge_never_to_waiting_agent(tmp_path, rx):
    out = tmp_path / "nudged.txt"
    argv = [sys.executable, "-c", f"open({str(out)!r}, 'a').write('{{agent}}\\n')"]
    extra = f'[nudge]\nenabled = true\nargv = {json.dumps(argv)}\nmax_per_stall = 1\n'
    d = Driver(config(tmp_path, rx.url(), extra), tmp_path / "e.db")
    d.append([AgentClassified(agent="w1", to="RECLAMA", state="waiting"),
              AgentClassified(agent="s1", to="ESTANCADO", state="idle")], T0)
    for t in (T0 + 1, T0 + 2, T0 + 600, T0 + 1200):
        d.tick(t)
    assert out.read_text().split("\n")[:-1] == ["s1"]
    ev = [r.event for r in d.log.read(0, types=["agent.nudged"])]
    assert [(e.agent, e.attempt, e.ok) for e in ev] == [("s1", 1, True)]
    d.close()


def test_tokens_never_leak(tmp_path, rx, caplog):
    """A token in the URL (user:password, query) and in goal.json's dod reaches no event, message,
    receiver body or log line, through a failing and then working receiver, via the real watcher."""
    from watcher.runtime.loop import Watcher

    tok_url, tok_pw, tok_dod, tok_path = "TOKurlXyZ123456", "PWsecretXyZ987", "DODsecretXyZ555", "PATHtokXyZ42"
    rx.codes = [500]
    fleet_dir = tmp_path / "fleet"
    (fleet_dir / "a1").mkdir(parents=True)
    (fleet_dir / "a1" / "goal.json").write_text(json.dumps(
        {"agent": "a1", "state": "waiting", "phase": "preguntando", "dod": f"secret {tok_dod}",
         "dod_contract": "tests pass", "last_activity": T0}))
    url = f"json://{tok_url}:{tok_pw}@127.0.0.1:{rx.port}/hook/{tok_path}?token={tok_url}"
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{url}"]\ngroup_wait = "1s"\n'
                f'retry = ["1s"]\n[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet_dir}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"))
    n = Notifier(cfg)
    w = Watcher(cfg, elog, notifier=n)
    with caplog.at_level(logging.DEBUG):
        for t in (T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4, T0 + 5):
            w.tick(t)
            n.drain(10)
    n.close(5)
    assert rx.answered == [500, 200]
    types = [r.type for r in elog.read(0)]
    assert "notice.failed" in types and "notice.sent" in types
    blobs = [r.data.decode() for r in elog.read(0)] + [json.dumps(p) for p in rx.posts] + \
            [r.getMessage() for r in caplog.records] + [caplog.text]
    assert any(tok_path in r for r in rx.raw)      # the token did travel to the receiver
    for tok in (tok_url, tok_pw, tok_dod, tok_path):
        assert not any(tok in b for b in blobs), tok
    elog.close()


def test_notify_test_command(tmp_path, rx):
    from watcher.cli import app

    good = tmp_path / "good.toml"
    good.write_text(f'[notify]\nurls = ["{rx.url()}"]\n')
    r = CliRunner().invoke(app, ["notify-test", "--config", str(good)])
    assert r.exit_code == 0 and rx.posts[0]["title"] == "fleetwatch test"
    rx.codes = [500]
    r = CliRunner().invoke(app, ["notify-test", "--config", str(good)])
    assert r.exit_code == 1
    none = tmp_path / "none.toml"
    none.write_text("")
    assert CliRunner().invoke(app, ["notify-test", "--config", str(none)]).exit_code == 1


def test_silence_needs_subject_or_class(tmp_path):
    from watcher.cli import app

    cfgfile = tmp_path / "c.toml"
    cfgfile.write_text(f'[store]\npath = "{tmp_path}/e.db"\n')
    assert CliRunner().invoke(app, ["silence", "--config", str(cfgfile)]).exit_code == 2
    r = CliRunner().invoke(app, ["silence", "--class", "estancado", "--for", "30m", "--json", "--config", str(cfgfile)])
    assert r.exit_code == 0 and json.loads(r.output)["class"] == "ESTANCADO"
    assert CliRunner().invoke(app, ["silence", "a1", "--for", "soon", "--config", str(cfgfile)]).exit_code == 2
    assert os.path.exists(tmp_path / "e.db")


def test_close_finishes_queued_and_step_only_records(tmp_path, rx):
    d = Driver(config(tmp_path, rx.url()), tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    d.tick(T0 + 10, settle=False)                  # handed to the worker
    d.n.close(5)
    d.append([reclama("a2")], T0 + 11)
    d.append(d.n.step(d.proj.states, T0 + 30), T0 + 30)   # records a1's push, plans nothing new
    assert len(rx.posts) == 1 and d.types().count("notice.sent") == 1
    assert d.n.step(d.proj.states, T0 + 60) == [] and len(rx.posts) == 1
    d.log.close()


def test_apprise_config_file_secrets_redacted_like_urls(tmp_path, rx, caplog):
    """[notify] config: the tokens inside an apprise config file are redacted from every log line
    and event as the ones in urls are (a failed delivery used to log the ntfy topic)."""
    from watcher.runtime.loop import Watcher

    topic, tok = "TOPICsecretQq77", "PWfileSecret991"
    rx.codes = [500, 500]
    conf = tmp_path / "apprise.txt"
    conf.write_text(f"json://user:{tok}@127.0.0.1:{rx.port}/hook/{topic}\n")
    os.chmod(conf, 0o600)
    fleet_dir = tmp_path / "fleet"
    (fleet_dir / "a1").mkdir(parents=True)
    (fleet_dir / "a1" / "goal.json").write_text(json.dumps(
        {"agent": "a1", "state": "waiting", "phase": "preguntando", "dod_contract": "tests pass", "last_activity": T0}))
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nconfig = "{conf}"\ngroup_wait = "1s"\n'
                f'retry = ["1s"]\n[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{fleet_dir}/*/goal.json"\n')
    elog = EventLog(str(tmp_path / "e.db"))
    n = Notifier(cfg)
    assert topic in n.secrets and tok in n.secrets
    w = Watcher(cfg, elog, notifier=n)
    with caplog.at_level(logging.DEBUG):
        for t in (T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4, T0 + 5):
            w.tick(t)
            n.drain(10)
        logging.getLogger("apprise").warning("leak test %s %s", topic, tok)   # whatever apprise logs
    n.close(5)
    types = [r.type for r in elog.read(0)]
    assert "notice.abandoned" in types
    blobs = [r.data.decode() for r in elog.read(0)] + [r.getMessage() for r in caplog.records] + [caplog.text]
    assert any(topic in r for r in rx.raw)          # it did travel to the receiver
    for s in (topic, tok):
        assert not any(s in b for b in blobs), s
    elog.close()


def test_unusable_notify_url_warned_and_recorded(tmp_path, rx, caplog):
    """`run` names a URL apprise cannot parse (and a plugin whose optional package is missing, as
    such) in a WARNING and records it once as source.failed of source notify-urls."""
    from apprise.manager_plugins import NotificationManager

    disabled = next((s for s in NotificationManager().schemas() if not NotificationManager()[s].enabled), None)
    urls = ["nosuch://foo/SECRETtok1", rx.url()] + ([f"{disabled}://x"] if disabled else [])
    cfg = parse(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = {json.dumps(urls)}\n', check_paths=False)
    with caplog.at_level(logging.WARNING):
        d = Driver(cfg, tmp_path / "e.db")
        d.tick(T0)
        d.tick(T0 + 1)
    failed = [r.event for r in d.log.read(0, types=["source.failed"])]
    assert len(failed) == 1 and failed[0].source == "notify-urls"
    assert "notify.urls[0]: 'nosuch' is not an apprise service" in failed[0].error
    if disabled:
        assert f"notify.urls[2]: the {disabled!r} plugin needs the optional package" in failed[0].error
    assert "notify.urls[1]" not in failed[0].error and "SECRETtok1" not in failed[0].error
    assert "'nosuch' is not an apprise service" in caplog.text and "SECRETtok1" not in caplog.text
    d.close()
    d2 = Driver(cfg, tmp_path / "e.db")          # a restart with the same problem records nothing new
    d2.tick(T0 + 2)
    assert len(list(d2.log.read(0, types=["source.failed"]))) == 1
    d2.close()


class FakeSmtp:
    """Just enough SMTP to receive apprise's mail (EHLO, AUTH, MAIL, RCPT, DATA, QUIT)."""

    def __init__(self) -> None:
        import socketserver

        self.mails: list[str] = []
        outer = self

        class H(socketserver.StreamRequestHandler):
            def handle(self):
                def w(s: str) -> None:
                    self.wfile.write((s + "\r\n").encode())
                    self.wfile.flush()

                w("220 localhost ESMTP test")
                data = None
                for raw in self.rfile:
                    line = raw.decode(errors="replace").rstrip("\r\n")
                    if data is not None:
                        if line == ".":
                            outer.mails.append("\n".join(data))
                            data = None
                            w("250 OK")
                        else:
                            data.append(line[1:] if line.startswith("..") else line)
                        continue
                    u = line.upper()
                    if u.startswith("EHLO"):
                        w("250-localhost")
                        w("250 AUTH PLAIN LOGIN")
                    elif u.startswith("AUTH"):
                        w("235 ok")
                    elif u.startswith("DATA"):
                        w("354 go")
                        data = []
                    elif u.startswith("QUIT"):
                        w("221 bye")
                        return
                    else:
                        w("250 OK")

        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def test_email_keeps_one_line_per_item(tmp_path):
    """Email is an HTML channel: without a body format apprise ran the lines together."""
    import email

    from watcher.runtime.deliver import Deliverer

    smtp = FakeSmtp()
    try:
        url = f"mailto://user:pw@127.0.0.1:{smtp.port}?mode=insecure&from=fw@example.com&to=me@example.com"
        cfg = parse(f'[notify]\nurls = ["{url}"]\n', check_paths=False)
        assert Deliverer(cfg).send("2 need you", "RECLAMA a1 · 1s\nRECLAMA a2 · 2s", "failure").ok
        [mail] = smtp.mails
        parts = [p for p in email.message_from_string(mail).walk() if p.get_content_maintype() == "text"]
        assert parts
        for p in parts:
            text = p.get_payload(decode=True).decode()
            if p.get_content_subtype() == "html":
                assert re.search(r"RECLAMA a1 · 1s\s*<br\s*/?>\s*RECLAMA a2", text), text
            else:
                assert "RECLAMA a1 · 1s\nRECLAMA a2 · 2s" in text.replace("\r\n", "\n"), text
    finally:
        smtp.close()


@pytest.mark.parametrize("url,want", [
    ("ntfy://ntfy.sh/topic", "ntfy://ntfy.sh/topic?priority=max"),
    ("ntfys://ntfy.sh/topic?tags=x", "ntfys://ntfy.sh/topic?tags=x&priority=max"),
    ("gotify://host/token", "gotify://host/token?priority=emergency"),
    ("ntfy://ntfy.sh/topic?priority=low", "ntfy://ntfy.sh/topic?priority=low"),     # the user's choice stands
    ("json://127.0.0.1/hook", "json://127.0.0.1/hook"),                            # no priority there
])
def test_urgent_asks_for_top_priority(url, want):
    import apprise

    from watcher.runtime.deliver import priority_url

    assert priority_url(url) == want
    if "ntfy" in want and "low" not in want:
        assert apprise.Apprise.instantiate(want).priority == "max"


def test_doctor_warns_when_token_config_is_readable_by_others(tmp_path, rx):
    from watcher.cli import app

    cfgfile = tmp_path / "c.toml"
    cfgfile.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[notify]\nurls = ["{rx.url()}"]\n')
    os.chmod(cfgfile, 0o644)
    r = CliRunner().invoke(app, ["doctor", "--config", str(cfgfile)])
    assert "holds notify tokens and is readable by others (mode 0644)" in r.output and f"chmod 600 {cfgfile}" in r.output
    os.chmod(cfgfile, 0o600)
    r = CliRunner().invoke(app, ["doctor", "--config", str(cfgfile)])
    assert "readable by others" not in r.output
