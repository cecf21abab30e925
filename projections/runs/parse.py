"""Reading one steps.json (pure): its run-level fields and its steps, normalised, with the problems
found. Bad input is recorded as a reason, never fatal. ``projections.runs.fold`` compares what these give
with the folded state; the rules (``projections.runs.rules``) read the parsed steps ("views").

A view of a run maps each step name to ``(status, at, at epoch, rule-relevant data, problems)``.
"""
from __future__ import annotations

import hashlib
from enum import Enum
from typing import Any

from events.timefmt import iso
from projections.runs.rules import ts

ORDER = ("facts", "audit", "analyze", "apply", "validate", "deploy", "upload_intent",
         "upload_confirmed", "ledger", "launch_intent", "launch_confirmed", "notify")
POS = {s: i for i, s in enumerate(ORDER)}
STATUSES = frozenset(("begin", "done", "fail"))
DATA_KEYS = ("verdict", "tainted", "sha256", "candidate", "reconciled", "request_id", "continue_from")
RUN_FIELDS = ("branch", "kind", "failures", "last_failure_at", "work_complete", "continue_from", "board")
MAX_AT, MAX_DATA_TEXT = 96, 1024   # characters of an `at`, of a data text, kept whole (see _cut)
MAX_DATA_DEPTH = 8      # a data value's containers nested deeper than this, or holding more
MAX_DATA_NODES = 256    # values than this, are kept as a marker of the same type (see _bounded)
MAX_UNKNOWN_STEPS = 32   # unknown step names read per run (the first, alphabetically)
MAX_STEP_NAME = 200      # characters: a longer unknown name is not read


class Reason(str, Enum):
    """Why a step change or a run is odd (bad input is recorded, never fatal)."""

    UNKNOWN_STEP = "unknown step"
    UNKNOWN_STATUS = "unknown status"
    NO_STATUS = "no status"
    NOT_OBJECT = "step entry is not an object"
    MISSING_AT = "missing at"
    BAD_AT = "unparseable at"
    OUT_OF_ORDER = "out of order"
    REMOVED = "removed from steps.json"
    RERUN = "repeated between polls (at changed)"
    DATA = "data changed"
    UNCOUNTED_RETRY = "retry without a recorded failure"
    STEPS_NOT_OBJECT = "steps is not an object"
    BAD_FIELD = "bad field"


def _text(v: Any, n: int) -> str:
    """At most ``n`` characters showing any JSON value, a list or object nested too deep for str()
    included (tests/projections/runs/test_runs_hostile_values.py)."""
    try:
        return str(v)[:n]
    except RecursionError:
        return "[…]" if isinstance(v, list) else "{…}"


def _cut(s: str, n: int) -> str:
    """``s`` when at most ``n`` characters, else its beginning, its length and a digest of the whole
    (two long texts stay apart, a change anywhere is a change; as sqlite.MAX_TEXT)."""
    if len(s) <= n:
        return s
    digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{s[:n - 40]}…[{len(s)} chars {digest}]"


def _at_str(v: Any) -> str | None:
    if v is None:
        return v
    if isinstance(v, str):
        return _cut(v, MAX_AT)   # an `at` that long is no time: kept short, still told apart
    t = ts(v)
    return iso(t) if t is not None else _text(v, 64)


def _number(f: float) -> list[str]:
    """A NaN or an Infinity (read from steps.json by ``watcher.sources.parse``) as the log keeps it
    (the log would write the float as null, a "change" at every tick): ``["NaN"]`` is no id and no
    verdict, and truthy, as the float was."""
    return ["NaN" if f != f else "Infinity" if f > 0 else "-Infinity"]


def _bounded(v: Any) -> Any:
    """A data value as the log and the runs state keep it (a snapshot must encode it): itself when
    it is a scalar or a small, shallow container; else a non-empty marker of its type (``["…"]``,
    ``{"…": "…"}``), which every rule reads as it read the value (a container is truthy, no id, no
    verdict). Each long text in it cut (``_cut``), each NaN or Infinity as ``_number``."""
    if not isinstance(v, (list, dict)):
        return _finite(v)
    todo, nodes, odd = [(v, 1)], 0, False
    while todo:
        x, depth = todo.pop()
        nodes += 1
        if depth > MAX_DATA_DEPTH or nodes > MAX_DATA_NODES:
            return ["…"] if isinstance(v, list) else {"…": "…"}
        if isinstance(x, dict):
            todo.extend((y, depth + 1) for y in x.values())
        elif isinstance(x, list):
            todo.extend((y, depth + 1) for y in x)
        elif type(x) is float and x - x != 0.0 or type(x) is str and len(x) > MAX_DATA_TEXT:
            odd = True
    return _finite(v) if odd else v


def _finite(v: Any) -> Any:
    """``v`` (small and shallow: see ``_bounded``) with each NaN or Infinity as ``_number`` and
    each long text cut."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    if type(v) is str:
        return _cut(v, MAX_DATA_TEXT)
    return _number(v) if type(v) is float and v - v != 0.0 else v


def _data(d: Any) -> dict:
    """The rule-relevant part of a step's ``data`` (the rest is the run's own business), bounded."""
    return {k: _bounded(d[k]) for k in DATA_KEYS if k in d} if isinstance(d, dict) and d else {}


def parse_step(name: str, entry: Any) -> tuple[str, str | None, float | None, dict, list[str]]:
    """(status, at, at epoch, rule-relevant data, problems) of one steps.json entry."""
    probs: list[str] = []
    if name not in POS:
        probs.append(Reason.UNKNOWN_STEP.value)
    if isinstance(entry, str):
        entry = {"status": entry}
        probs.append(Reason.NOT_OBJECT.value)
    elif not isinstance(entry, dict):
        return "", None, None, {}, probs + [Reason.NOT_OBJECT.value]
    st = entry.get("status")
    if st is None:
        status = ""
        probs.append(Reason.NO_STATUS.value)
    else:
        status = st if isinstance(st, str) else _text(st, 32)
        if status not in STATUSES:
            probs.append(f"{Reason.UNKNOWN_STATUS.value} {status!r}")
    raw = entry.get("at")
    at = _at_str(raw)
    t = ts(raw)
    if raw is None:
        probs.append(Reason.MISSING_AT.value)
    elif t is None:
        probs.append(Reason.BAD_AT.value)
    return status, at, t, _data(entry.get("data")), probs


def parse_run(doc: dict) -> tuple[dict, list[str]]:
    """Run-level fields of a steps.json, normalised, and the problems found."""
    probs: list[str] = []
    f: dict[str, Any] = {}
    for k in ("branch", "kind", "continue_from", "board"):
        v = doc.get(k)
        if v is not None and not isinstance(v, str):
            probs.append(f"{Reason.BAD_FIELD.value} {k}")
            v = None
        f[k] = v if v is None else _cut(v, MAX_DATA_TEXT)  # in every run.changed: bounded
    n = doc.get("failures", 0)
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if n is None:
        n = 0
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        probs.append(f"{Reason.BAD_FIELD.value} failures")
        n = 0
    f["failures"] = n
    lf = doc.get("last_failure_at")
    if lf is not None and ts(lf) is None:
        probs.append(f"{Reason.BAD_FIELD.value} last_failure_at")
    f["last_failure_at"] = _at_str(lf)
    wc = doc.get("work_complete", False)
    if not isinstance(wc, bool):
        probs.append(f"{Reason.BAD_FIELD.value} work_complete")
        wc = False
    f["work_complete"] = wc
    return f, probs


def _unread(raw_steps: dict) -> set[str]:
    """The step names of ``raw_steps`` not read: unknown names past the first MAX_UNKNOWN_STEPS,
    or longer than MAX_STEP_NAME (each name read is an event or two at each change of the file)."""
    unknown = sorted(n for n in raw_steps if n not in POS)
    return {n for n in unknown if len(n) > MAX_STEP_NAME} | set(
        [n for n in unknown if len(n) <= MAX_STEP_NAME][MAX_UNKNOWN_STEPS:])


def steps_problem(raw_steps: dict) -> str:
    """The run's problem with its step names ("" when every name is read: see ``_unread``)."""
    n = len(_unread(raw_steps))
    return (f"{n} unknown step name(s) not read (at most {MAX_UNKNOWN_STEPS} are, of at most "
            f"{MAX_STEP_NAME} characters)") if n else ""


def parse_steps(raw_steps: dict) -> dict:
    """The view of a run: every entry of its ``steps`` parsed (the names ``_unread`` spares)."""
    skip = _unread(raw_steps)
    return {n: parse_step(n, e) for n, e in raw_steps.items() if n not in skip}


def step_names(names: Any) -> list[str]:
    """Fixed order first, then unknown names alphabetically."""
    return sorted(set(names), key=lambda s: (POS.get(s, 99), s))


def is_new_attempt(prev: str | None, prev_t: float | None, prev_at: str | None,
                   to: str, t: float | None, at: str | None) -> bool:
    """Does this change start the step again? (see ``projections.runs.fold``)"""
    if to == "":
        return False
    if not prev:
        return True
    if to == prev:
        return (t != prev_t) if (t is not None and prev_t is not None) else (at != prev_at)
    return to == "begin" or prev in ("done", "fail")
