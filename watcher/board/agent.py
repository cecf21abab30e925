"""The board's agent view (``enter`` on an agent): everything the log says about one agent.

Its target and class; its contract (digest, length, changes) and checks with their last outcome;
the last verdict (who, when, what was checked); its class history; its handling now (ack, snooze
or silence) and the acks and silences that named it. ``j`` jumps to its tmux window, ``v``
records a verdict, ``s`` silences it, ``escape`` closes. Read from the followed log only
(``watcher.runtime.about``: the events about the agent, the same ones `tail --subject` shows).

Invariants: every string from the log is escaped (``safe``/``cell``) and put in ``Text`` (never
markup); the reads are bounded (the last ``HISTORY`` events of each kind).
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from projections.present.render import fields_of
from projections.present.tables import cell, dod_cell
from projections.text import age as fmt_age
from watcher.board.layout import class_style, handled_mark, need

HISTORY = 12


def gather(log: Any, agent: str, record: Any = None) -> dict[str, Any]:
    """The last events about ``agent`` by kind: classes, dod, acks, silences (oldest first), and
    ``record``: its fleet record (the contract's digest and length)."""
    from watcher.runtime.about import last_about

    get = getattr(record, "get", None)
    out: dict[str, Any] = {"classes": [], "dod": [], "acks": [], "silences": [],
                           "record": {k: get(k) for k in ("contract_sha256", "contract_len")} if get else {}}
    if log is None:
        return out
    out["classes"] = log.last(HISTORY, types=["agent.classified"], subject=f"agent:{agent}", exact=True)
    out["dod"] = log.last(HISTORY, subject=f"dod:{agent}", exact=True)
    subjects = {f"agent:{agent}", f"dod:{agent}"}
    out["acks"] = last_about(log, HISTORY, ["notice.acked"], subjects)
    out["silences"] = last_about(log, HISTORY, ["silence.added"], subjects)
    return out


def lines(a: dict[str, Any], ev: dict[str, Any], now: float, mono: bool) -> Text:
    """The view's text."""
    t = Text()

    def head(title: str) -> None:
        t.append(f"\n{title}\n", style="bold underline")

    t.append(cell(a["agent"], 80), style="bold")
    t.append("  ")
    t.append(cell(a["class"], 20), style=class_style(a["class"], mono))
    t.append(f" for {fmt_age(a.get('age_s'))}")
    if need(a):
        t.append(f": {cell(need(a), 120)}")
    t.append(f"\ntarget {cell(a.get('target'), 80)}   task {cell(a.get('task'), 120)}\n")
    t.append(f"state/phase {cell(a.get('state'), 20)}/{cell(a.get('phase'), 20)}   "
             + (f"last activity {fmt_age(a['activity_age_s'])} ago   " if a.get("activity_age_s") is not None else "")
             + f"source {cell(a.get('source'), 30)}\n")
    d = a.get("dod") or {}
    head("Contract and checks")
    rec = ev.get("record") or {}
    sha, n = rec.get("contract_sha256"), rec.get("contract_len")
    t.append((f"contract sha256 {cell(sha, 80)[:12]}…, {n} characters" if sha else "no contract recorded")
             + f"; changed {d.get('contract_changes') or 0} time(s)\n")
    t.append(f"DoD {cell(dod_cell(a), 120)}\n")
    for c in d.get("checks") or []:
        t.append(f"  check {cell(c.get('id'), 40)}: {cell(c.get('status'), 20)}\n")
    for rec in ev["dod"]:
        if rec.type == "dod.contract_changed":
            t.append(f"  {cell(rec.time, 30)} contract changed\n", style="dim")
    head("Last verdict")
    if d.get("verdict"):
        t.append(f"{cell(d['verdict'], 20)} by {cell(d.get('verifier'), 60)} at {cell(d.get('verdict_at'), 30)}\n")
        last = next((r for r in reversed(ev["dod"]) if r.type == "dod.verdict"), None)
        if last is not None:
            t.append(f"  evidence: {cell(fields_of(last.event).get('evidence'), 200)}\n", style="dim")
    else:
        t.append("none yet\n", style="dim")
    head("Class history")
    for rec in ev["classes"]:
        f = fields_of(rec.event)
        t.append(f"{cell(rec.time, 30)} {cell(f.get('from') or 'new', 20)} -> ")
        t.append(cell(f.get("to"), 20), style=class_style(str(f.get("to")), mono))
        t.append(f"  {cell(f.get('reason'), 80)}\n")
    head("Handled")
    t.append((cell(handled_mark(a, now, True), 120) or "not handled") + "\n")
    for rec in ev["acks"]:
        f = fields_of(rec.event)
        t.append(f"{cell(rec.time, 30)} acked via {cell(f.get('via'), 20)}"
                 + (f" until {cell(f.get('until'), 30)}" if f.get("until") else " (until it clears)") + "\n")
    for rec in ev["silences"]:
        f = fields_of(rec.event)
        t.append(f"{cell(rec.time, 30)} silence {cell(f.get('silence'), 20)} until {cell(f.get('until'), 30)}"
                 f" ({cell(f.get('reason'), 80)})\n")
    t.append("\nj jump to its window · v verdict · s silence · esc close", style="dim")
    return t


class AgentView(ModalScreen[str | None]):
    """Dismissed with the key's action ("jump", "verdict", "silence") or None (closed)."""

    BINDINGS = [Binding("escape", "close", "close"), Binding("q", "close", "close", show=False),
                Binding("j", "pick('jump')", "jump"), Binding("v", "pick('verdict')", "verdict"),
                Binding("s", "pick('silence')", "silence")]

    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="agent-view"):
            yield Static(self.text, id="agent-text")

    def action_close(self) -> None:
        self.dismiss(None)

    def action_pick(self, what: str) -> None:
        self.dismiss(what)
