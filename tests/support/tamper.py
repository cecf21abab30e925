"""A log file edited as a hostile user would: straight through SQLite, with the append-only guards
dropped for the edit and put back, so the file looks untouched to anything but the hash chain."""
from __future__ import annotations

import apsw

import events.schema as evschema


def raw(path: str, sql: str, *args) -> None:
    """Run ``sql`` (with ``args``) on the log at ``path``, the guards dropped for the edit and put back."""
    c = apsw.Connection(path)
    c.execute("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP TRIGGER events_no_replace")
    c.execute(sql, args)
    evschema.restore_guards(c)
    c.close()
