"""Delivery when apprise does not simply succeed (issue 23), with real local receivers and the real
Notifier worker: PARTIAL (one of two services down), NOMATCH (a tag no URL has; an apprise config
file that loads nothing), a service plugin that raises mid-delivery, and an apprise config file that
is a FIFO (must never block the start or the worker)."""
from __future__ import annotations

import logging
import os
import threading

import pytest
from apprise.decorators import notify as apprise_plugin

from watcher.config import parse
from watcher.runtime.deliver import Deliverer, config_file_urls

from tests.support.notifyloop import T0, Driver, Receiver, config, reclama


@pytest.fixture
def two():
    a, b = Receiver(), Receiver()
    yield a, b
    a.close()
    b.close()


def notices(d: Driver) -> list[tuple[str, int, str]]:
    return [(r.type, r.event.attempt, getattr(r.event, "error", ""))
            for r in d.log.read(0, types=["notice.sent", "notice.failed", "notice.abandoned"])]


def test_partial_delivery_is_sent_once_not_retried_and_logged(tmp_path, two, caplog):
    up, down = two
    down.codes = [500] * 20
    cfg = config(tmp_path, f'{up.url()}", "{down.url()}')   # urls = [up, down]
    out = Deliverer(cfg).send("1 needs you", "RECLAMA a1", "failure")
    assert (out.ok, out.partial, out.error) == (True, True, "delivered to 1 of 2 services")
    d = Driver(cfg, tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    with caplog.at_level(logging.WARNING, logger="fleetwatch.notify"):
        for t in (T0 + 10, T0 + 11, T0 + 12, T0 + 600):
            d.tick(t)
    assert [n[0] for n in notices(d)] == ["notice.sent"]
    assert len(up.posts) == 2                                # the direct send above, then the notice once
    assert any("only partly delivered: delivered to 1 of 2 services" in r.getMessage() for r in caplog.records)
    d.close()


def test_a_tag_no_url_has_is_nomatch_retried_then_abandoned(tmp_path, two, caplog):
    rx, _ = two
    cfg = config(tmp_path, rx.url(), extra='tags = { urgent = "phone" }\n')
    out = Deliverer(cfg).send("1 needs you", "RECLAMA a1", "failure", "phone")
    assert (out.ok, out.error) == (False, "no notify URL has tag 'phone'")
    d = Driver(cfg, tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    with caplog.at_level(logging.WARNING, logger="fleetwatch.notify"):
        for t in (T0 + 10, T0 + 11, T0 + 12, T0 + 13, T0 + 600):
            d.tick(t)
    assert notices(d) == [("notice.failed", 1, "no notify URL has tag 'phone'"),
                          ("notice.failed", 2, "no notify URL has tag 'phone'"),
                          ("notice.abandoned", 3, "no notify URL has tag 'phone'"),
                          ("notice.sent", 1, "")]             # the untagged warning that it was abandoned
    [p] = rx.posts
    assert "undelivered after 3 attempts" in p["message"] and "a1" not in p["title"]
    assert any("abandoned" in r.getMessage() and "RECLAMA a1" in r.getMessage() for r in caplog.records)
    d.close()


def test_an_apprise_config_that_loads_nothing_is_nomatch(tmp_path):
    bad = tmp_path / "apprise.yml"
    bad.write_bytes(os.urandom(300))
    cfg = parse(f'[notify]\nconfig = "{bad}"\n', check_paths=False)
    out = Deliverer(cfg).send("1 needs you", "RECLAMA a1", "failure")
    assert (out.ok, out.error) == (False, "no notify URLs loaded")


_CALLS: list[str] = []


@apprise_plugin(on="fwraise")
def _raising_service(body, title, notify_type, *args, **kwargs):
    _CALLS.append(title)
    raise RuntimeError("service blew up with sekrit-token-123")


def test_a_service_that_raises_mid_delivery_fails_the_notice_and_the_others_still_get_it(tmp_path, two):
    rx, _ = two
    cfg = config(tmp_path, f'{rx.url()}", "fwraise://sekrit-token-123@host')
    d = Driver(cfg, tmp_path / "e.db")
    d.append([reclama("a1")], T0)
    for t in (T0 + 10, T0 + 11):
        d.tick(t)
    assert _CALLS and len(rx.posts) == 1                     # the raise did not stop the other service
    assert [n[0] for n in notices(d)] == ["notice.sent"]     # one of two: PARTIAL, recorded as sent
    assert "sekrit-token-123" not in repr(list(d.log.read(0)))
    d.close()
    out = Deliverer(config(tmp_path, "fwraise://sekrit-token-123@host")).send("t", "b", "failure")          # alone: a failure naming the service, redacted
    assert out.ok is False and out.error.startswith("failure: ") and "sekrit-token-123" not in out.error


def test_a_fifo_as_apprise_config_never_blocks(tmp_path, two):
    rx, _ = two
    fifo = tmp_path / "apprise.yml"
    os.mkfifo(fifo)
    cfg = config(tmp_path, rx.url(), extra=f'config = "{fifo}"\n')
    got: list = []
    th = threading.Thread(target=lambda: got.append((config_file_urls(str(fifo)),
                                                     Deliverer(cfg).send("1 needs you", "RECLAMA a1", "failure"))),
                          daemon=True)
    th.start()
    th.join(60)                                              # liveness only: a blocked open never returns
    assert not th.is_alive(), "opening the FIFO blocked"
    [(urls, out)] = got
    assert urls == [] and out.ok and len(rx.posts) == 1      # the URLs still deliver; the FIFO is skipped
