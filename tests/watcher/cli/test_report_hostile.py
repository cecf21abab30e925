"""`fleetwatch report --html` attacked as a hostile fleet and a careless user would: real
`fleetwatch report` processes, real logs, real files, FIFOs and symlinks."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from html.parser import HTMLParser

import pytest

pytest.importorskip("matplotlib")

from events.log import EventLog  # noqa: E402
from events.types import AgentClassified  # noqa: E402
from tests.support.exe import FLEETWATCH

HOSTILE = ["evil\u202etxt.exe", "nul\x00id", "esc\x1b]0;PWNED\x07", "x</td><script>alert(1)</script>"]


def _log(tmp_path) -> str:
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    now = time.time()
    log.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", reason="r") for a in HOSTILE], now - 600)
    log.append([AgentClassified(agent=a, to="TRABAJANDO", state="busy", reason="r") for a in HOSTILE], now - 60)
    log.close()
    return db


def _report(db: str, out: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETWATCH_DB", "FLEETWATCH_CONFIG")}
    return subprocess.run([FLEETWATCH, "report", "--db", db, "--html", out], capture_output=True, text=True,
                          timeout=timeout, env={**env, "NO_COLOR": "1"})


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)


def test_report_html_shows_controls_and_bidi_in_agent_ids_as_escapes(tmp_path):
    db = _log(tmp_path)
    out = tmp_path / "r.html"
    r = _report(db, str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    for raw in ("\u202e", "\x00", "\x1b", "\x07"):
        assert raw not in text
    assert "evil\\u202etxt.exe" in text and "nul\\x00id" in text and "esc\\x1b]0;PWNED\\x07" in text
    p = _Tags()
    p.feed(text)
    assert "script" not in p.tags and "&lt;script&gt;" in text


def test_report_wrote_line_escapes_the_path(tmp_path):
    db = _log(tmp_path)
    out = tmp_path / "r\x1b]0;PWNED\x07.html"
    r = _report(db, str(out))
    assert r.returncode == 0, r.stderr
    assert out.exists() and "\x1b" not in r.stdout and "\\x1b]0;PWNED\\x07" in r.stdout


def test_report_html_to_a_fifo_writes_into_it_and_keeps_the_fifo(tmp_path):
    db = _log(tmp_path)
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    r = _report(db, str(fifo))
    reader.join(10)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(fifo) and os.stat(fifo).st_mode & 0o170000 == 0o010000   # still a FIFO
    assert got and got[0].startswith(b"<!doctype html>") and got[0].rstrip().endswith(b"</html>")


def test_report_html_to_a_fifo_nobody_reads_is_a_clear_error(tmp_path):
    db = _log(tmp_path)
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    r = _report(db, str(fifo), timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "nothing reads the FIFO" in r.stderr
    assert os.stat(fifo).st_mode & 0o170000 == 0o010000


def test_report_html_to_a_folder_is_a_clear_error(tmp_path):
    db = _log(tmp_path)
    (tmp_path / "out").mkdir()
    r = _report(db, str(tmp_path / "out"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "it is a folder" in r.stderr
    assert [n for n in os.listdir(tmp_path) if n.startswith(".report.")] == []


def test_report_html_into_a_symlink_replaces_the_link_never_its_target(tmp_path):
    db = _log(tmp_path)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    link = tmp_path / "r.html"
    link.symlink_to(target)
    r = _report(db, str(link))
    assert r.returncode == 0, r.stderr
    assert target.read_text() == "keep me\n" and not link.is_symlink()
    assert link.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_report_says_which_damaged_rows_it_left_out(tmp_path):
    """Found by hand: three rows damaged under the log (data not JSON, a time not ISO-8601, data
    a string) were left out of every figure without a word; `tail` names them."""
    import sqlite3

    db = _log(tmp_path)
    con = sqlite3.connect(db)
    guard = con.execute("SELECT sql FROM sqlite_master WHERE name = 'events_no_update'").fetchone()[0]
    con.execute("DROP TRIGGER events_no_update")
    con.execute("UPDATE events SET data = x'ff00badbad' WHERE seq = 2")
    con.execute("UPDATE events SET time = 'notatime' WHERE seq = 6")
    con.execute(guard)
    con.commit()
    con.close()
    out = tmp_path / "r.html"
    r = _report(db, str(out))
    assert r.returncode == 0, r.stderr
    assert "2 damaged row(s) left out of the report (seq 2, 6)" in r.stderr
    assert "2 damaged row(s) left out of the report (seq 2, 6)" in out.read_text(encoding="utf-8")


def test_a_log_spanning_years_gives_a_small_quick_page(tmp_path):
    """Found by hand: one event stamped by a wrong clock 27 years back made --html draw one bar a
    day, 9,800 of them: 1 min 52 s and a 19.6 MB page (the terminal report took 1 s)."""
    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent="a1", to="RECLAMA", state="waiting", reason="r")], 86400 * 365 * 30)
    log.append([AgentClassified(agent="a1", to="TRABAJANDO", state="busy", reason="r")], time.time() - 100)
    log.close()
    out = tmp_path / "r.html"
    t0 = time.monotonic()
    r = _report(db, str(out), timeout=45)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 30 and out.stat().st_size < 1_000_000
    text = out.read_text(encoding="utf-8")
    assert "DoD verdicts per 8" in text      # 9,8xx days summed 82 at a time: 120 bars
