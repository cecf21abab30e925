"""The one event renderer: an event as one short, safe, coloured line (pure).

``tail``, ``summary``, the board and the service log all render events here, so a line reads the
same everywhere. A line is a list of segments ``(text, style)`` (rich style names, "" = plain):
the CLI and the board turn them into ``rich.text.Text`` (``Text.assemble(*segs)``), the service
log and pipes join the texts (``plain``).

Invariants
- Every value an agent controls (ids, tasks, reasons, phases, errors) goes through
  ``projections.text.safe``: control characters, ESC, CR/LF and bidi overrides become visible
  escapes, so a value can never start a new line, move the cursor or forge another event.
- The subject's id is shown exactly once per line (in the head): a data field repeating it
  (``agent`` of ``agent:a7``) is left out.
- Short by default: the fields a person reads (class change, state/phase, reason, rule, verdict),
  digests (``contract_sha256``) and bookkeeping left out, long values cut. ``verbose`` shows every
  non-empty field.
- Class names are coloured by ``projections.classes`` (the one class table), alerts in bold red.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from projections.classes import COLOUR, NAMES
from projections.text import safe

Seg = tuple[str, str]

# Colour per event family (rich styles).
FAMILY_STYLE = {"agent": "cyan", "dod": "magenta", "run": "blue", "step": "blue", "rule": "bold red",
                "wp": "green", "circuit": "yellow", "mission": "green", "swarm": "green", "fleet": "yellow",
                "source": "yellow", "notice": "bright_black", "silence": "bright_black", "watcher": "dim"}
ALERT_SUFFIXES = ("failed", "violated", "abandoned", "overdue", "escalated", "silent")
# Left out of short lines: digests, bookkeeping, and what the head already says.
HIDDEN_SHORT = frozenset(("contract_sha256", "contract_len", "source", "changed", "stall_seq", "version",
                          "pid", "covers", "conditions", "keys", "last_activity", "target", "evidence_sha256"))
ID_KEYS = ("agent", "run", "mission", "source", "notice", "silence", "group")  # the subject's id field
VALUE_MAX = 60          # short lines cut each value here (after escaping)
VALUE_MAX_VERBOSE = 400
ABOUT_MAX = 5           # subjects a notice line names (then "+N")
ARROW = "->"


def fields_of(event: Any) -> dict[str, Any]:
    """An event Struct (or an ``Unknown``) as its data dict (encoded names: ``from``, not ``from_``)."""
    raw = getattr(event, "raw", None)
    if isinstance(raw, dict):
        return dict(raw)
    d = msgspec.to_builtins(event)
    if isinstance(d, dict):
        d.pop("type", None)
        return d
    return {}


def class_seg(cls: Any) -> Seg:
    """A class name coloured by the class table (unknown values plain, escaped)."""
    s = safe(cls if cls is not None else "new", 40)
    return s, COLOUR.get(s, "") if s in NAMES else ""


def _val(v: Any, limit: int) -> str:
    if isinstance(v, str):
        s = v
    elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int)) for x in v):
        s = ",".join(str(x) for x in v)
    else:
        s = msgspec.json.encode(v).decode()
    s = safe(s, limit)
    return s if s and not any(c in s for c in ' ="') else '"' + s.replace('"', '\\"') + '"'


def event_segments(type_: str, subject: str, data: Mapping[str, Any], *, verbose: bool = False) -> list[Seg]:
    """``type`` and the details of one event, as segments (no head)."""
    sid = subject.partition(":")[2]
    d = {k: v for k, v in data.items() if v not in (None, "", [], {})}
    for k in ID_KEYS:
        if d.get(k) == sid:
            del d[k]
            break
    style = "bold red" if type_.endswith(ALERT_SUFFIXES) else FAMILY_STYLE.get(type_.split(".", 1)[0], "")
    out: list[Seg] = [(safe(type_, 60), style)]
    limit = VALUE_MAX_VERBOSE if verbose else VALUE_MAX
    if type_ == "agent.classified" or "to" in d and d.get("to") in NAMES:
        frm, to = data.get("from"), d.pop("to", None)
        d.pop("from", None)
        out += [(" ", ""), class_seg(frm), (f" {ARROW} ", ""), class_seg(to)]
    elif "to" in d and ("from" in d or "from" in data):
        frm, to = d.pop("from", None), d.pop("to", None)
        what = d.pop("step", None) or d.pop("wp", None) or d.pop("child", None)
        if what is not None:
            out.append((" " + _val(what, limit), "bold"))
        out.append((f" {_val(frm, limit) if frm is not None else 'new'} {ARROW} {_val(to, limit)}", ""))
    if "state" in d or "phase" in d:
        out.append((f" {safe(d.pop('state', None) or '-', 40)}/{safe(d.pop('phase', None) or '-', 40)}", ""))
    for k in ("reason", "rule", "verdict", "error", "detail", "task"):
        if k in d and not verbose:
            out.append((f" {k}={_val(d.pop(k), limit)}", "bold red" if k == "rule" else ""))
    if type_.startswith("notice."):  # which agents (subjects) a notice is about: an ack line names them
        named = notice_subjects(data)
        if named:
            shown = [n[len("agent:"):] if n.startswith("agent:") else n for n in named]
            out.append((f" about={_val(shown[:ABOUT_MAX], limit)}"
                        + (f" +{len(shown) - ABOUT_MAX}" if len(shown) > ABOUT_MAX else ""), "bold"))
    rest = [(k, v) for k, v in d.items() if verbose or k not in HIDDEN_SHORT]
    if not verbose and type_.startswith("notice.") and isinstance(data.get("covers"), list):
        rest.append(("items", len(data["covers"])))
    for k, v in rest:
        out.append((f" {safe(k, 40)}={_val(v, limit)}", ""))
    return out


def notice_subjects(data: Mapping[str, Any]) -> list[str]:
    """The subjects a notice event's condition ids (``keys`` / ``conditions``: ``subject|CLASS#n``,
    maybe ``@rev``) name, in order, once each."""
    ids = data.get("keys") or data.get("conditions") or []
    if not isinstance(ids, list):
        return []
    return list(dict.fromkeys(k.rpartition("|")[0] for k in ids if isinstance(k, str) and "|" in k))  # an id may hold "|"


def record_segments(rec: Any, *, verbose: bool = False) -> list[Seg]:
    """A ``Recorded`` row: ``seq time subject vN type details``."""
    from events.types import data_dict

    data = data_dict(rec.data) if rec.data else fields_of(rec.event)
    return [(f"{rec.seq:>7} {safe(rec.time, 40)} {safe(rec.subject, 120)} v{rec.version}", "dim"), (" ", ""),
            *event_segments(rec.type, rec.subject, data, verbose=verbose)]


def event_text(event: Any, *, verbose: bool = False) -> str:
    """An event Struct (not yet recorded) as one plain line ``subject type details`` (the service
    log's transition line)."""
    from events.types import tag_of

    type_ = getattr(event, "type", None) if hasattr(event, "raw") else tag_of(event)
    subject = getattr(event, "subject", "") or ""
    return plain([(safe(subject, 120), ""), (" ", ""),
                  *event_segments(str(type_), subject, fields_of(event), verbose=verbose)])


def plain(segs: Iterable[Seg]) -> str:
    """The segments' text, joined (one line: every piece is already escaped)."""
    return "".join(t for t, _ in segs).rstrip()
