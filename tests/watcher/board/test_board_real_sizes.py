"""The board in real terminals (tmux panes of 80×24 and 120×40) over 30 agents of every class,
read back with capture-pane (issue 45 item 7): the header never wraps; every agent shows with its
class, what it needs, its DoD status and its handling mark; MAL_LANZADO is drawn unlike RECLAMA,
in colour and with NO_COLOR (an emphasis per class, the class named); enter opens the agent view
(contract and checks, last verdict, class history, handling), j jumps. Real CLI, real log."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from events.log import EventLog
from events.types import AgentClassified, DodVerdict, SilenceAdded
from tests.support.fwcli import fw
from tests.support.exe import FLEETWATCH

pytest.importorskip("textual")
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
EXE = FLEETWATCH
KINDS = ["RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO", "TRABAJANDO"]
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def seed(db: str) -> None:
    log = EventLog(db, durability="normal")
    now = time.time()
    evs = []
    for i in range(30):
        c = KINDS[i % 5]
        kw: dict = {"state": "busy", "phase": "haciendo", "reason": "busy"}
        if c == "RECLAMA":
            kw = {"state": "waiting", "phase": "haciendo", "reason": "waiting",
                  "waiting_for": {"kind": "permission", "tool": "Bash"} if i % 2 == 0 else {"kind": "question"}}
        elif c == "MAL_LANZADO":
            kw = {"reason": "no dod_contract"}
        elif c == "DICE_TERMINADO":
            kw = {"state": "idle", "phase": "hecho", "reason": "claims done"}
        elif c == "ESTANCADO":
            kw = {"state": "idle", "phase": "haciendo", "reason": "no activity for 20m"}
        evs.append(AgentClassified(agent=f"a{i:02d}", to=c, task=f"task {i} fix the login redirect",
                                   target=f"fleet:{i}", source="fleet", contract_sha256="x", **kw))
    log.append(evs, now - 600)
    log.append([DodVerdict(agent="a01", verdict="met", verifier="lead", evidence="pytest green"),
                DodVerdict(agent="a06", verdict="failed", verifier="lead", evidence="pytest red")], now - 60)
    log.append([SilenceAdded(silence="s1", subject_match="agent:a05", until="2099-01-01T00:00:00Z",
                             reason="known")], now - 30)
    log.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("boardsizes")
    db = str(tmp / "e.db")
    seed(db)
    r = fw("ack", "a00", "--db", db)                  # acked from the shell: a handled RECLAMA
    assert r.returncode == 0, r.stderr
    (tmp / "tmux").mkdir()
    # COLUMNS and LINES: pytest-xdist's workers set them (80, 24), and a board started with them
    # takes them for the terminal's size (shutil.get_terminal_size) whatever the pane's
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")}
    env["TMUX_TMPDIR"] = str(tmp / "tmux")
    # a session that outlives the boards: killing a board's session never stops the server while
    # the next one starts (new-session then met a server on its way out)
    subprocess.run(["tmux", "-L", "fwsizes", "new-session", "-d", "-s", "keep", "sleep 900"], check=True, env=env)
    yield db, env
    subprocess.run(["tmux", "-L", "fwsizes", "kill-server"], capture_output=True, env=env)


def board(db: str, env: dict, w: int, h: int, extra: str = "") -> None:
    """The board in a pane of exactly ``w``×``h``, checked before the board starts in it (session
    b named exactly, ``=b:``, everywhere)."""
    tm = ["tmux", "-L", "fwsizes"]
    subprocess.run([*tm, "kill-session", "-t", "=b"], capture_output=True, env=env)
    subprocess.run([*tm, "new-session", "-d", "-s", "b", "-x", str(w), "-y", str(h), "sleep 600"], check=True, env=env)
    subprocess.run([*tm, "resize-window", "-t", "=b:", "-x", str(w), "-y", str(h)], check=True, env=env)
    size = subprocess.run([*tm, "display", "-p", "-t", "=b:", "#{pane_width}x#{pane_height}"], capture_output=True,
                          text=True, env=env).stdout.strip()
    assert size == f"{w}x{h}", size
    subprocess.run([*tm, "respawn-pane", "-k", "-t", "=b:",
                    f"env TERM=xterm-256color {extra} {EXE} board --db {db}; sleep 120"], check=True, env=env)


def screen(env: dict, escapes: bool = False) -> str:
    return subprocess.run(["tmux", "-L", "fwsizes", "capture-pane", "-p", *(["-e"] if escapes else []), "-t", "=b:"],
                          capture_output=True, text=True, env=env).stdout


def until(env: dict, cond, timeout: float = 60.0) -> str:
    end = time.monotonic() + timeout
    s = ""
    while time.monotonic() < end:
        s = screen(env)
        if cond(s):
            return s
        time.sleep(0.2)
    raise AssertionError(s)


def style_of(line_e: str, text: str) -> set[str]:
    """The SGR parameters in force where ``text`` starts in an escaped line (a reset clears them)."""
    want = SGR.sub("", line_e).index(text)
    active: list[str] = []
    plain = 0
    pos = 0
    for m in SGR.finditer(line_e):
        plain += m.start() - pos
        pos = m.end()
        if plain > want:
            break
        for p in (m.group(1) or "0").split(";"):
            active = [] if p in ("0", "") else [*active, p]
    return set(active)


def line_with(s: str, agent: str) -> str:
    return next(ln for ln in s.splitlines() if re.search(rf"\b{agent}\b", ln))


@pytest.mark.parametrize("w,h", [(80, 24), (120, 40)])
def test_thirty_agents_readable(world, w, h):
    db, env = world
    board(db, env, w, h)
    s = until(env, lambda s: "a29" in s and "30 agents" in s)
    lines = s.splitlines()
    assert lines[0].lstrip().startswith("fleetwatch 30 agents") and "head " in lines[1]   # two header lines ...
    assert "Fleet" in lines[2] and "Runs" in lines[2]                                  # ... then the tabs: no wrap
    assert all(len(ln) <= w for ln in lines)
    for i in range(30):
        assert re.search(rf"\ba{i:02d}\b", s), (i, s)
    wide = w >= 120
    assert ("waiting for permission: B" if wide else "perm Bash") in line_with(s, "a10")
    assert ("asks a question" if wide else "question") in line_with(s, "a15")
    assert re.search(r"\bmet\b", line_with(s, "a01")) and ("failed" if wide else "FAIL") in line_with(s, "a06")
    assert ("✓ acked by" if wide else "✓") in line_with(s, "a00")
    assert ("s silenced" if wide else " s ") in line_with(s, "a05")
    assert "✓" not in line_with(s, "a20") if wide else True
    assert "no dod_contract" in line_with(s, "a03")
    rec, mal = line_with(s, "a10"), line_with(s, "a03")
    assert re.search(r"! +a10 +RECL", rec) and re.search(r"x +a03 +MAL_", mal)         # glyph and name differ
    es = screen(env, escapes=True)
    rec_e = next(ln for ln in es.splitlines() if "a15" in SGR.sub("", ln))   # a15, a03: not under the cursor
    mal_e = next(ln for ln in es.splitlines() if "a03" in SGR.sub("", ln))
    r_style, m_style = style_of(rec_e, "RECL"), style_of(mal_e, "MAL_")
    assert r_style != m_style and "1" in r_style                                      # RECLAMA bold, another colour


def test_no_color_names_and_emphasis_per_class(world):
    db, env = world
    board(db, env, 120, 40, "NO_COLOR=1")
    s = until(env, lambda s: "a29" in s)
    assert "RECLAMA" in line_with(s, "a15") and "MAL_LANZADO" in line_with(s, "a03")
    es = screen(env, escapes=True)
    rec_e = next(ln for ln in es.splitlines() if "a15" in SGR.sub("", ln))
    mal_e = next(ln for ln in es.splitlines() if "a03" in SGR.sub("", ln))
    assert "7" in style_of(rec_e, "RECLAMA") and "4" in style_of(mal_e, "MAL_LANZADO")
    colours = {p for m in SGR.finditer(es) for p in [m.group(1)] if re.search(r"38;5;(9|196|197|203|177|201)\b", p)}
    assert not colours                                                                  # no class colour at all


def test_enter_opens_the_agent_view_and_j_jumps(world):
    db, env = world
    board(db, env, 120, 40)
    until(env, lambda s: "a29" in s)
    for _ in range(5):  # keys sent before the table has the focus are lost: sent again
        subprocess.run(["tmux", "-L", "fwsizes", "send-keys", "-t", "=b:", "Home", "Down", "Down", "Down", "Down", "Enter"],
                       env=env)
        try:
            s = until(env, lambda s: "Class history" in s, timeout=10)
            break
        except AssertionError:
            subprocess.run(["tmux", "-L", "fwsizes", "send-keys", "-t", "=b:", "Escape"], env=env)
    for part in ("a00", "Contract and checks", "Last verdict", "Class history", "Handled", "acked via cli",
                 "target fleet:0", "-> RECLAMA", "j jump"):
        assert part in s, (part, s)
    subprocess.run(["tmux", "-L", "fwsizes", "send-keys", "-t", "=b:", "j"], env=env)
    s = until(env, lambda s: "Class history" not in s and "a00:" in s)
    assert "a00: " in s                                   # the jump's answer (no such window on this server)


def test_board_phone_and_summary_render_one_view_model(world):
    """The board's rows are the phone page's rows (``views.agents_view``) at the same head and
    time, and who needs you is the same set in the board's rows, the phone's sections and the
    summary's attention groups (a met claim of done needs nobody anywhere)."""
    from projections.present import views
    from watcher.board.feed import Feed
    from watcher.runtime.state import Projections

    db, _ = world
    feed = Feed(db)
    try:
        feed.poll()
        now = time.time()
        board_rows = feed.doc(now)["agents"]
        log = EventLog(db, create=False, readonly=True)
        try:
            states = Projections.load(log).states
        finally:
            log.close()
        assert board_rows == views.agents_view(states, now)
        phone = {r["agent"] for _, needs, rows in views.fleet_sections(board_rows) if needs for r in rows}
        summary = {line.split(":", 1)[0] for g, lines in views.summary_groups(states, now) if g in views.ATTENTION
                   for line in lines}
        board = {r["agent"] for r in board_rows if views.needs_you(r)}
        assert board == phone == summary and "a01" not in board and {"a00", "a05", "a06"} <= board
    finally:
        feed.close()
