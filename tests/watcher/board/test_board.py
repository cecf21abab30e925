"""`fleetwatch board`: Textual's pilot for the keys, the filter and updates on a new commit, real
tmux (a private `-L` socket) for the jump, and a real terminal (the board in a tmux pane beside a
real `fleetwatch run`) that shows the fleet and follows a goal.json change. Real logs throughout."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

pytest.importorskip("textual")

from events.log import EventLog  # noqa: E402
from events.types import AgentClassified, SourceFailed  # noqa: E402
from watcher.board.app import Board, matches, visible  # noqa: E402
from watcher.board.feed import Feed  # noqa: E402
from tests.support.exe import FLEETWATCH

CLASSES = ["RECLAMA", "TRABAJANDO", "ESTANCADO", "DICE_TERMINADO", "MAL_LANZADO"]
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def seed(db: str, n: int = 30, now: float | None = None) -> None:
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent=f"a{i:02d}", to=CLASSES[i % 5], state="busy", phase="haciendo",
                                 task=f"task {i}", target=f"fleet:{i}", source="fleet", contract_sha256="x")
                 for i in range(n)], now or time.time())
    elog.close()


def append(db: str, *events) -> None:
    elog = EventLog(db, durability="normal", create=False)
    elog.append(list(events), time.time())
    elog.close()


def run(coro):
    return asyncio.run(coro)


@contextlib.asynccontextmanager
async def opened(db: str, size: tuple[int, int] = (120, 40)):
    """The board on ``db`` (rows, not tiles) in a headless terminal of ``size``, first frame drawn."""
    app = Board(Feed(db), compact=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        yield app, pilot


async def until(pilot, cond, timeout: float = 10.0) -> bool:
    """Let the app run until ``cond()`` (the board polls the log on its own timer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await pilot.pause(0.05)
    return cond()


def test_thirty_agents_fit_80x24_in_compact_mode(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db)

    async def go():
        app = Board(Feed(db))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert app.compact                                    # automatic: rows would not fit
            shown = {a for line in app.grid for a in line}
            assert shown == {f"a{i:02d}" for i in range(30)}
            table = app.query_one("#fleet")
            assert table.region.height >= table.row_count + 0 and table.row_count <= 24 - 9
            assert app.grid[0][0] == "a00"                        # RECLAMA first (urgency order)
            await pilot.press("m")                                # rows on demand
            await pilot.pause()
            assert not app.compact and app.rows[0]["class"] == "RECLAMA"
    run(go())


def test_filter_key_narrows_and_escape_clears(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db)

    async def go():
        app = Board(Feed(db), compact=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("/")
            assert await until(pilot, lambda: app.focused is not None and app.focused.id == "filter")
            await pilot.press(*"reclama")
            await pilot.pause()
            assert {a["class"] for a in app.rows} == {"RECLAMA"} and len(app.rows) == 6
            await pilot.press("enter")                            # keep the filter, back to the table
            await pilot.pause()
            assert len(app.rows) == 6 and app.focused.id == "fleet"
            await pilot.press("escape")
            await pilot.pause()
            assert len(app.rows) == 30
    run(go())


def test_a_new_commit_shows_without_a_key(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db, 3)

    async def go():
        async with opened(db) as (app, pilot):
            append(db, AgentClassified(agent="a01", from_="TRABAJANDO", to="RECLAMA", state="waiting",
                                       source="fleet", contract_sha256="x"),
                   SourceFailed(source="tmux", error="timed out after 5s"))
            assert await until(pilot, lambda: app.row("a01") and app.row("a01")["class"] == "RECLAMA")
            assert app.rows[0]["agent"] in ("a00", "a01")
            head = str(app.query_one("#head").render())
            assert "FAILED" in head and "tmux" in head
    run(go())


def test_the_board_starts_before_the_log_exists(tmp_path):
    db = str(tmp_path / "later.db")

    async def go():
        app = Board(Feed(db))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "no event log yet" in str(app.query_one("#head").render())
            seed(db, 2)
            assert await until(pilot, lambda: len(app.rows) == 2)
        assert not os.path.exists(str(tmp_path / "never.db"))
    run(go())


def test_closed_agents_hidden_unless_asked(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db, 2)
    append(db, AgentClassified(agent="a01", from_="TRABAJANDO", to="CERRADO", source="fleet"))

    async def go():
        async with opened(db) as (app, pilot):
            assert [a["agent"] for a in app.rows] == ["a00"]
            await pilot.press("c")
            await pilot.pause()
            assert {a["agent"] for a in app.rows} == {"a00", "a01"}
    run(go())


def test_silence_key_records_a_silence(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db, 2)

    async def go():
        async with opened(db) as (app, pilot):
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("enter", *"typo", "enter")          # for: 1h (default), reason
            await pilot.pause()
            assert "muted until" in str(app.query_one("#msg").render())
    run(go())
    recs = list(EventLog(db, create=False).read(0, types=["silence.added"]))
    assert len(recs) == 1 and recs[0].event.subject_match == "agent:a00" and recs[0].event.reason == "typo"


def test_board_silence_of_an_id_with_glob_characters_mutes_only_that_agent(tmp_path):
    """Silences match subjects by glob: `s` on agent ``a*`` once recorded ``agent:a*``, which muted
    a1's RECLAMA too (found by hand with the board in tmux: a1's push was notice.silenced)."""
    from projections.notify.policy import matching_silence

    db = str(tmp_path / "e.db")
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", phase="haciendo", task="t",
                                 source="fleet", contract_sha256="x") for a in ("a*", "a1", "b[12]")],
                time.time())
    elog.close()

    async def go():
        async with opened(db) as (app, pilot):
            for agent in ("a*", "b[12]"):
                app.select(agent)
                await pilot.press("s")
                await pilot.pause()
                await pilot.press("enter", "enter")
                await pilot.pause()
                assert "muted until" in str(app.query_one("#msg").render())
    run(go())
    recs = list(EventLog(db, create=False).read(0, types=["silence.added"]))
    silences = {r.event.silence: {"subject": r.event.subject_match, "cls": None, "until": time.time() + 3000}
                for r in recs}
    assert len(silences) == 2
    now = time.time()
    for subject, muted in (("agent:a*", True), ("agent:b[12]", True), ("agent:a1", False), ("agent:b1", False)):
        got = matching_silence({"subject": subject, "cls": "RECLAMA"}, silences, now)
        assert (got is not None) == muted, subject


def test_verdict_key_records_and_refuses_self_approval(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db, 1)

    async def go():
        app = Board(Feed(db), compact=False, verifier="lead")
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("v")
            await pilot.pause()
            form = app.screen
            assert [i.value for i in form.query("Input")] == ["", "", ""]    # nothing pre-filled
            assert "who checked, e.g. lead" in [i.placeholder for i in form.query("Input")]
            assert "esc: cancel" in str(form.query_one("#ask-keys").render())
            await pilot.press("enter")                            # an empty verdict: nothing recorded
            await pilot.press(*"lead", "enter", *"pytest green", "enter")
            await pilot.pause()
            assert "verdict must be one of" in str(app.query_one("#msg").render())
            await pilot.press("v")
            await pilot.pause()
            await pilot.press(*"met", "enter", *"lead", "enter", *"pytest green", "enter")
            await pilot.pause()
            assert "recorded dod.verdict met by lead" in str(app.query_one("#msg").render())
            await pilot.press("v")
            await pilot.pause()
            await pilot.press(*"met", "enter")
            app.screen.query_one("#ask-verifier").value = "Ａ００"   # full-width: the agent itself
            await pilot.press("enter", *"x", "enter")
            await pilot.pause()
            assert "no self-approval" in str(app.query_one("#msg").render())
    run(go())
    recs = list(EventLog(db, create=False).read(0, types=["dod.verdict"]))
    assert [(r.event.verifier, r.event.verdict, r.event.source) for r in recs] == [("lead", "met", "board")]


def test_hostile_ids_are_shown_escaped(tmp_path):
    db = str(tmp_path / "e.db")
    evil = "a1\x1b]0;pwned\x07\n  7 dod.verdict met"
    elog = EventLog(db)
    elog.append([AgentClassified(agent=evil, to="RECLAMA", task="[bold]x\u202e", source="fleet",
                                 contract_sha256="x")], time.time())
    elog.close()

    async def go():
        app = Board(Feed(db), compact=False)
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.pause()
            t = app.query_one("#fleet")
            cells = [str(c) for c in t.get_row_at(0)]
            assert cells[1].startswith("a1\\x1b]0;pwned\\x07") and not any("\x1b" in c for c in cells)
            assert "[bold]x\\u202e" in cells
    run(go())


def test_filter_matches_words_anywhere():
    row = {"agent": "a7", "class": "RECLAMA", "task": "Fix login", "target": "fleet:3"}
    assert matches(row, "login rec") and not matches(row, "logout")
    doc = {"agents": [row, {**row, "agent": "a8", "class": "CERRADO"}]}
    assert [a["agent"] for a in visible(doc, "", False)] == ["a7"]


# ---- real tmux -------------------------------------------------------------------------------
@pytest.fixture
def tmux_server():
    sock = f"fw-test-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    yield sock, env
    subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, env=env)


@needs_tmux
def test_j_selects_the_agents_window_on_its_socket(tmp_path, tmux_server, monkeypatch):
    sock, env = tmux_server
    monkeypatch.delenv("TMUX", raising=False)
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "fleet", "-n", "a00", "sleep 60"], check=True, env=env)
    subprocess.run(["tmux", "-L", sock, "new-window", "-d", "-t", "fleet:7", "-n", "a07", "sleep 60"], check=True, env=env)
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "fleet-old", "sleep 60"], check=True, env=env)
    db = str(tmp_path / "e.db")
    elog = EventLog(db)
    elog.append([AgentClassified(agent="a07", to="RECLAMA", target="fleet:7", source="fleet", contract_sha256="x")],
                time.time())
    elog.close()

    async def go():
        app = Board(Feed(db), compact=False, socket=sock)
        async with app.run_test(size=(120, 30)) as pilot:
            assert await until(pilot, lambda: bool(app.rows))     # under load the first poll comes later
            await pilot.press("j")
            await until(pilot, lambda: "selected" in str(app.query_one("#msg").render()))
            return str(app.query_one("#msg").render())
    msg = run(go())
    assert "selected fleet:7" in msg and f"tmux -L {sock} attach -t fleet" in msg
    win = subprocess.run(["tmux", "-L", sock, "display", "-p", "-t", "=fleet:", "#{window_index}"],
                         capture_output=True, text=True, env=env).stdout.strip()
    assert win == "7"


def _capture(sock: str, env: dict) -> str:
    return subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", "board"], capture_output=True,
                          text=True, env=env).stdout


@needs_tmux
@pytest.mark.slow
def test_real_terminal_board_follows_a_goal_json_change(tmp_path, tmux_server):
    """A real `fleetwatch run` over goal.json files and `fleetwatch board` in an 80x24 tmux pane:
    the board shows the fleet, then a02 turning waiting (RECLAMA) appears without a key."""
    sock, env = tmux_server
    goals = tmp_path / "goals"
    for i in range(1, 31):
        d = goals / f"a{i:02d}"
        d.mkdir(parents=True)
        (d / "goal.json").write_text(json.dumps({"state": "busy", "phase": "haciendo", "task": f"t{i}",
                                                 "dod_contract": "pytest passes"}))
    db = tmp_path / "events.db"
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[store]\npath = "{db}"\ndurability = "normal"\n[watch]\ninterval = "1s"\n'
                   f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n')
    exe = FLEETWATCH
    watcher = subprocess.Popen([exe, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env)
    try:
        subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "board", "-x", "80", "-y", "24",
                        f"env TERM=xterm-256color {exe} board --config {cfg}; sleep 60"], check=True, env=env)
        deadline = time.monotonic() + 30
        screen = ""
        while time.monotonic() < deadline:
            screen = _capture(sock, env)
            if "30 agents" in screen and "a30" in screen:
                break
            time.sleep(0.2)
        assert "30 agents" in screen and "TRABAJANDO 30" in screen, screen
        (goals / "a02" / "goal.json").write_text(json.dumps({"state": "waiting", "phase": "preguntando",
                                                             "dod_contract": "pytest passes"}))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            screen = _capture(sock, env)
            if "RECLAMA 1" in screen:
                break
            time.sleep(0.2)
        assert "RECLAMA 1" in screen, screen
        first = next(ln for ln in screen.splitlines() if "a0" in ln)   # urgency order: a02 first
        assert first.split()[1] == "a02", screen
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "board", "q"], env=env)
        deadline = time.monotonic() + 60                            # liveness only: generous under load
        while time.monotonic() < deadline and "fleetwatch" in _capture(sock, env):
            time.sleep(0.2)
        assert "fleetwatch 30" not in _capture(sock, env)          # q quit the board
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)


def test_a_file_that_is_not_a_log_is_said_not_crashed(tmp_path):
    db = tmp_path / "notalog.db"
    db.write_text("this is not sqlite")

    async def go():
        app = Board(Feed(str(db)))
        async with app.run_test(size=(80, 24)) as pilot:
            # under load the first frame can come after the first pause: wait for the header itself
            assert await until(pilot, lambda: bool(app.feed.note) and bool(app.query("#head")))
            assert app.feed.note and app.feed.log is None          # said in the header, retried later
            assert await until(pilot, lambda: app.feed.note[:20] in str(app.query_one("#head").render()))
            assert app.rows == []
    run(go())
    assert db.read_text() == "this is not sqlite"                 # untouched


def test_mouse_click_on_the_selected_row_opens_the_agent_view_and_q_in_the_filter_does_not_quit(tmp_path):
    db = str(tmp_path / "e.db")
    elog = EventLog(db)
    elog.append([AgentClassified(agent="a1", to="RECLAMA", source="fleet", contract_sha256="x")], time.time())
    elog.close()

    async def go():
        app = Board(Feed(db), compact=False)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            table = app.query_one("#fleet")
            await pilot.click("#fleet", offset=(2, 1))            # the first data row (highlighted)
            await pilot.pause()
            if type(app.screen).__name__ != "AgentView":          # first click only moved the cursor
                await pilot.click("#fleet", offset=(2, 1))
                await pilot.pause()
            assert await until(pilot, lambda: type(app.screen).__name__ == "AgentView")
            await pilot.press("j")                                # the view's jump key
            await pilot.pause()
            assert "a1: no tmux target known" in str(app.query_one("#msg").render())
            await pilot.press("/")
            assert await until(pilot, lambda: app.focused is not None and app.focused.id == "filter")
            await pilot.press("q")                                # typed into the filter, not a quit
            await pilot.pause()
            assert app.is_running and app.needle == "q" and table.row_count == 0
    run(go())


def test_a_tick_during_teardown_is_no_crash(tmp_path):
    """What broke (CI): the board's interval fired once more while the app closed and its
    widgets were gone: NoMatches '#head' out of the timer. A tick without the board's widgets
    does nothing; with them, a lookup that fails is still an error."""
    db = str(tmp_path / "e.db")
    seed(db, 3)

    async def go():
        async with opened(db) as (app, pilot):
            await app.query_one("#head").remove()
            app._drawn_at = -10.0          # due for a redraw
            app.tick()                     # no '#head': the teardown case, nothing drawn
            assert not app.query("#head")
    run(go())


def test_h_hides_handled_agents_and_the_agent_view_names_the_contract(tmp_path):
    db = str(tmp_path / "e.db")
    seed(db, 10)
    from events.types import SilenceAdded

    append(db, SilenceAdded(silence="s1", subject_match="agent:a05", until="2099-01-01T00:00:00Z"))

    async def go():
        async with opened(db) as (app, pilot):
            assert await until(pilot, lambda: any(a.get("handled") for a in app.rows))
            assert [a["agent"] for a in app.rows if a["class"] == "RECLAMA"] == ["a00", "a05"]   # handled last
            await pilot.press("h")
            await pilot.pause()
            assert "a05" not in {a["agent"] for a in app.rows} and "hidden" in str(app.query_one("#msg").render())
            await pilot.press("h")
            await pilot.pause()
            assert "a05" in {a["agent"] for a in app.rows}
            await pilot.press("enter")                            # a00, the first row
            assert await until(pilot, lambda: type(app.screen).__name__ == "AgentView")
            text = str(app.screen.query_one("#agent-text").render())
            assert "a00" in text and "contract sha256 x" in text and "Class history" in text
            await pilot.press("escape")
            assert await until(pilot, lambda: type(app.screen).__name__ != "AgentView")
    run(go())
