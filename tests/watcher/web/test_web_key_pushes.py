"""Deleting the web key (the documented way to revoke every link) revoked the old links on the
page, but the watcher's pushes kept signing with the key it loaded at start: every new push's
link was refused (403) until a reload. Found by a helper attacking the web surfaces. The
notifier and the page now read the key file as it is now (links.CurrentKey), so after `rm
web.key` the next push carries a link that works and the old one stays refused. A real local
receiver, the real notifier and the real page server; virtual clocks."""
from __future__ import annotations

import os
import urllib.error
import urllib.request

from tests.support.notifyloop import LINK, T0, Loop, cfg_for, reclama


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_after_the_key_is_deleted_the_next_push_links_with_the_new_key(tmp_path, rx):
    from watcher.web.server import start

    cfg = cfg_for(tmp_path, rx)
    lp = Loop(cfg, str(tmp_path / "e.db"))
    web = start(cfg, str(tmp_path / "e.db"), clock=lambda: T0 + 60)
    try:
        base = f"http://127.0.0.1:{web.port}"
        lp.append([reclama("a1")], T0)
        for t in (T0 + 1, T0 + 11):
            lp.tick(t)
        [first] = rx.got()
        old = LINK.search(first["message"])
        assert old and _get(f"{base}/n/{old.group(2)}?t={old.group(3)}") == 200
        os.unlink(tmp_path / "web.key")                                  # revoke every link
        assert _get(f"{base}/n/{old.group(2)}?t={old.group(3)}") == 403
        lp.append([reclama("a2")], T0 + 20)
        for t in (T0 + 21, T0 + 31):
            lp.tick(t)
        second = rx.got()[-1]
        new = LINK.search(second["message"])
        assert new and new.group(2) != old.group(2)
        assert _get(f"{base}/n/{new.group(2)}?t={new.group(3)}") == 200     # signed with the new key
        assert _get(f"{base}/n/{old.group(2)}?t={old.group(3)}") == 403     # the old one stays revoked
    finally:
        web.close()
        lp.close()
