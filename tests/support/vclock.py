"""Goal files written on a test's virtual clock. A goal.json's ``last_activity`` later than the
file's mtime counts as the mtime (watcher/sources/parse.py: no file records activity after it
was written), so a test whose virtual ``now`` is ahead of the real clock must date its files on
that clock too, or their activity is the real (earlier) write time."""
from __future__ import annotations

import itertools
import os

_WRITES = itertools.count(1)


def written_at(path, last_activity) -> None:
    """Set ``path``'s mtime just after ``last_activity`` (epoch seconds; anything else: left as it
    is), one microsecond apart per call so that no rewrite keeps an earlier one's (inode, size,
    mtime) key. Call it on the temporary file before the rename: no inotify event of its own."""
    if isinstance(last_activity, (int, float)) and not isinstance(last_activity, bool):
        ns = int(last_activity * 1e9) + next(_WRITES) * 1000
        os.utime(path, ns=(ns, ns))
