"""HTML of the phone pages: small, no JavaScript, every value escaped.

Agent-controlled strings go through ``projections.text.safe`` (controls and bidi overrides as
visible escapes) and then ``markupsafe.escape`` (HTML). Buttons are ``<form method="post">``
carrying the signed token in a hidden field; the pages send no referrer (the token is in the URL)
and a CSP that allows no script at all. A page is bounded whatever the fleet: at most
``MAX_ITEMS`` items of a notice and ``MAX_ROWS`` agents per class, then "… and N more".
"""
from __future__ import annotations

from markupsafe import Markup, escape

from projections.classes import DICE_TERMINADO, LABEL, ORDER, TRABAJANDO, WEB
from projections.text import age, safe
from projections.present.views import HANDLED_MARK, agents_view, fleet_sections, handled_words, since_s
from projections.fleet.waiting import words

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
ACTIONS = (("ack", "Acknowledge"), ("snooze", "Snooze 1h"), ("silence", "Silence agent 1d"))
ITEM_ACTIONS = ACTIONS[:2]   # per item: Acknowledge, Snooze 1h
SILENCE_ALL = "Silence all agents 1d"   # the silence button of a notice of several items
MAX_ITEMS = 100   # a notice's items shown; the buttons still act on all of them
MAX_ROWS = 50     # agents shown per class on the fleet page (a phone page stays small and quick)
MAX_ITEM_FORMS = 20   # a notice of more items has only the all-at-once buttons (the page stays small)
# the banner after a tap: recorded (DONE) or why nothing was (REFUSED); never a banner without its event
DONE = {"ack": "Acknowledged: no repeat, no escalation.", "snooze": "Snoozed for 1 hour.",
        "silence": "Silenced for 1 day."}
REFUSED = {"already": "Nothing recorded: already handled that way.",
           "nothing-open": "Nothing recorded: nothing of this notice is open any more.",
           "unknown": "Nothing recorded: this notice's items are not known yet; try again in a moment."}

_CSS = """
body{font:16px/1.4 system-ui,sans-serif;margin:0;padding:12px;max-width:40em;background:#fafafa;color:#111}
h1{font-size:1.2em;margin:.2em 0 .6em} h2{font-size:1em;margin:1em 0 .3em;color:#555}
ul{list-style:none;padding:0;margin:0} li{background:#fff;border-radius:8px;padding:10px;margin:6px 0;
box-shadow:0 1px 2px #0002} .cls{font-weight:600} .muted{color:#777;font-size:.9em}
form{display:block;margin:8px 0} button{width:100%;font-size:1.1em;padding:14px;border-radius:8px;
border:1px solid #888;background:#fff} button.primary{background:#134;color:#fff;border-color:#134}
.done{background:#e6f4e6;border-radius:8px;padding:10px;margin:8px 0} a{color:#134}
.refused{background:#fdf0d5;border-radius:8px;padding:10px;margin:8px 0}
.item form{display:inline-block;width:48%;margin:6px 1% 0 0} .item button{font-size:.95em;padding:8px}
.handled{color:#285;font-size:.9em} .hub{font-size:.9em;color:#555} .hub.stale{color:#b00;font-weight:600}
""" + "".join(f".{c}{{color:{colour}}}" for c, colour in WEB.items()) + "\n"   # the class table's colours


def _doc(title: str, body: Markup) -> str:
    return str(Markup("<!doctype html><html lang=en><head><meta charset=utf-8>"
                      "<meta name=viewport content='width=device-width,initial-scale=1'>"
                      "<meta name=referrer content=no-referrer><title>{}</title><style>{}</style></head>"
                      "<body>{}</body></html>").format(title, Markup(_CSS), body))


def _text(value: object, limit: int = 120) -> Markup:
    return escape(safe(value, limit))


def _form(base: str, notice: str, action: str, label: str, token: str, items: str, item: str = "",
          primary: bool = False) -> Markup:
    return Markup("<form method=post action='{}/n/{}/{}'><input type=hidden name=t value='{}'>{}{}"
                  "<button type=submit name=action value='{}' class='{}'>{}</button></form>").format(
        base, notice, action, token,
        Markup("<input type=hidden name=c value='{}'>").format(items) if items else "",
        Markup("<input type=hidden name=item value='{}'>").format(item) if item else "",
        action, "primary" if primary else "", label)


def notice_page(notice: str, token: str, items: list[dict], now: float, done: str = "", base: str = "",
                c: str = "") -> str:
    """The page of one notice: its items (what each waits for, its task, how it was handled),
    each open one with its own Acknowledge / Snooze 1h (up to ``MAX_ITEM_FORMS`` items), then
    the same for all at once and Silence agent 1d. ``base``: the path ``[web] public_url`` puts before ``/n/`` (a reverse proxy's
    prefix); ``c``: the link's signed list of the notice's conditions, carried by every form."""
    rows = []
    for it in items[:MAX_ITEMS]:
        status = it.get("status", "")
        own = Markup("").join(_form(base, notice, a, label, token, c, it["item"]) for a, label in ITEM_ACTIONS) \
            if it.get("item") and status == "open" and len(items) <= MAX_ITEM_FORMS else ""
        rows.append(Markup("<li class=item><span class='cls {}'>{}</span> {} <span class=muted>· {}</span>{}{}"
                           "<div class='muted status'>{}</div>{}</li>").format(
            escape(it["cls"]), _text(it["cls"], 40), _text(it["name"], 80), age(now - it["since"]),
            Markup(" · {}").format(_text(it["text"], 200)) if it.get("text") else "",
            Markup("<div class=task>task: {}</div>").format(_text(it["task"], 80)) if it.get("task") else "",
            escape(status), own))
    rows += _more(len(items) - MAX_ITEMS, "the buttons act on all of them")
    # every button acts on every item: on several, each label says so (silence: every agent of them)
    forms = [_form(base, notice, action, (SILENCE_ALL if action == "silence" else label + " all")
                   if len(items) > 1 else label, token, c, primary=action == "ack") for action, label in ACTIONS]
    banner = (Markup("<div class=done role=status>{}</div>").format(DONE[done]) if done in DONE else
              Markup("<div class=refused role=status>{}</div>").format(REFUSED[done]) if done in REFUSED else "")
    fleet = f"{base}/n/{notice}/fleet?t={token}" + (f"&c={c}" if c else "")
    body = Markup("<h1>fleetwatch · {} item(s)</h1>{}<ul>{}</ul>{}<p><a href='{}'>The whole fleet"
                  "</a></p><p class=muted>notice {}</p>").format(
        len(items), banner, Markup("").join(rows) or Markup(
            "<li>Nothing of this notice is known here yet (its push may still be on its way): reload in a "
            "moment, or open the whole fleet.</li>"),
        Markup("").join(forms), fleet, notice)
    return _doc(f"fleetwatch: {len(items)} item(s)", body)


def fleet_page(states: dict, now: float, back: str, today: str = "", hub: str = "", stale: bool = False) -> str:
    """What needs you, then the rest by class: ``projections.present.views.fleet_sections`` (the rows
    `status --json` and the summary show: a met claim of done needs nobody), each agent with
    what it waits for, its task and how it was handled (the unhandled first); ``today`` is the
    report's one line for today (``projections.report.view.today_line``); ``hub`` the hub's health
    (``projections.present.hub.hub_line``), ``stale`` when its data is as of an earlier time."""
    sections, need, total = [], 0, 0
    for cls, needs, rows in fleet_sections(agents_view(states, now)):
        total += len(rows)
        need += len(rows) if needs else 0
        label = LABEL.get(cls, cls.lower()) if needs or cls != DICE_TERMINADO else "done, DoD met"
        items = [_agent(r, now) for r in rows[:MAX_ROWS]]
        items += _more(len(rows) - MAX_ROWS, "`fleetwatch status` on the host lists them all")
        sections.append(Markup("<h2 class='{}'>{} · {}</h2><ul>{}</ul>").format(
            escape(cls), escape(label), len(rows), Markup("").join(items)))
    body = Markup("<h1>fleet · {} need attention · {} agents</h1>{}{}{}"
                  "<p><a href='{}'>Back to the notice</a></p>").format(
        need, total, Markup("<p class='hub{}'>{}</p>").format(" stale" if stale else "", _text(hub, 300)) if hub else "",
        Markup("<p class='muted today'>{}</p>").format(_text(today, 200)) if today else "",
        Markup("").join(sections) or Markup("<p>no agents</p>"), back)
    return _doc("fleetwatch fleet", body)


def _agent(r: dict, now: float) -> Markup:
    """One agent of the fleet page: id, age, what it waits for (or its reason), task, handled."""
    h = r.get("handled")
    what = words(r.get("waiting_for")) or (r.get("reason") if r["class"] != TRABAJANDO else "") or ""
    return Markup("<li><span class='cls {}'>{}</span> <span class=muted>· {}{} · {}</span>{}</li>").format(
        escape(r["class"]), _text(r["agent"], 80), age(since_s(r.get("since"), now)),
        Markup(" · {}").format(_text(what, 80)) if what else "", _text(r.get("task") or r.get("phase") or "-"),
        Markup("<div class=handled>{} {}</div>").format(HANDLED_MARK.get(h["how"], ""), _text(handled_words(h, now)))
        if h else "")


def expired(notice: str) -> str:
    """An expired link's page: the way on, without a fresh token (an old link never makes one)."""
    return _doc("410", Markup("<h1>This link has expired</h1><p>Links work for <code>[web] token_ttl</code> "
                              "(24 h by default). The newest push carries a fresh link: open it, and "
                              "<b>The whole fleet</b> from there shows every agent. On the host: "
                              "<code>fleetwatch ack {}</code> or <code>fleetwatch summary</code>.</p>").format(notice))


def _more(n: int, where: str) -> list[Markup]:
    return [Markup("<li class=muted>… and {} more ({})</li>").format(n, where)] if n > 0 else []


def plain(code: int, text: str) -> str:
    return _doc(f"{code}", Markup("<h1>{}</h1><p>{}</p>").format(code, text))


__all__ = ["notice_page", "fleet_page", "expired", "plain", "HEADERS", "ORDER"]
