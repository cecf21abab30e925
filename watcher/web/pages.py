"""HTML of the phone pages: small, no JavaScript, every value escaped.

Agent-controlled strings go through ``projections.text.safe`` (controls and bidi overrides as
visible escapes) and then ``markupsafe.escape`` (HTML). Buttons are ``<form method="post">``
carrying the signed token in a hidden field; the pages send no referrer (the token is in the URL)
and a CSP that allows no script at all. A page is bounded whatever the fleet: at most
``MAX_ITEMS`` items of a notice and ``MAX_ROWS`` agents per class, then "… and N more".
"""
from __future__ import annotations

from markupsafe import Markup, escape

from projections.classes import LABEL, ORDER, rank
from projections.text import age, safe

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
ATTENTION = ("RECLAMA", "DICE_TERMINADO", "ESTANCADO", "MAL_LANZADO")
ACTIONS = (("ack", "Acknowledge"), ("snooze", "Snooze 1h"), ("silence", "Silence agent 1d"))
MAX_ITEMS = 100   # a notice's items shown; the buttons still act on all of them
MAX_ROWS = 50     # agents shown per class on the fleet page (a phone page stays small and quick)
DONE = {"ack": "Acknowledged: no repeat, no escalation.", "snooze": "Snoozed for 1 hour.",
        "silence": "Silenced for 1 day."}

_CSS = """
body{font:16px/1.4 system-ui,sans-serif;margin:0;padding:12px;max-width:40em;background:#fafafa;color:#111}
h1{font-size:1.2em;margin:.2em 0 .6em} h2{font-size:1em;margin:1em 0 .3em;color:#555}
ul{list-style:none;padding:0;margin:0} li{background:#fff;border-radius:8px;padding:10px;margin:6px 0;
box-shadow:0 1px 2px #0002} .cls{font-weight:600} .RECLAMA{color:#b00} .ESTANCADO{color:#a60}
.DICE_TERMINADO{color:#077} .MAL_LANZADO{color:#a0a} .muted{color:#777;font-size:.9em}
form{display:block;margin:8px 0} button{width:100%;font-size:1.1em;padding:14px;border-radius:8px;
border:1px solid #888;background:#fff} button.primary{background:#134;color:#fff;border-color:#134}
.done{background:#e6f4e6;border-radius:8px;padding:10px;margin:8px 0} a{color:#134}
"""


def _doc(title: str, body: Markup) -> str:
    return str(Markup("<!doctype html><html lang=en><head><meta charset=utf-8>"
                      "<meta name=viewport content='width=device-width,initial-scale=1'>"
                      "<meta name=referrer content=no-referrer><title>{}</title><style>{}</style></head>"
                      "<body>{}</body></html>").format(title, Markup(_CSS), body))


def _text(value: object, limit: int = 120) -> Markup:
    return escape(safe(value, limit))


def notice_page(notice: str, token: str, items: list[dict], now: float, done: str = "", base: str = "") -> str:
    """The page of one notice: its items, then Acknowledge / Snooze 1h / Silence agent 1d.
    ``base``: the path ``[web] public_url`` puts before ``/n/`` (a reverse proxy's prefix)."""
    rows = []
    for it in items[:MAX_ITEMS]:
        status = it.get("status", "")
        rows.append(Markup("<li><span class='cls {}'>{}</span> {} <span class=muted>· {}</span>{}"
                           "<div class=muted>{}</div></li>").format(
            escape(it["cls"]), _text(it["cls"], 40), _text(it["name"], 80), age(now - it["since"]),
            Markup(" · {}").format(_text(it["text"], 200)) if it.get("text") else "", escape(status)))
    rows += _more(len(items) - MAX_ITEMS, "the buttons act on all of them")
    forms = [Markup("<form method=post action='{}/n/{}/{}'><input type=hidden name=t value='{}'>"
                    "<button type=submit name=action value='{}' class='{}'>{}</button></form>").format(
        base, notice, action, token, action, "primary" if action == "ack" else "", label) for action, label in ACTIONS]
    banner = Markup("<div class=done role=status>{}</div>").format(DONE[done]) if done in DONE else ""
    body = Markup("<h1>fleetwatch · {} item(s)</h1>{}<ul>{}</ul>{}<p><a href='{}/n/{}/fleet?t={}'>The whole fleet"
                  "</a></p><p class=muted>notice {}</p>").format(
        len(items), banner, Markup("").join(rows) or Markup("<li>nothing open any more</li>"),
        Markup("").join(forms), base, notice, token, notice)
    return _doc(f"fleetwatch: {len(items)} item(s)", body)


def fleet_page(agents: dict[str, dict], now: float, back: str, today: str = "") -> str:
    """What needs you (RECLAMA, claims done, stalled, mislaunched), then the rest by class;
    ``today`` is the report's one line for today (``projections.report_view.today_line``)."""
    by: dict[str, list[tuple[str, dict]]] = {}
    for aid, a in agents.items():
        if a.get("class") != "CERRADO":
            by.setdefault(a.get("class") or "?", []).append((aid, a))
    sections = []
    for cls in sorted(by, key=lambda c: (c not in ATTENTION, rank(c), c)):
        rows = [Markup("<li><span class='cls {}'>{}</span> <span class=muted>· {} · {}</span></li>").format(
            escape(cls), _text(aid, 80), age(now - _t(a.get("since"))), _text(a.get("task") or a.get("phase") or "-"))
            for aid, a in sorted(by[cls], key=lambda x: x[0])[:MAX_ROWS]]
        rows += _more(len(by[cls]) - MAX_ROWS, "`fleetwatch status` on the host lists them all")
        sections.append(Markup("<h2 class='{}'>{} · {}</h2><ul>{}</ul>").format(
            escape(cls), escape(LABEL.get(cls, cls.lower())), len(by[cls]), Markup("").join(rows)))
    need = sum(len(by.get(c, [])) for c in ATTENTION)
    body = Markup("<h1>fleet · {} need attention · {} agents</h1>{}{}"
                  "<p><a href='{}'>Back to the notice</a></p>").format(
        need, sum(len(v) for v in by.values()),
        Markup("<p class='muted today'>{}</p>").format(_text(today, 200)) if today else "",
        Markup("").join(sections) or Markup("<p>no agents</p>"), back)
    return _doc("fleetwatch fleet", body)


def _more(n: int, where: str) -> list[Markup]:
    return [Markup("<li class=muted>… and {} more ({})</li>").format(n, where)] if n > 0 else []


def _t(since: object) -> float:
    if isinstance(since, (int, float)):
        return float(since)
    from events.timefmt import parse_iso

    try:
        return parse_iso(str(since))
    except (ValueError, TypeError):
        return 0.0


def plain(code: int, text: str) -> str:
    return _doc(f"{code}", Markup("<h1>{}</h1><p>{}</p>").format(code, text))


__all__ = ["notice_page", "fleet_page", "plain", "HEADERS", "ORDER"]
