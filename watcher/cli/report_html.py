"""``fleetwatch report --html FILE``: one self-contained page with charts.

Charts are drawn by matplotlib (the ``report`` extra) as inline SVG — no JavaScript, no build
step, no file beside the page: DoD met (and failed) per day, agent-hours waiting on the human per
day, pushes per hour of day. Every string on the page goes through ``_e``: controls, bidi
overrides and zero-width characters as visible escapes (``projections.text.safe``), then HTML
escaping. A regular file (or nothing) at FILE is written atomically (temp file + rename), so a
reader never sees half a page, and a symlink there is replaced, never followed; a FIFO or a
terminal (``/dev/stdout``) is written to as a shell redirection would; a folder or any other kind
of file is a clear error (so ``--html /dev/null`` run as root never replaces the device).
"""
from __future__ import annotations

import errno
import html
import io
import os
import stat
import tempfile
from typing import Any

from events.errors import FleetwatchError
from projections import classes
from projections.text import safe


MAX_BARS = 120     # bars per chart (days summed k at a time beyond that)
MAX_LABELS = 20    # labelled bars per chart


def _e(value: object, limit: int | None = None) -> str:
    """One inert line of HTML text: visible escapes for controls and bidi, then HTML-escaped."""
    return html.escape(safe(value, limit))


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]          # drop the XML prolog and doctype: inline in HTML


def bins(days: list[dict]) -> tuple[int, list[dict]]:
    """(k, the days summed k at a time) with at most ``MAX_BARS`` bars: a range of years (a log
    with one event from a wrong clock) is a chart of ``MAX_BARS`` bars, not one bar a day."""
    k = max(1, -(-len(days) // MAX_BARS))
    if k == 1:
        return 1, days
    return k, [{"day": days[i]["day"], **{f: sum(d[f] for d in days[i:i + k]) for f in ("met", "failed", "reclama_s")}}
               for i in range(0, len(days), k)]


def charts(fig: dict[str, Any]) -> dict[str, str]:
    """{chart id: inline SVG} for the three charts."""
    try:
        import matplotlib

        matplotlib.use("Agg")                 # no display; deterministic SVG output
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise FleetwatchError("the HTML report needs matplotlib", op="report --html",
                              hint="pip install 'fleetwatch[report]'") from e
    k, days = bins(fig["days"])
    per = "day" if k == 1 else f"{k} days"
    years = len({d["day"][:4] for d in days}) > 1
    step = max(1, -(-len(days) // MAX_LABELS))
    x = list(range(len(days)))
    ticks = x[::step]
    labels = [days[i]["day"] if years else days[i]["day"][5:] for i in ticks]
    out = {}
    plt.rcParams.update({"svg.hashsalt": "fleetwatch", "font.size": 9})

    f = dod_chart(plt, days, per, ticks, labels)
    out["dod"] = _svg(f)
    plt.close(f)

    f, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(x, [d["reclama_s"] / 3600.0 for d in days], color="#ef6c00")
    ax.set_title(f"Agent-hours waiting on you per {per} (RECLAMA)")
    ax.set_xticks(ticks, labels, rotation=45 if len(ticks) > 10 else 0)
    out["waiting"] = _svg(f)
    plt.close(f)

    f, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(range(24), fig["load"]["pushes_by_hour"], color="#1565c0")
    ax.set_title("Pushes per hour of day (UTC)")
    ax.set_xticks(range(0, 24, 2))
    out["hours"] = _svg(f)
    plt.close(f)
    return out


def dod_chart(plt: Any, days: list[dict], per: str, ticks: list[int], labels: list[str]) -> Any:
    """The verdicts chart; its legend stands right of the axes, never over the bars."""
    f, ax = plt.subplots(figsize=(7, 2.6))
    x = list(range(len(days)))
    ax.bar(x, [d["met"] for d in days], color="#2e7d32", label="met")
    ax.bar(x, [d["failed"] for d in days], bottom=[d["met"] for d in days], color="#c62828", label="failed")
    ax.set_title(f"DoD verdicts per {per}")
    ax.set_xticks(ticks, labels, rotation=45 if len(ticks) > 10 else 0)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return f


def page(fig: dict[str, Any], note: str = "") -> str:
    e = _e
    d, ld = fig["dod"], fig["load"]
    rate = "–" if d["false_done_rate"] is None else f"{d['false_done_rate'] * 100:.0f} %"
    tiles = [("DoD met", d["met"]), ("failed", d["failed"]), ("false done", rate),
             ("never verified", d["never_verified"]), ("pushes", ld["pushes"]),
             ("hours waiting on you", f"{ld['reclama']['agent_hours']:.1f}"), ("stalls", fig["stalls"]["episodes"])]
    tile_html = "".join(f'<div class="tile"><b>{e(str(v))}</b><span>{e(k)}</span></div>' for k, v in tiles)
    rows = "".join(
        f"<tr><td>{e(a, 80)}</td><td>{v['claims']}</td><td>{v['met']}</td><td>{v['failed']}</td>"
        f"<td>{round(v['seconds'].get(classes.RECLAMA, 0) / 60)}</td></tr>" for a, v in fig["agents"].items())
    svgs = charts(fig)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetwatch report</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em;max-width:60em;color:#222}}
.tiles{{display:flex;flex-wrap:wrap;gap:.6em}}.tile{{border:1px solid #ddd;border-radius:6px;padding:.5em .8em}}
.tile b{{display:block;font-size:1.6em}}.tile span{{color:#666;font-size:.85em}}
figure{{margin:1em 0}}figure svg{{max-width:100%;height:auto}}table{{border-collapse:collapse}}
.warn{{background:#fff3e0;border-left:4px solid #ef6c00;padding:.4em .8em}}
td,th{{border-bottom:1px solid #eee;padding:.2em .6em;text-align:right}}td:first-child,th:first-child{{text-align:left}}</style>
</head><body>
<h1>fleetwatch report</h1>
<p>{e(fig['range']['days'])} day{'' if fig['range']['days'] == 1 else 's'} · generated from the event log (no LLM)</p>
{f'<p class="warn">{e(note)}</p>' if note else ''}
<div class="tiles">{tile_html}</div>
<figure id="chart-dod">{svgs['dod']}</figure>
<figure id="chart-waiting">{svgs['waiting']}</figure>
<figure id="chart-hours">{svgs['hours']}</figure>
<h2>Per agent</h2>
<table><tr><th>agent</th><th>claims</th><th>met</th><th>failed</th><th>minutes waiting on you</th></tr>{rows}</table>
</body></html>
"""


def _fail(why: str, path: str, hint: str) -> FleetwatchError:
    return FleetwatchError(f"cannot write the report: {why}", op="report --html", path=path, hint=hint)


def write_html(fig: dict[str, Any], path: str, note: str = "") -> None:
    """Write the page to ``path``; ``note``: a warning shown at its top (damaged rows left out)."""
    text = page(fig, note)
    try:
        mode = os.stat(path).st_mode      # follows a symlink: /dev/stdout is one
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise _fail(e.strerror or "cannot stat it", path, "check the path") from e
    if mode is not None and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        return _stream(text, path)
    if mode is not None and stat.S_ISDIR(mode):
        raise _fail("it is a folder", path, "name a file in it, e.g. --html report.html")
    if mode is not None and not stat.S_ISREG(mode):
        raise _fail("it is neither a file, a FIFO nor a terminal", path, "name a regular file")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".report.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise _fail(e.strerror or "cannot create a file there", path,
                    "check that the folder exists and is writable") from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise _fail(e.strerror or "write failed", path, "check the path and the free space") from e
        raise


def _stream(text: str, path: str) -> None:
    """Write to a FIFO or a character device (no temp file: it cannot be renamed over)."""
    try:                                   # O_NONBLOCK: a FIFO nobody reads is ENXIO, not a hang
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as e:
        why = "nothing reads the FIFO" if e.errno == errno.ENXIO else (e.strerror or "cannot open it")
        raise _fail(why, path, "start its reader first") from e
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(text.encode("utf-8"))
    except OSError as e:
        raise _fail(e.strerror or "write failed", path, "check its reader") from e
    finally:
        os.close(fd)
