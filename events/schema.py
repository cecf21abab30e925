"""The event log's file: path checks, schema, versioning (``PRAGMA user_version``) and migrations.

Invariants
- A fleetwatch log has ``PRAGMA application_id = APPLICATION_ID``; another application's
  database or a newer schema is refused through a read-only probe, nothing touched.
- An older schema is brought to SCHEMA_VERSION in one ``BEGIN IMMEDIATE`` transaction
  (re-checked under the write lock): all steps or none.

Schema versions
- v1: ``events.id`` carried ``UNIQUE`` (an index entry for every row).
- v2: ``id`` uniqueness without an index entry for generated ids. A generated id is
  ``<16 hex of the writer connection><seq as 16 hex>``, unique by construction (seq is the
  primary key). ``events_given_id`` is a UNIQUE partial index over every other id (caller-given,
  and every id written by v1). :data:`GIVEN_ID` is its predicate: a query that names it can
  use the index. Rows are copied unchanged, so the hash chain is untouched.
- v3: append-only for real: ``events_no_replace`` refuses any INSERT that is not the next seq or
  that collides with a stored (subject, version) or given id (``INSERT OR REPLACE`` / UPSERT would
  otherwise delete a row without firing the DELETE trigger). ``event_types`` (type, block) says in
  which blocks of ``1 << BLOCK_SHIFT`` seqs each type occurs (a few rows per block, written by the
  appender only when a pair is new), so ``tail --type`` reads only the blocks that hold the type:
  an absent type costs one look-up, and no per-row index is paid on append. ``snapshots`` gains ``head`` (the chain hash at the
  snapshot's seq) and ``digest`` (``events.chain.snapshot_digest``): a snapshot is trusted only when
  both check against the chain. Snapshots written before v3 are unbound: the migration drops them
  (a cache: one replay at the next start).

Guards
- :data:`GUARDS` is the exact SQL of every trigger and index that keeps ``events`` append-only;
  :func:`guard_problems` compares ``sqlite_master`` with it (a dropped or edited guard is found by
  ``verify``, ``doctor`` and ``run``), :func:`restore_guards` puts them back in one transaction.
"""
from __future__ import annotations

import os
import shlex
import stat

import apsw

from events import sqlrows
from events.errors import SchemaError, StoreError
from events.private import private_dir

APPLICATION_ID = 0x46574C47  # "FWLG"
SCHEMA_VERSION = 3

# an id not of the generated form <16 hex><seq as 16 hex>: the rows events_given_id covers
GIVEN_ID = "substr(id, 17) <> printf('%016x', seq)"

_TRIGGERS = """
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; UPDATE is refused'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; DELETE is refused'); END;
"""

_EVENTS_V2 = f"""
CREATE TABLE events (
  seq     INTEGER PRIMARY KEY,
  id      TEXT    NOT NULL,
  time    TEXT    NOT NULL,
  type    TEXT    NOT NULL,
  subject TEXT    NOT NULL,
  version INTEGER NOT NULL,
  data    BLOB    NOT NULL,
  hash    BLOB    NOT NULL,
  UNIQUE (subject, version)
);
CREATE UNIQUE INDEX events_given_id ON events(id) WHERE {GIVEN_ID};
{_TRIGGERS}"""

_SCHEMA_V1 = """
CREATE TABLE events (
  seq     INTEGER PRIMARY KEY,
  id      TEXT    NOT NULL UNIQUE,
  time    TEXT    NOT NULL,
  type    TEXT    NOT NULL,
  subject TEXT    NOT NULL,
  version INTEGER NOT NULL,
  data    BLOB    NOT NULL,
  hash    BLOB    NOT NULL,
  UNIQUE (subject, version)
);""" + _TRIGGERS + """
CREATE TABLE snapshots (
  name TEXT PRIMARY KEY,
  seq  INTEGER NOT NULL,
  data BLOB NOT NULL
);
"""

# v3: the guards, exactly as created (sqlite_master keeps this text; guard_problems compares it)
_NO_UPDATE = ("CREATE TRIGGER events_no_update BEFORE UPDATE ON events\n"
              "BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; UPDATE is refused'); END")
_NO_DELETE = ("CREATE TRIGGER events_no_delete BEFORE DELETE ON events\n"
              "BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; DELETE is refused'); END")
_NO_REPLACE = ("CREATE TRIGGER events_no_replace BEFORE INSERT ON events\n"
               "WHEN NEW.seq IS NOT (SELECT coalesce(max(seq), 0) + 1 FROM events)\n"
               " OR EXISTS (SELECT 1 FROM events WHERE subject = NEW.subject AND version = NEW.version)\n"
               " OR (substr(NEW.id, 17) <> printf('%016x', NEW.seq)\n"
               "     AND EXISTS (SELECT 1 FROM events WHERE id = NEW.id AND " + GIVEN_ID + "))\n"
               "BEGIN SELECT RAISE(ABORT, 'fleetwatch: the event log is append-only; "
               "only the next seq with a new subject version and id may be inserted'); END")
_GIVEN_INDEX = f"CREATE UNIQUE INDEX events_given_id ON events(id) WHERE {GIVEN_ID}"
BLOCK_SHIFT = 12  # event_types blocks: 4096 seqs
_EVENT_TYPES = ("CREATE TABLE event_types (type TEXT NOT NULL, block INTEGER NOT NULL, PRIMARY KEY (type, block)) "
                "WITHOUT ROWID")
# name -> (kind, exact sql); the UNIQUE(subject, version) autoindex has no SQL of its own
GUARDS: dict[str, tuple[str, str]] = {
    "events_no_update": ("trigger", _NO_UPDATE), "events_no_delete": ("trigger", _NO_DELETE),
    "events_no_replace": ("trigger", _NO_REPLACE), "events_given_id": ("index", _GIVEN_INDEX)}
_AUTOINDEX = "sqlite_autoindex_events_1"  # UNIQUE (subject, version)

_V2_TO_V3 = f"""
DROP TRIGGER IF EXISTS events_no_update;
DROP TRIGGER IF EXISTS events_no_delete;
{_NO_UPDATE};
{_NO_DELETE};
{_NO_REPLACE};
{_EVENT_TYPES};
INSERT INTO event_types SELECT DISTINCT type, seq >> {BLOCK_SHIFT} FROM events;
DELETE FROM snapshots;
ALTER TABLE snapshots ADD COLUMN head BLOB;
ALTER TABLE snapshots ADD COLUMN digest BLOB;
"""

# v1 -> v2: rebuild `events` without the UNIQUE on id (SQLite cannot drop a column constraint)
_V1_TO_V2 = f"""
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
ALTER TABLE events RENAME TO events_v1;
{_EVENTS_V2}
INSERT INTO events SELECT seq, id, time, type, subject, version, data, hash FROM events_v1 ORDER BY seq;
DROP TABLE events_v1;
"""

# Migrations from version N to N+1, applied in one transaction. Index = from-version.
# A new file is created at v1 and migrated (one code path for every file).
MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1, 1: _V1_TO_V2, 2: _V2_TO_V3}


def guard_problems(db: apsw.Connection) -> list[str]:
    """What is wrong with the append-only guards of ``events`` (empty: all present, exactly as
    created): a missing, edited or extra trigger, a missing index."""
    rows = {n: (k, s) for k, n, s in sqlrows.master_rows(
        db, "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'events' AND type IN ('trigger', 'index')")}
    out = []
    for name, (kind, sql) in GUARDS.items():
        got = rows.get(name)
        if got is None:
            out.append(f"{kind} {name} is missing")
        elif got != (kind, sql):
            out.append(f"{kind} {name} differs from the one fleetwatch created")
    if _AUTOINDEX not in rows:
        out.append("the UNIQUE (subject, version) index is missing")
    out += [f"{k} {n} was added by someone else" for n, (k, _) in sorted(rows.items())
            if k == "trigger" and n not in GUARDS]
    return out


def restore_guards(db: apsw.Connection) -> None:
    """Put every guard back exactly as created, in one transaction: a foreign or edited trigger,
    or an edited guard index, is dropped and the expected one created; ``event_types`` relisted. The rows are not touched
    (run ``verify`` afterwards); a missing UNIQUE (subject, version) cannot be put back this way."""
    with db:
        for k, n, text in sqlrows.master_rows(
                db, "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'events' AND type IN "
                "('trigger', 'index') AND name NOT LIKE 'sqlite_autoindex%'"):
            if GUARDS.get(n) != (k, text) and (k == "trigger" or n in GUARDS):
                db.execute(f'DROP {k.upper()} "{n}"')
        have = set(sqlrows.str_column(db, "SELECT name FROM sqlite_master WHERE tbl_name = 'events'"))
        for name, (_, create) in GUARDS.items():
            if name not in have:
                db.execute(create)
        if sqlrows.exists(db, "SELECT 1 FROM sqlite_master WHERE name = 'event_types'"):  # relist
            db.execute(f"INSERT OR IGNORE INTO event_types SELECT DISTINCT type, seq >> {BLOCK_SHIFT} FROM events")


def is_utf8(path: str) -> bool:
    """Whether ``path`` is UTF-8 text: a name with other bytes reaches Python as lone surrogates,
    which apsw cannot hand to SQLite (a UnicodeEncodeError traceback from any command given it)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_path(path: str, create: bool, *, readonly: bool = False, parents: bool = True) -> None:
    """Refuse a directory, a non-regular, unreadable (or, unless ``readonly``, unwritable) or
    non-SQLite file, and a file with more than one hard link (two names = two WALs for one
    file), with a StoreError. Create a missing file with mode 0600 when ``create``; its missing
    parent folders (0700) only with ``parents`` (an explicit --db with a typo is refused)."""
    if not is_utf8(path):
        raise StoreError("the event log path is not valid UTF-8 (SQLite takes UTF-8 file names)", op="open",
                         path=path, hint="rename the file or folder whose name is not UTF-8")
    if os.path.isdir(path):
        raise StoreError("the event log path is a directory", op="open", path=path,
                         hint="point --db / [store] path at a file, e.g. events.db")
    if os.path.exists(path):
        try:
            st = os.stat(path)
        except OSError as e:
            raise StoreError(f"cannot stat the event log: {e.strerror}", op="open", path=path) from e
        if not stat.S_ISREG(st.st_mode):
            raise StoreError("the event log path is not a regular file", op="open", path=path)
        if st.st_nlink > 1:
            raise StoreError(f"the event log has {st.st_nlink} hard links; SQLite would keep one WAL per "
                             "name and lose commits", op="open", path=path,
                             hint="remove the other names (`find / -xdev -samefile FILE`); to copy a log "
                                  "use `fleetwatch backup PATH`, to alias it use a symlink")
        for suf in ("-wal", "-shm", "-journal"):  # SQLite opens these itself: a FIFO, folder or link fails obscurely
            try:
                mode = os.lstat(path + suf).st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):
                raise StoreError(f"the log's {suf} file is not a regular file (a FIFO, folder, device or symlink)",
                                 op="open", path=path + suf,
                                 hint="move it away (nothing else may sit there: SQLite keeps its own "
                                      f"{suf} file beside the log)")
        if st.st_size:
            try:
                with open(path, "rb") as f:
                    magic = f.read(16)
            except OSError as e:
                raise StoreError(f"cannot read the event log: {e.strerror}", op="open", path=path,
                                 hint="check the file's owner and mode (fleetwatch makes it 0600)") from e
            if magic != b"SQLite format 3\x00":
                raise StoreError("not an SQLite database", op="open", path=path,
                                 hint="--db must name a fleetwatch event log or a new file")
        if not os.access(path, os.R_OK if readonly else os.R_OK | os.W_OK):
            raise StoreError("the event log is not " + ("readable" if readonly else "readable and writable")
                             + " by this user", op="open", path=path, hint="check the file's owner and mode")
        return
    anc = os.path.dirname(path)
    while not os.path.exists(anc):
        anc = os.path.dirname(anc)
    if not os.path.isdir(anc):
        raise StoreError(f"the event log path is unusable: {anc} is not a directory", op="open", path=path,
                         hint="point --db / [store] path at a file in a folder")
    if not create:
        raise StoreError("no event log here yet", op="open", path=path,
                         hint="start the watcher (`fleetwatch run`) or pass --db")
    parent = os.path.dirname(os.path.abspath(path))
    if not parents and not os.path.isdir(parent):
        raise StoreError(f"the folder {parent} does not exist (a typo?); nothing was created", op="create",
                         path=path, hint=f"fix the path, or make the folder first (mkdir -p {shlex.quote(parent)}); "
                         "`fleetwatch run --create` makes it too")
    try:
        if not os.path.isdir(parent):
            private_dir(parent)  # 0700 whatever the umask, parents too (issue 13)
        set_aside_orphans(path)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        if not os.path.isfile(path):
            raise StoreError("cannot create the event log: a parent is not a directory", op="create",
                             path=path, hint="choose a writable path with --db or [store] path") from None
    except OSError as e:
        raise StoreError(f"cannot create the event log: {e.strerror or e}", op="create", path=path,
                         hint="choose a writable path with --db or [store] path") from e


ORPHAN_SUFFIXES = ("-wal", "-shm", "-journal", ".head")


def set_aside_orphans(path: str) -> list[str]:
    """Rename ``-wal``/``-shm``/``-journal``/``.head`` files left at ``path`` by a log that is no
    longer there (deleted or replaced while a watcher ran) to ``<name>.orphan-<time>``: SQLite
    would replay a stale WAL into a new file at that name, and a stale anchor would accuse the new
    log. Kept, not deleted (evidence of what was lost). Returns the new names."""
    import time

    out = []
    for suf in ORPHAN_SUFFIXES:
        src = path + suf
        if os.path.lexists(src):
            dst = f"{src}.orphan-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
            try:
                os.rename(src, dst)
                out.append(dst)
            except OSError:
                pass
    return out


def open_readonly(path: str) -> apsw.Connection:
    """A read-only connection. In a folder where SQLite cannot create the ``-shm`` (a read-only
    copy) and with no ``-wal`` beside the file (so nothing is uncheckpointed and no writer can
    start: it could not create one either), the file is opened ``immutable``. SQLite says
    CantOpen or, for a WAL file whose ``-shm`` it cannot create, ReadOnly (SQLITE_READONLY_CANTINIT:
    what a user who is not root meets; root creates the ``-shm`` whatever the folder's mode)."""
    c = None
    try:
        c = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        c.setbusytimeout(5000)
        c.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return c
    except (apsw.CantOpenError, apsw.ReadOnlyError):
        if c is not None:
            c.close()
        if os.path.exists(path + "-wal"):
            raise
    from urllib.parse import quote

    return apsw.Connection(f"file:{quote(path)}?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)


def classify(conn: apsw.Connection, path: str) -> int:
    """The schema version of the file behind ``conn`` (0 = empty, to be created); raises
    SchemaError for another application's database or a newer fleetwatch schema."""
    # one statement, one snapshot: read apart, a file another process was creating could show its
    # tables but not yet its application_id ("another application's database", a race)
    [(app, ver, tables)] = sqlrows.int_triples(
        conn, "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM "
              "pragma_user_version), (SELECT count(*) FROM sqlite_master)")
    if app == 0 and tables == 0:
        return 0
    if app != APPLICATION_ID:
        raise SchemaError("not a fleetwatch event log (another application's SQLite database)",
                          op="open", path=path, hint="pass --db with a new file name; this file was not touched")
    if ver > SCHEMA_VERSION:
        raise SchemaError(f"the log has schema version {ver}, newer than this fleetwatch ({SCHEMA_VERSION})",
                          op="open", path=path, hint="upgrade fleetwatch; the file was not touched")
    have = set(sqlrows.str_column(conn, "SELECT name FROM sqlite_master WHERE type = 'table'"))
    if ver >= 1 and not {"events", "snapshots"} <= have:
        raise SchemaError("the log is damaged: its events or snapshots table is missing", op="open", path=path,
                          hint="restore it from a backup (`fleetwatch backup`); the file was not touched")
    return ver


def migrate(db: apsw.Connection, path: str) -> None:
    """Bring an older schema up to SCHEMA_VERSION in one transaction (re-checked under the
    write lock, so two processes opening a new file at once do not both create it)."""
    if classify(db, path) >= SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        ver = classify(db, path)
        for v in range(ver, SCHEMA_VERSION):
            db.execute(MIGRATIONS[v])
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException as e:
        db.execute("ROLLBACK")
        if isinstance(e, apsw.Error):
            raise SchemaError(f"schema migration failed, nothing changed: {type(e).__name__}: {e}",
                              op="migrate", path=path, hint="report this; the file was not touched") from e
        raise


__all__ = ["APPLICATION_ID", "GIVEN_ID", "GUARDS", "MIGRATIONS", "SCHEMA_VERSION", "check_path", "classify",
           "guard_problems", "migrate", "open_readonly", "restore_guards", "set_aside_orphans"]
