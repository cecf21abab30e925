"""The notice page lists its items in the push's order: the most urgent group first, the open
before the handled within it (issue 45 item 1), with a real `fleetwatch run`, a local receiver
and the page over HTTP.

Found: the page listed the items in the order of their condition ids' strings, so a notice of
RECLAMA a0, a1, a2 and DICE_TERMINADO a10 read a0, a10 (ready for review), a1, a2, and an
acknowledged agent stayed above the unanswered ones. The silence button of a notice of several
items read "Silence agent 1d" and silenced every agent of the notice for a day (14 at once here)."""
from __future__ import annotations

import re
import urllib.request

from tests.support.fwcli import fw
from tests.support.fleet import Watcher, config, free_port, goal
from tests.support.receiver import Sink
from tests.support.waiting import wait_for

LINK = re.compile(r"(https?://\S+/n/n[0-9a-f]{15}\?t=\S+)")
ITEM = re.compile(r"<li class=item><span class='cls (\w+)'>\w+</span> (\w+) ")


def page_items(url: str) -> list[tuple[str, str]]:
    with urllib.request.urlopen(url, timeout=20) as r:
        return ITEM.findall(r.read().decode())


def test_notice_page_is_in_push_order_with_the_handled_after_the_open(tmp_path):
    sink = Sink()
    port = free_port()
    g = tmp_path / "goals"
    for a in ("a0", "a1", "a2"):
        goal(g, a, state="waiting", task=f"task {a}")
    goal(g, "a10", state="idle", phase="hecho", task="task a10")
    cfg = config(tmp_path, [sink.url()], web_port=port)
    w = Watcher(cfg)
    try:
        body = wait_for(lambda: sink.bodies and sink.bodies[0]["message"], timeout=60)
        pushed = [ln.split()[1] for ln in body.splitlines() if ln.split()[:1] in (["RECLAMA"], ["DICE_TERMINADO"])]
        url = LINK.search(body).group(1)
        items = page_items(url)
        with urllib.request.urlopen(url, timeout=20) as r:
            html = r.read().decode()
        # the silence button acts on every agent of the notice and says so
        assert "Silence all agents 1d" in html and "Silence agent 1d" not in html
        assert [name for _, name in items] == pushed == ["a0", "a1", "a2", "a10"], (items, pushed)
        assert fw("ack", "agent:a0", "--config", str(cfg)).returncode == 0
        acked = wait_for(lambda: "acked by" in urllib.request.urlopen(url, timeout=20).read().decode(), timeout=60)
        assert acked
        assert [name for _, name in page_items(url)] == ["a1", "a2", "a0", "a10"]
    finally:
        w.stop()
        sink.close()
