"""The board: a Textual app over ``Feed`` (the followed log) and ``projections.present.views``.

Layout: a header line (fleet counts by class, source health, notification health, log head), tabs
for the fleet, runs, missions, swarms and the last events, a filter line and a message line.
Agents are grouped by urgency (``projections.classes`` rank: RECLAMA first) and coloured by class;
CERRADO agents are hidden unless asked (``c``). Compact mode (``m``, or automatically when the
fleet does not fit the screen as rows) lays agents out as tiles, four per 80 columns, so 30 agents
fit 80×24.

Keys (one table, ``BINDINGS``): ``/`` filter, ``enter`` (or a click on the selected row) jumps to
the agent's tmux window, ``s`` silence, ``v`` verdict, ``c`` closed agents, ``m`` compact, ``q`` quit.

Invariants: every string from the log is escaped (``safe``) and put in ``Text`` objects (never
parsed as markup); the app reads only the log (``Feed.poll`` every ``interval``; a commit shows
within one interval plus a render); ``NO_COLOR`` is honoured by Textual (monochrome).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, RichLog, Static, TabbedContent, TabPane

from projections import classes
from projections.present.render import record_segments
from projections.present.tables import cell, tables
from projections.text import age as fmt_age
from projections.text import safe
from watcher.board import actions, layout
from watcher.board.feed import Feed

if TYPE_CHECKING:
    from textual.widgets.data_table import CursorType

CHROME = 7         # lines the header (2), tabs (2), table header, message and footer take
FILTER = 3         # and the filter line, while shown


MONO = {"NO_COLOR": False}  # set once at start (Textual removes NO_COLOR from the environment)


def class_style(cls: str) -> str:
    """The class table's colour; with NO_COLOR no colour at all (Textual's monochrome filter would
    turn red into a dark grey that can barely be read) but an emphasis per class
    (``layout.MONO``: RECLAMA in reverse video, MAL_LANZADO underlined, ...)."""
    return layout.class_style(cls, MONO["NO_COLOR"])


def matches(row: dict[str, Any], needle: str) -> bool:
    """The filter: every word of ``needle`` in the agent's id, class, state/phase, task, reason or
    target (case-insensitive), as recorded or as shown: the board shows escapes (``wt\\x1b[1m``),
    and typing what is on the screen found nothing."""
    hay = " ".join(str(row.get(k) or "") for k in ("agent", "class", "state", "phase", "task", "reason",
                                                   "target", "dod_status"))
    shown = safe(hay)
    if shown != hay:  # something in it is shown escaped
        hay += "\n" + shown
    hay = hay.lower()
    return all(w in hay for w in needle.lower().split())


def visible(doc: dict[str, Any], needle: str, show_closed: bool) -> list[dict[str, Any]]:
    return [a for a in doc["agents"] if (show_closed or a["class"] != classes.CERRADO) and matches(a, needle)]


def header(doc: dict[str, Any], feed_note: str, width: int = 10 ** 6) -> Text:
    """Two lines, each cut to ``width`` (never wrapped): counts by class (coloured, handled ones
    counted apart); whether a watcher runs (said only when none does), the hub's health (at a
    hub), sources, notifications, log head."""
    t = layout.counts_line(doc, width, MONO["NO_COLOR"])
    t.append("\n")
    t.append_text(layout.cut(status_line(doc, feed_note), width))
    t.no_wrap, t.overflow = True, "ellipsis"
    return t


def status_line(doc: dict[str, Any], feed_note: str) -> Text:
    failed = [s for s in doc["sources"] if s.get("failed")]
    t = Text()
    if (doc.get("watcher") or {}).get("running") is False:  # classes frozen at its last tick
        t.append("watcher NOT RUNNING", style="bold red")
        t.append(" │ ")
    hub = doc.get("hub")
    if hub:
        t.append_text(hub_text(hub))
        t.append(" │ ")
    t.append("sources ")
    if failed:
        t.append(f"{len(failed)} FAILED ({cell(','.join(s['source'] for s in failed), 30)})", style="bold red")
    else:
        t.append("ok", style="" if MONO["NO_COLOR"] else "green")
    nh = doc.get("notify") or {}
    t.append(" │ push ")
    t.append(f"last {fmt_age(nh.get('last_sent_age_s'))} ago" if nh.get("last_sent") else "none yet")
    if nh.get("failures"):
        t.append(f", {nh['failures']} failing", style="bold red")
    if nh.get("silences"):
        t.append(f", {nh['silences']} silenced", style="yellow")
    t.append(f" │ head {doc['head']}", style="dim")
    if feed_note:
        t.append(f" │ {safe(feed_note, 120)}", style="yellow")
    return t


def hub_text(hub: dict[str, Any]) -> Text:
    """``projections.present.hub.hub_line``, in bold red while the hub's data is stale."""
    from projections.present.hub import hub_line

    return Text(hub_line(hub), style="bold red" if hub.get("stale") else "")


def _sig(c: Any) -> tuple[str, str]:
    """A cell's (text, style): a pair as it is, a ``Text``'s plain text and style."""
    return c if type(c) is tuple else (c.plain, str(c.style))


def _text(c: Any) -> Text:
    return Text(c[0], style=c[1]) if type(c) is tuple else c


class Ask(ModalScreen[dict[str, str] | None]):
    """A small form: one Input per field (name, label, value, placeholder); a verdict's fields
    start empty (a placeholder says what goes in: nothing is recorded that the person did not
    type); enter on the last submits, escape cancels, as the form's last line says."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, fields: list[tuple[str, ...]]) -> None:
        super().__init__()
        self.title_text, self.fields = title, fields

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Static(Text(self.title_text, style="bold"))
            for name, label, value, *hint in self.fields:
                yield Static(Text(label))
                yield Input(value=value, placeholder=hint[0] if hint else "", id=f"ask-{name}")
            yield Static(Text("enter: next field, on the last one submit · esc: cancel", style="dim"), id="ask-keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        i = inputs.index(event.input)
        if i + 1 < len(inputs):
            inputs[i + 1].focus()
            return
        self.dismiss({f[0]: self.query_one(f"#ask-{f[0]}", Input).value for f in self.fields})

    def action_cancel(self) -> None:
        self.dismiss(None)


class Board(App[None]):
    CSS_PATH = str(Path(__file__).with_name("board.tcss"))  # absolute: subclasses live elsewhere
    TITLE = "fleetwatch board"
    BINDINGS = [
        Binding("/", "filter", "filter"),
        Binding("enter", "open", "agent view", show=True, priority=False),
        Binding("j", "jump", "jump"),
        Binding("s", "silence", "silence"),
        Binding("v", "verdict", "verdict"),
        Binding("c", "toggle_closed", "closed"),
        Binding("m", "toggle_compact", "compact"),
        Binding("h", "toggle_handled", "handled"),
        Binding("escape", "clear_filter", "clear", show=False),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, feed: Feed, *, socket: str | None = None, compact: bool | None = None,
                 show_closed: bool = False, interval: float = 0.1, clock: Callable[[], float] = time.time,
                 verifier: str = "", on_jump: Callable[[str | None, str | None], actions.Outcome] | None = None):
        MONO["NO_COLOR"] = MONO["NO_COLOR"] or os.environ.get("NO_COLOR") is not None  # before Textual pops it
        super().__init__()
        self.feed, self.socket, self.clock, self.interval = feed, socket, clock, interval
        self.compact_pref, self.show_closed, self.needle = compact, show_closed, ""
        self.hide_handled = False
        self.verifier = verifier
        self.jumper = on_jump or actions.jump
        self.doc: dict[str, Any] = feed.doc(clock())
        self.rows: list[dict[str, Any]] = []
        self.grid: list[list[str]] = []
        self.compact = False
        self._drawn_at = 0.0
        self._tables: dict[str, tuple[tuple, list[str], dict]] = {}  # table -> (shape, row keys, cells)

    # ---- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="head")
        with TabbedContent(id="tabs"):
            with TabPane("Fleet", id="tab-fleet"):
                yield DataTable(id="fleet", zebra_stripes=False, cursor_type="row")
            with TabPane("Runs", id="tab-runs"):
                yield DataTable(id="runs", cursor_type="row")
            with TabPane("Missions", id="tab-missions"):
                yield DataTable(id="missions", cursor_type="row")
            with TabPane("Swarms", id="tab-swarms"):
                yield DataTable(id="swarms", cursor_type="row")
            with TabPane("Plans", id="tab-plans"):   # launch --plan: tasks by state, what waits on what
                yield DataTable(id="plans", cursor_type="row")
            with TabPane("Events", id="tab-events"):
                yield RichLog(id="events", max_lines=500, wrap=False, markup=False, highlight=False)
        yield Input(placeholder="filter: words in id, class, task, reason, target (enter: keep, esc: clear)",
                    id="filter")
        yield Static(id="msg")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.feed.poll()
        log = self.query_one("#events", RichLog)
        for rec in self.feed.recent:
            log.write(Text.assemble(*record_segments(rec)))
        self.redraw()
        self.query_one("#fleet", DataTable).focus()
        self.set_interval(self.interval, self.tick)

    # ---- following the log -----------------------------------------------------------------
    def tick(self) -> None:
        """Fold new commits; redraw when something came in, or once a second (ages move). A
        tick that finds the board's widgets gone does nothing: the app is closing (its interval
        can fire once more while the screen is torn down; CI saw NoMatches '#head' there)."""
        try:
            self._tick()
        except NoMatches:
            if self.query("#head"):   # the widgets are there: a real bug, not the teardown
                raise

    def _tick(self) -> None:
        n = self.feed.poll()
        if n:
            log = self.query_one("#events", RichLog)
            recent = list(self.feed.recent)
            for rec in recent[-min(n, len(recent)):]:
                log.write(Text.assemble(*record_segments(rec)))
        if n or self.clock() - self._drawn_at >= 1.0:
            self.redraw()

    def redraw(self) -> None:
        self._drawn_at = self.clock()
        self.doc = self.feed.doc(self._drawn_at)
        self.query_one("#head", Static).update(header(self.doc, self.feed.note, max(20, self.size.width - 2)
                                                      if self.size.width else 10 ** 6))
        self.rows = [a for a in visible(self.doc, self.needle, self.show_closed)
                     if not (self.hide_handled and a.get("handled"))]
        chrome = CHROME + (FILTER if self.query_one("#filter", Input).display else 0)
        fit = max(1, self.size.height - chrome) if self.size.height else 10 ** 6
        self.compact = self.compact_pref if self.compact_pref is not None else len(self.rows) > fit
        self._fill_fleet()
        for title, _, _ in (("Runs", 0, 0), ("Missions", 0, 0), ("Swarms", 0, 0), ("Plans", 0, 0)):
            self._fill_other(title)

    def _fill_fleet(self) -> None:
        keep = self.selected()
        width, mono, now = self.size.width or 120, MONO["NO_COLOR"], self._drawn_at
        if self.compact:
            per, w = layout.per_line(width), layout.cell_width(width)
            idw = layout.id_width(self.rows, max(8, w - 30))
            self.grid = [[a["agent"] for a in self.rows[i:i + per]] for i in range(0, len(self.rows), per)]
            rows = []
            for r, i in enumerate(range(0, len(self.rows), per)):
                cells = [layout.tile(a, w, now, mono, idw) for a in self.rows[i:i + per]]
                rows.append((f"r{r}", [*cells, *[Text("")] * (per - len(cells))]))
            self._apply("fleet", ("compact", per, w), [(" ", f"c{i}", w) for i in range(per)], rows,
                        cursor="cell", header=False)
        else:
            self.grid = []
            cols = layout.columns(width - 2, max((len(cell(a["agent"], 80)) for a in self.rows), default=8))
            rows = [(a["agent"], layout.row_cells(a, cols, now, mono)) for a in self.rows]
            self._apply("fleet", ("rows", *cols), [(h, k, w) for k, h, w in cols], rows, cursor="row", header=True,
                        order_by="agent" if any(k == "agent" for k, _, _ in cols) else None)
        if keep:
            self.select(keep)

    def _fill_other(self, title: str) -> None:
        sect = {ti: (h, rows) for ti, h, rows in tables(self.doc)}.get(title)
        if not sect:
            self._apply(title.lower(), ("none",), [(f"no {title.lower()} in the log", "none", None)], [])
            return
        head, rows = sect
        self._apply(title.lower(), ("cols", *head), [(h, h, None) for h in head],
                    [(f"{title}:{i}", [(c, "") for c in r]) for i, r in enumerate(rows)])

    def _apply(self, table_id: str, shape: tuple, columns: list[tuple[str, str, int | None]],
               rows: list[tuple[str, list[Any]]], cursor: CursorType = "row", header: bool = True,
               order_by: str | None = None) -> None:
        """Show ``rows`` in a table, touching only what changed: with the same shape and the same
        row keys, changed cells are updated in place and a new order is a ``sort`` on the
        ``order_by`` column (whose texts must be unique); anything else re-adds the rows (and the
        columns when the shape changed). A class change in a 1,000-agent fleet costs one sort,
        not a rebuild. A cell is a ``Text`` or its (text, style) pair; a pair becomes a ``Text``
        only when it is shown (a redraw with nothing changed makes none: at 300 agents that was
        ~2,700 of them, most of a redraw)."""
        t = self.query_one(f"#{table_id}", DataTable)
        sig = {k: [_sig(c) for c in cells] for k, cells in rows}
        keys = [k for k, _ in rows]
        old_shape, old_keys, old_sig = self._tables.get(table_id, ((), [], {}))
        if old_shape != shape:
            t.clear(columns=True)
            for label, key, width in columns:
                t.add_column(label, key=key, width=width)
            t.cursor_type, t.show_header = cursor, header
        col = [k for _, k, _ in columns].index(order_by) if order_by else None
        pos = {_sig(cells[col])[0]: i for i, (_, cells) in enumerate(rows)} if col is not None else {}
        same_set = old_shape == shape and len(keys) == len(old_keys) and set(keys) == set(old_keys)
        if same_set and (keys == old_keys or len(pos) == len(keys)):
            for key, cells in rows:
                for (_, ckey, _), c, n, w in zip(columns, cells, sig[key], old_sig[key]):
                    if n != w:
                        t.update_cell(key, ckey, _text(c))
            if keys != old_keys and order_by is not None:   # a new order of the same keys: pos is whole
                t.sort(order_by, key=lambda v: pos[v.plain])
        else:
            if old_shape == shape:
                t.clear()
            for key, cells in rows:
                t.add_row(*map(_text, cells), key=key)
        self._tables[table_id] = (shape, keys, sig)

    # ---- selection -------------------------------------------------------------------------
    def selected(self) -> str | None:
        """The agent under the cursor (row or tile), or None."""
        t = self.query_one("#fleet", DataTable)
        if not t.row_count:
            return None
        r, c = t.cursor_coordinate
        if self.grid:
            return self.grid[r][c] if r < len(self.grid) and c < len(self.grid[r]) else None
        return self.rows[r]["agent"] if 0 <= r < len(self.rows) else None

    def select(self, agent: str) -> None:
        t = self.query_one("#fleet", DataTable)
        for r, line in enumerate(self.grid or [[a["agent"]] for a in self.rows]):
            if agent in line:
                t.move_cursor(row=r, column=line.index(agent) if self.grid else 0, animate=False)
                return

    def say(self, text: str, ok: bool = True) -> None:
        self.query_one("#msg", Static).update(Text(safe(text, 300), style="" if ok else "bold red"))

    # ---- actions ---------------------------------------------------------------------------
    def action_filter(self) -> None:
        f = self.query_one("#filter", Input)
        f.display = True
        self.screen.set_focus(f)  # now, not later: the keys typed right after `/` are the filter's

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.needle = event.value
            self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.display = bool(self.needle)
            self.query_one("#fleet", DataTable).focus()

    def action_clear_filter(self) -> None:
        f = self.query_one("#filter", Input)
        f.value, self.needle, f.display = "", "", False
        self.redraw()
        self.query_one("#fleet", DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "fleet":
            self.action_open()

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        if event.data_table.id == "fleet":
            self.action_open()

    def action_open(self) -> None:
        """The agent view of the selected agent; its keys act on that agent."""
        from watcher.board.agent import AgentView, gather, lines

        a = self.row(self.selected())
        if a is None:
            self.say("no agent selected", ok=False)
            return
        try:
            ev = gather(self.feed.log, a["agent"], self.feed.known_agents().get(a["agent"]))
        except Exception as e:  # a log that cannot be read now: the view shows what the doc has
            ev = {"classes": [], "dod": [], "acks": [], "silences": []}
            self.say(f"{a['agent']}: history not read: {type(e).__name__}", ok=False)

        def then(what: str | None) -> None:
            act = {"jump": self.action_jump, "verdict": self.action_verdict, "silence": self.action_silence}.get(what or "")
            if act is not None:
                act()

        self.push_screen(AgentView(lines(a, ev, self._drawn_at, MONO["NO_COLOR"])), then)

    def action_toggle_handled(self) -> None:
        self.hide_handled = not self.hide_handled
        self.say("handled agents hidden (h shows them)" if self.hide_handled else "handled agents shown")
        self.redraw()

    def row(self, agent: str | None) -> dict[str, Any] | None:
        return next((a for a in self.doc["agents"] if a["agent"] == agent), None)

    def action_jump(self) -> None:
        a = self.row(self.selected())
        if a is None:
            self.say("no agent selected", ok=False)
            return
        out = self.jumper(a.get("target"), self.socket)
        self.say(f"{a['agent']}: {out.message}", out.ok)

    def action_toggle_closed(self) -> None:
        self.show_closed = not self.show_closed
        self.redraw()

    def action_toggle_compact(self) -> None:
        self.compact_pref = not self.compact
        self.redraw()

    def _ask(self, title: str, fields: list[tuple[str, ...]],
             then: Callable[[str, dict[str, str]], actions.Outcome]) -> None:
        """Ask about the selected agent; ``then(agent, answers)`` acts and its outcome is shown."""
        agent = self.selected()
        if agent is None:
            self.say("no agent selected", ok=False)
            return

        def done(ans: dict[str, str] | None) -> None:
            if ans:
                out = then(agent, ans)
                self.say(f"{agent}: {out.message}", out.ok)

        self.push_screen(Ask(f"{title} {safe(agent, 60)}", fields), done)

    def action_silence(self) -> None:
        def then(agent: str, ans: dict[str, str]) -> actions.Outcome:
            from events.errors import ConfigError
            from watcher.config import parse_duration

            try:
                secs = parse_duration(ans["for"].strip(), "for")
            except ConfigError as e:
                return actions.Outcome(False, f"silence: {e}")
            return actions.silence(self.feed.path, agent, secs, ans.get("reason") or "from the board")

        self._ask("silence", [("for", "for how long (30m, 2h, 1d)", "1h"), ("reason", "why (optional)", "")], then)

    def action_verdict(self) -> None:
        self._ask("verdict on the DoD of", [
            ("verdict", "verdict", "", "met | failed | unevaluable"),
            ("verifier", "verifier id (not the agent)", "", f"who checked, e.g. {self.verifier}" if self.verifier else "who checked"),
            ("evidence", "what you ran and what it showed", "", "e.g. pytest green, curl gives 302")],
            lambda agent, ans: actions.verdict(self.feed.path, agent, ans["verdict"], ans["verifier"], ans["evidence"]))

    def on_resize(self) -> None:
        self.redraw()

    def on_unmount(self) -> None:
        self.feed.close()
