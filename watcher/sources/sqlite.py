"""The ``sqlite`` source: runs the configured query on an external database, read-only.

Invariants
- Opened with a ``file:...?mode=ro`` URI and ``SQLITE_OPEN_READONLY | SQLITE_OPEN_URI``: the
  database is never written (its bytes are unchanged by polling).
- A fresh connection per poll, closed before ``poll`` returns: no lock outlives the query.
- A short busy timeout; the query itself is cut at the source's ``timeout``.
- The path is stat'ed first: anything but a regular file (a FIFO would block SQLite's open) is
  refused unopened. Failures carry an ``error_class`` (missing, busy, timeout, schema-changed …).
- Every failure (missing file, locked, not a database, changed schema, timeout) is a value:
  ``SourceResult(ok=False, error=reason)``; never an exception. Errors name no row content.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
import urllib.parse
from typing import Any

import apsw

from projections.observations import RowObs, SourceResult
from watcher.config import Source, expand, parse_duration
from watcher.config_limits import file_kind
from watcher.sources import NO_FILES

log = logging.getLogger("fleetwatch.sources.sqlite")

BUSY_TIMEOUT_MS = 250
MAX_ROWS = 100_000
MAX_TEXT = 1024  # characters of a text value kept whole (see _plain)
WHOLE = {"deps": 1 << 18}  # a column parsed whole (a JSON array of ids): cut, it was garbage ids
# Columns each entity needs (besides the configured key columns).
REQUIRED = {"wp": ("mission", "wp", "state"), "circuit": ("scope", "state"),
            "swarm": ("group", "child", "status")}


def ro_uri(path: str) -> str:
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"


class SqliteSource:
    kind = "sqlite"
    partial = False                  # (the Source protocol, watcher/sources/__init__.py: reads no files)
    cache = NO_FILES
    delta: tuple[Any, Any, Any] | None = None

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.path = expand(spec.path or "")
        self.query = spec.query or ""
        self.key = list(spec.key or [])
        self.entity = spec.entity or "wp"
        self.timeout = parse_duration(spec.timeout)
        self.last: SourceResult | None = None

    def _fail(self, error: str, cls: str = "query-failed") -> SourceResult:
        log.debug("source %s: %s", self.name, error)
        return SourceResult(name=self.name, kind=self.kind, ok=False, error=error, error_class=cls)

    def poll(self, now: float, full: bool = True) -> SourceResult:
        """Run the query once (on full ticks; wake-ups reuse the last result)."""
        if not full and self.last is not None:
            return self.last
        self.last = self._poll()
        return self.last

    def _poll(self) -> SourceResult:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._fail(f"database missing: {self.path}", "missing")
        except OSError as e:
            return self._fail(f"cannot open database: {e.strerror or type(e).__name__}", "unreadable")
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block SQLite's open: never opened
            return self._fail(f"not a file ({file_kind(st.st_mode)}): {self.path}", "not-regular")
        try:
            db = apsw.Connection(ro_uri(self.path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        except apsw.Error as e:
            return self._fail(f"cannot open database: {_reason(e)}", "unreadable")
        try:
            db.setbusytimeout(min(BUSY_TIMEOUT_MS, int(self.timeout * 1000)))
            deadline = time.monotonic() + self.timeout
            db.setprogresshandler(lambda: time.monotonic() > deadline, 10_000)
            prepared = _Columns()
            try:
                cur = db.cursor()
                cur.exec_trace = prepared  # each statement's columns, before it runs
                cur.execute(self.query)
                try:
                    cols = [d[0] for d in cur.getdescription()]
                except apsw.ExecutionCompleteError:  # no row (an empty table): the columns all the same
                    cols = prepared.cols
                try:
                    rows = _fetch(cur)
                except UnicodeDecodeError:  # a text value that is not UTF-8 (another program wrote it):
                    rows = _fetch(db.execute(_texts_as_blobs(self.query, cols)))  # as bytes (_plain: U+FFFD)
                if rows is None:
                    return self._fail(f"query returned more than {MAX_ROWS} rows", "too-large")
            except apsw.BusyError:
                return self._fail("database locked (busy past the timeout)", "busy")
            except apsw.InterruptError:
                return self._fail(f"query timed out after {self.timeout:g}s", "timeout")
            except apsw.SQLError as e:
                return self._fail(f"query failed (schema changed?): {_reason(e)}")
            except apsw.Error as e:
                return self._fail(f"query failed: {_reason(e)}")
        finally:
            db.close()
        return self._rows(cols, rows)

    def _rows(self, cols: list[str], rows: list[tuple[Any, ...]]) -> SourceResult:
        need = list(dict.fromkeys([*self.key, *REQUIRED.get(self.entity, ())]))
        missing = [c for c in need if c not in cols]
        if missing:
            return self._fail(f"schema changed: the query gives no column {', '.join(missing)} "
                              f"(has {', '.join(cols) or 'none'})", "schema-changed")
        out = []
        for r in rows:
            row = {c: _plain(v, WHOLE.get(c, MAX_TEXT)) for c, v in zip(cols, r)}
            out.append(RowObs(entity=self.entity, source=self.name,
                              key=tuple("" if row[k] is None else str(row[k]) for k in self.key), row=row))
        return SourceResult(name=self.name, kind=self.kind, rows=out)

    def close(self) -> None:
        pass


class _Columns:
    """An exec trace keeping the column names of the statement about to run: once a query has
    given no row its cursor has no description, and an empty table was "schema changed: the
    query gives no column mission, wp, state (has none)", a failed source (and its rows, all
    deleted, never gone) (tests/watcher/sources/test_sqlite_empty_result.py)."""

    def __init__(self) -> None:
        self.cols: list[str] = []

    def __call__(self, cur: Any, sql: str, bindings: Any) -> bool:
        self.cols = [d[0] for d in cur.getdescription()]
        return True


def _fetch(cur: Any) -> list[tuple[Any, ...]] | None:
    """The cursor's rows; None past MAX_ROWS."""
    rows = []
    for r in cur:
        rows.append(r)
        if len(rows) > MAX_ROWS:
            return None
    return rows


def _texts_as_blobs(query: str, cols: list[str]) -> str:
    """``query`` with each text value given as a blob: one row's text that is not UTF-8 made the
    whole source fail ("internal error: UnicodeDecodeError", a traceback every poll) before."""
    q = [f'"{c.replace(chr(34), chr(34) * 2)}"' for c in cols]
    sel = ", ".join(f"CASE WHEN typeof({c}) = 'text' THEN CAST({c} AS BLOB) ELSE {c} END AS {c}" for c in q)
    return f"SELECT {sel} FROM ({query.strip().rstrip(';')})"


def _plain(v: Any, limit: int = MAX_TEXT) -> Any:
    """Row values as JSON-able scalars (blobs decoded as UTF-8 text), a text longer than MAX_TEXT
    as its beginning, its length and a digest of the whole (two long values stay apart): a 20 MB
    last_error_sig went whole into every wp.changed and the missions state, the log growing by
    twice the database (tests/watcher/sources/test_sqlite_long_values.py)."""
    if isinstance(v, (bytes, memoryview)):
        v = bytes(v).decode("utf-8", "replace")
    if type(v) is str and len(v) > limit:
        digest = hashlib.sha256(v.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"{v[:limit - 48]}…[{len(v)} chars {digest}]"
    return v


def _reason(e: apsw.Error) -> str:
    msg = str(e).split("\n")[0][:200]
    return f"{type(e).__name__}: {msg}"
