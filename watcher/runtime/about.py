"""What is about one agent in the log (`tail --subject a7`, the board's agent view): its own
``agent:`` events, its ``dod:`` events, and the notice and silence events that name it (a
notice's condition ids ``subject|CLASS#n[@rev]``; a silence's subject glob). Read-only."""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any


def about(exact: str) -> set[str] | None:
    """The subjects `tail --subject` gathers for an agent (``agent:a7``: also ``dod:a7``, and the
    notice and silence events naming either); None for any other subject (exact match only)."""
    if not exact.startswith("agent:"):
        return None
    return {exact, "dod:" + exact[len("agent:"):]}


def covers(rec: Any, subjects: set[str]) -> bool:
    """Whether ``rec`` is about one of ``subjects``: its own subject, a notice whose conditions
    (``subject|CLASS#n`` ids, ``@rev`` keys) name one, or a silence whose pattern matches one."""
    subj = rec.subject
    if subj in subjects:
        return True
    ev = rec.event
    if subj.startswith("notice:"):
        ids = getattr(ev, "keys", None) or getattr(ev, "conditions", None) or ()
        return any(isinstance(k, str) and k.rpartition("|")[0] in subjects for k in ids)  # an id may hold "|"
    if subj.startswith("silence:") and rec.type == "silence.added":
        pat = getattr(ev, "subject_match", None)
        return isinstance(pat, str) and any(fnmatch.fnmatchcase(x, pat) for x in subjects)
    return False


def only_about(recs: Iterable[Any], subjects: set[str], limit: int | None = None) -> Iterable[Any]:
    n = 0
    for rec in recs:
        if covers(rec, subjects):
            yield rec
            n += 1
            if limit is not None and n >= limit:
                return


def last_about(log: Any, n: int, types: list[str] | None, subjects: set[str]) -> list[Any]:
    """The last ``n`` events about ``subjects``, oldest first: the subjects' own through the index,
    notices and silences read backwards in growing windows until ``n`` of them name one."""
    found = {r.seq: r for s in sorted(subjects) for r in log.last(n, types=types, subject=s, exact=True,
                                                                   damaged="yield")}
    for prefix in ("notice:", "silence:"):
        k = max(64, 4 * n)
        while True:
            recs = log.last(k, types=types, subject=prefix)
            hits = [r for r in recs if covers(r, subjects)]
            if len(hits) >= n or len(recs) < k:
                break
            k *= 4
        found.update((r.seq, r) for r in hits[-n:] if n)
    return [found[q] for q in sorted(found)[-n:]] if n else []
