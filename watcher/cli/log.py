"""`fleetwatch tail`, `verify`, `export` and `backup`: reading the event log.

Readers never take the writer lock, never create the log and open it read-only (a read-only copy
can be read, verified, exported and backed up): if it does not exist yet, `tail` and `export` say
so on stderr and print nothing (exit 0; `tail -f` waits for it to appear), `verify` exits 2.
`--json` / `export` lines are exactly ``Recorded.to_json()`` (docs/contract.md). A damaged row (its
data not a blob or not decodable) is reported by seq on stderr and the command goes on: `tail`
prints a marked line, `export` a raw, marked JSON line (``{"seq", "damaged", "raw"}``), `verify`
exits 1 naming it. Never a traceback.
"""
import contextlib
import fnmatch
import os
import sys
import time
from collections.abc import Iterable
from typing import Any

import msgspec

from events.records import Damaged
from projections.text import inert_json, safe, unescape
from watcher.cli.plain import context, explicit_db, open_at, open_log
from watcher.runtime.about import about, last_about, only_about

SEQ_MAX = (1 << 63) - 1  # SQLite's integers: a larger --since was an OverflowError traceback

_enc = msgspec.json.Encoder()

def _json_line(rec: Any) -> str:
    """One JSON line (`tail --json`, `export`): raw controls and bidi characters as escapes."""
    return inert_json(_enc.encode(rec.to_json()).decode()) + "\n"


class _Out:
    """Writes records as JSON lines, plain lines (pipe) or coloured lines (TTY, via rich). Human
    lines come from the one event renderer (``watcher.cli.render`` over ``projections.present.render``):
    escaped, short by default, every field with ``verbose``."""

    def __init__(self, as_json: bool, verbose: bool = False):
        self.as_json = as_json
        self.verbose = verbose
        self.console = None
        if not as_json and sys.stdout.isatty():
            from watcher.cli.render import console

            self.console = console()

    def write(self, rec: Any) -> None:
        from watcher.cli import render

        if type(rec.event) is Damaged:
            _damaged(rec, self.as_json)
            return
        if self.as_json:
            sys.stdout.write(_json_line(rec))
        elif self.console is None:
            sys.stdout.write(render.tail_line(rec, verbose=self.verbose) + "\n")
        else:
            self.console.print(render.tail_text(rec, verbose=self.verbose))

    def flush(self) -> None:
        sys.stdout.flush()


def _damaged(rec: Any, as_json: bool) -> None:
    """A damaged row: a marked line (JSON: the raw, marked export line) and a note on stderr."""
    why = safe(rec.event.problem)
    sys.stdout.write(_json_line(rec) if as_json else f"{rec.seq:>7} DAMAGED row ({why})\n")
    print(f"fleetwatch: seq {rec.seq}: damaged row ({why}); shown raw, going on", file=sys.stderr)


def _expand_types(types: list[str] | None) -> list[str] | None:
    """``--type`` values: exact tags, comma lists, or globs (``notice.*``) over the known tags.
    Values that name nothing at all (``--type ''``, ``--type ,``: an unset shell variable) are no
    filter, as ``--subject ''`` is: they printed nothing, without a word."""
    parts = [p for t in types or [] for p in (x.strip() for x in t.split(",")) if p]
    if not parts:
        return None
    from events.types import EVENT_TYPES

    out: list[str] = []
    for part in parts:
        if any(c in part for c in "*?["):
            out += [k for k in EVENT_TYPES if fnmatch.fnmatchcase(k, part)]
        else:
            out.append(part)
    return sorted(set(out)) or ["\x00none"]


def unknown_types(types: list[str] | None) -> list[str]:
    """The ``--type`` values (after comma splitting) that match no known event type."""
    from events.types import EVENT_TYPES

    bad = []
    for t in types or []:
        for part in filter(None, (p.strip() for p in t.split(","))):
            if not any(fnmatch.fnmatchcase(k, part) for k in EVENT_TYPES):
                bad.append(part)
    return bad


def subject_match(subject: str | None) -> tuple[str | None, str | None]:
    """``--subject`` -> (prefix for ``log.read``, exact subject or None). A bare id is an agent
    (``a1`` = ``agent:a1``) and, like ``agent:a1``, matches exactly (no more a10–a12); a trailing
    ``*`` or ``:`` asks for a prefix (``agent:a1*``, ``run:``)."""
    if subject is None or not subject.strip():
        return None, None
    s = subject.strip()
    if ":" not in s.rstrip("*"):
        s = f"agent:{s}"
    if s.endswith("*"):
        return s.rstrip("*"), None
    if s.endswith(":"):
        return s, None
    return s, s


def _only(recs: Iterable[Any], exact: str | None, limit: int | None = None) -> Iterable[Any]:
    n = 0
    for rec in recs:
        if exact is None or rec.subject == exact:
            yield rec
            n += 1
            if limit is not None and n >= limit:
                return


def _quiet_pipe() -> None:
    """After EPIPE (e.g. `| head`): point stdout at /dev/null so the final flush is silent."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # pragma: no cover - no real fd (CliRunner)
        pass


def _missing(path: str, explicit: bool = False) -> bool:
    """True (after saying so on stderr) if the log does not exist yet; StoreError if it never
    can at this path (a parent is not a directory). ``explicit``: the path was given (--db,
    $FLEETWATCH_DB, [store] path), so a missing folder is likely a typo, which `run` refuses
    (without --create): said, as `tail -f` would otherwise wait for a file nothing makes."""
    if os.path.exists(path):
        return False
    folder = parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        from events.errors import StoreError

        raise StoreError(f"the event log path is unusable: {parent} is not a directory", op="open",
                         path=path, hint="point --db / [store] path at a file in a folder")
    if explicit and parent != folder:  # the nearest existing folder is not the log's: it is missing
        print(f"fleetwatch: no event log at {safe(path)}: its folder {safe(folder)} does not exist (a typo?)\n"
              "  hint: `fleetwatch run` makes no folder for a path given by hand (unless --create); "
              "fix --db / $FLEETWATCH_DB / [store] path", file=sys.stderr)
        return True
    print(f"fleetwatch: no event log at {safe(path)} yet (nothing to show)\n"
          "  hint: it is created by `fleetwatch run`; pass --db to read another one", file=sys.stderr)
    return True


def _follow(out: Any, recs: Any, path: str) -> None:
    """``tail -f``'s output of ``recs`` (a follow); a log deleted or replaced meanwhile (the
    watcher then exits, and its restart starts the file now at the path) ends it with its own
    message, not the watcher's."""
    from events.errors import FleetwatchError, LogReplaced

    try:
        for rec in recs:
            out.write(rec)
            out.flush()
    except LogReplaced:
        raise FleetwatchError(
            "the event log was deleted or replaced while `tail -f` followed it; nothing more is "
            "appended to the file it followed", op="follow", path=path,
            hint="run `fleetwatch tail -f` again to follow the log now at the path") from None


class _Stopper:
    """SIGTERM/SIGINT set a flag that ``follow``'s ``stop`` reads; handlers restored on exit."""

    def __init__(self) -> None:
        self.stopped = False
        self._old: dict[int, Any] = {}

    def __call__(self) -> bool:
        return self.stopped

    def _set(self, *_: object) -> None:
        self.stopped = True

    def __enter__(self) -> "_Stopper":
        import signal  # here: only `tail -f` waits for one (the other readers start without it)

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._old[sig] = signal.signal(sig, self._set)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, h in self._old.items():
            signal.signal(sig, h)


def _open_initialised(cfg: Any, path: str, db: str | None, follow: bool, stop: Any) -> Any:
    """The log, read-only. A file that exists but holds no log yet (0 bytes, or an SQLite file whose
    tables are still being made: the moment `run` creates a new log) is read as an empty log held
    in memory; `tail -f` waits until the file is a log, or it followed that memory copy forever and
    never showed what the watcher then wrote. None: stopped while waiting."""
    while True:
        log = open_at(cfg, path, db, readonly=True)
        if not follow or log.db.filename:
            return log
        log.close()
        if stop():
            return None
        time.sleep(0.2)


def _as_shown(log: Any, exact: str) -> str:
    """The subject ``exact`` names: itself when the log has it; else the one whose escaped form
    it is (``agent:wt\\x1b[1m`` for the agent whose id holds that ESC: `tail` prints it so, and
    typed back it matched nothing), when the log has that one."""
    def has(s: str) -> bool:
        return next(iter(log.last(1, subject=s, exact=True)), None) is not None

    raw = unescape(exact)
    return raw if raw is not None and raw != exact and not has(exact) and has(raw) else exact


def _emit(out: _Out, recs: Iterable[Any]) -> int:
    last = 0
    for rec in recs:
        out.write(rec)
        last = rec.seq
    out.flush()
    return last


def parse_expect_head(value: str) -> tuple[int, str]:
    """``--expect-head SEQ:HASH`` -> (seq, hash); ValueError when it is not that. HASH is the
    full 64 hex digits `verify` prints or, at least 8 of them, the short head of a push body."""
    seq_s, _, hash_s = value.partition(":")
    seq_s, hash_s = seq_s.strip(), hash_s.strip().lower()
    if not (seq_s.isascii() and seq_s.isdigit()) or not 8 <= len(hash_s) <= 64 \
            or any(c not in "0123456789abcdef" for c in hash_s):
        raise ValueError(value)
    return int(seq_s), hash_s


# ---- the commands' bodies (no typer: the typer commands below and watcher.cli.fast call these)
def tail(follow: bool = False, lines: int | None = None, since: int | None = None,
         type_: list[str] | None = None, subject: str | None = None, verbose: bool = False,
         as_json: bool = False, config: str | None = None, db: str | None = None) -> None:
    """`fleetwatch tail` (options as the command's)."""
    types = _expand_types(type_)
    for bad in unknown_types(type_):
        print(f"fleetwatch: warning: no event type matches --type {bad!r}"
              " (see the Events section of the README)", file=sys.stderr)
    subject, exact = subject_match(subject)
    out = _Out(as_json, verbose)
    cfg, path = context(config, db)
    try:
        with (_Stopper() if follow else contextlib.nullcontext(lambda: False)) as stop:
            if _missing(path, explicit_db(db, cfg)):
                if not follow:
                    return
                while not os.path.exists(path):
                    if stop():
                        return
                    time.sleep(0.2)
            log = _open_initialised(cfg, path, db, follow, stop)
            if log is None:
                return
            try:
                if exact and "\\" in exact:  # an id typed as tail and status print it (escaped)
                    subject = exact = _as_shown(log, exact)
                subjects = about(exact) if exact else None  # an agent: its DoD, notice, silence events too
                if since is not None:
                    head = since
                    recs = only_about(log.read(since, types=types, damaged="yield"), subjects, lines) if subjects \
                        else log.read(since, types=types, subject=subject, limit=None if exact else lines,
                                      damaged="yield")
                else:  # the last N through the type/subject indexes: a rare type costs no scan
                    head = log.head()[0]
                    n = 20 if lines is None else lines
                    recs = last_about(log, n, types, subjects) if subjects else \
                        log.last(n, types=types, subject=subject, exact=exact is not None, damaged="yield")
                if exact and not subjects:
                    recs = _only(recs, exact, lines if since is not None else None)
                last = _emit(out, recs)
                if follow:
                    fl = log.follow(max(head, last), types=types, subject=None if subjects else subject, stop=stop,
                                    yield_damaged=True)
                    _follow(out, only_about(fl, subjects) if subjects else _only(fl, exact), log.given)
            finally:
                log.close()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        _quiet_pipe()


def where_of(res: Any) -> str:
    """Where a failed verify broke: ``seq N`` or ``table NAME``."""
    return f"seq {res.bad_seq}" if res.bad_seq is not None else f"table {res.table}"


def verify(want: tuple[int, str] | None = None, restore_guards: bool = False, as_json: bool = False,
           config: str | None = None, db: str | None = None) -> None:
    """`fleetwatch verify`; ``want``: the parsed ``--expect-head``. Exit 1 (SystemExit) when broken."""
    if restore_guards:
        import apsw

        from events.errors import AppendFailed, StoreError, append_hint

        _, log = open_log(config, db)
        try:
            if log.readonly:  # a read-only file or folder: the one write verify makes cannot be made
                raise StoreError("the event log is read-only here: the guards cannot be restored; nothing written",
                                 op="restore-guards", path=log.path,
                                 hint="`fleetwatch verify` checks it as it is; restore the guards on a writable copy "
                                      "(`fleetwatch backup COPY`, then --db COPY)")
            before = log.guard_problems()
            try:
                log.restore_guards()
            except apsw.Error as e:
                raise AppendFailed(f"cannot restore the guards, nothing changed: {type(e).__name__}: {e}",
                                   op="restore-guards", path=log.path, hint=append_hint(e)) from e
        finally:
            log.close()
        print(f"guards restored ({'; '.join(before)})" if before else "guards were intact", file=sys.stderr)
    _, log = open_log(config, db, readonly=True)
    try:
        res = log.verify(expect_head=want)
        from watcher.hub.store import host_report  # a hub's log: every host's chain, gaps per host

        hosts, host_lines, hosts_ok = host_report(log.db)
    finally:
        log.close()
    try:  # a reader that closed the pipe (`| head -1`, `| grep -q BROKEN`) does not make a broken log exit 0
        if as_json:
            doc = msgspec.to_builtins(res)
            if hosts:
                doc["hosts"] = msgspec.to_builtins(hosts)
            sys.stdout.write(inert_json(_enc.encode(doc).decode()) + "\n")
        elif res.ok:
            print(f"ok: {res.count} events, chain intact\nhead {res.head_seq}:{res.head_hash}")
            print(f"head anchor {res.anchor.split(':')[0]}:{res.anchor.split(':')[1][:8]} matches" if res.anchor
                  else f"no head anchor ({safe(os.path.basename(log.path))}.head): a cut tail cannot be told"
                  + (" but by the expected head, which the log holds" if want else "; pass --expect-head"))
        else:  # the table may be the head file, named after the log (a folder or file name may hold escapes)
            print(f"BROKEN at {safe(where_of(res))}: {safe(res.problem)}\n"
                  f"last good {res.head_seq}:{res.head_hash}")
        if host_lines and not as_json:  # host names and chains come from other machines: escaped
            print("\n".join(safe(line) for line in host_lines))
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_pipe()
    if not res.ok:
        print(f"fleetwatch: verify failed at {safe(where_of(res))}: {safe(res.problem)}", file=sys.stderr)
        raise SystemExit(1)
    if not hosts_ok:
        print("fleetwatch: verify: a host chain is broken or has gaps (see above)", file=sys.stderr)
        raise SystemExit(1)


def export(since: int = 0, config: str | None = None, db: str | None = None) -> None:
    """`fleetwatch export`."""
    cfg, path = context(config, db)
    if _missing(path, explicit_db(db, cfg)):
        return
    log = open_at(cfg, path, db, readonly=True)
    try:
        w = sys.stdout.write
        buf: list[str] = []
        for rec in log.read(since, damaged="yield"):
            if type(rec.event) is Damaged:
                print(f"fleetwatch: seq {rec.seq}: damaged row ({safe(rec.event.problem)}); exported raw",
                      file=sys.stderr)
            buf.append(_json_line(rec))
            if len(buf) >= 1000:
                w("".join(buf))
                buf.clear()
        w("".join(buf))
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_pipe()
    finally:
        log.close()


def register(app: Any) -> None:
    """The typer commands: option parsing and help; the work is in the functions above."""
    from typing import Annotated, Optional

    import typer

    from watcher.cli.util import ConfigOpt, DbOpt, JsonOpt, errors

    @app.command("tail")
    @errors
    def tail_cmd(
        follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new events as they are appended (Ctrl-C to stop).")] = False,
        lines: Annotated[Optional[int], typer.Option("-n", "--lines", min=0, help="How many events: the last N (default 20); with --since, the first N after SEQ (default all).")] = None,
        since: Annotated[Optional[int], typer.Option("--since", min=0, max=SEQ_MAX, help="Only events with seq > SEQ.")] = None,
        type_: Annotated[Optional[list[str]], typer.Option("--type", "-t", help="Only this event type (repeatable; comma lists and globs like 'notice.*').")] = None,
        subject: Annotated[Optional[str], typer.Option("--subject", "-s", help="Only this subject, exactly: a bare agent id (a7) or agent:a7 (with its dod: events and the notices and silences naming it), run:T1; a trailing * (agent:a1*) or : (run:) matches a prefix.")] = None,
        verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Every field of every event (default: the short line a person reads).")] = False,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Print events from the log: the last 20 by default, -f to follow live. --json prints
        one JSON object per line exactly as docs/contract.md (as `export`)."""
        tail(follow, lines, since, type_, subject, verbose, as_json, config, db)

    @app.command("verify")
    @errors
    def verify_cmd(
        expect_head: Annotated[Optional[str], typer.Option("--expect-head", metavar="SEQ:HASH", help="Also require the row at SEQ to have HASH (hex: the 64 digits an earlier verify printed, or at least 8, as in a push body's 'log head SEQ:HASH'): catches a truncated tail.")] = None,
        restore_guards: Annotated[bool, typer.Option("--restore-guards", help="Put the append-only triggers and indexes back as fleetwatch created them (the only write verify makes), then check everything.")] = False,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Walk the whole log: contiguous seqs and the sha256 chain, then the head anchor
        (events.db.head, written at every commit: catches a cut tail), the append-only guards and
        the snapshots' binding. Prints the head (seq, hash). Exit 0 intact, 1 broken (naming the
        first bad seq, or the table), 2 no usable log."""
        want = None
        if expect_head is not None:
            try:
                want = parse_expect_head(expect_head)
            except ValueError:
                raise typer.BadParameter("expected SEQ:HASH, e.g. 42:3f2a1b0c… (8 to 64 hex digits)",
                                         param_hint="--expect-head") from None
        verify(want, restore_guards, as_json, config, db)

    @app.command("export")
    @errors
    def export_cmd(
        since: Annotated[int, typer.Option("--since", min=0, max=SEQ_MAX, help="Only events with seq > SEQ.")] = 0,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """Write every event (seq > SEQ) to stdout as JSON lines, exactly as `tail --json`. A
        damaged row is written raw and marked ({"seq", "damaged", "raw"}) and named on stderr."""
        export(since, config, db)

    @app.command("backup")
    @errors
    def backup(
        dest: Annotated[str, typer.Argument(metavar="PATH", help="The new file (never overwritten).")],
        as_is: Annotated[bool, typer.Option("--as-is", help="Keep the copy even if it does not verify "
                                            "(a damaged log, copied as it is for a closer look; a warning names the problem).")] = False,
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
        db: DbOpt = None,
    ) -> None:
        """A consistent copy of the log while the watcher runs (SQLite's online backup: the
        commits still in the WAL included, which `cp events.db` misses), verified before it is
        put in place, with its own head anchor. Exit 0 done, 1 failed (nothing left at PATH),
        2 refused (PATH exists, its folder does not, no log). With --as-is a copy that does not
        verify is kept (exit 0, its problem on stderr)."""
        from watcher.config import expand

        if dest.endswith(("/", "/.", "/..")) or dest in (".", ".."):  # abspath would drop the slash: a file "DIR"
            from events.errors import StoreError

            raise StoreError("the backup path names a folder; nothing written", op="backup", path=dest,
                             hint="name the new file inside it, e.g. DIR/events-$(date +%F).db")
        dest = os.path.abspath(expand(dest))  # ~ and $VARS, as in every path (docs/contract.md); printed as written
        _, log = open_log(config, db, readonly=True)
        try:
            res = log.backup(dest, as_is=as_is)  # StoreError: a refused destination (2); BackupFailed (1)
        finally:
            log.close()
        if not res.ok:  # --as-is: kept, and said
            print(f"fleetwatch: warning: the copy does not verify, kept as it is (--as-is): {safe(res.problem)}",
                  file=sys.stderr)
        if as_json:
            sys.stdout.write(inert_json(_enc.encode({"path": dest, **msgspec.to_builtins(res)}).decode()) + "\n")
        elif res.ok:
            print(f"backed up {res.count} events to {safe(dest)}: verified, head {res.head_seq}:{res.head_hash[:8]}")
        else:
            print(f"backed up to {safe(dest)} as it is, NOT verified; last good row {res.head_seq}:{res.head_hash[:8]}")
