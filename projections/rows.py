"""Rows of two-level tables (missions' work packages, swarms' children) that a tick no longer lists (pure)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def unseen(tree: dict[str, Any], children: str, seen: set[tuple[str, str]],
           live: set[str]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(parent, child, record) of every child the state holds that this tick did not list, in id
    order, when the source that reported it answered this tick (``live``): a row gone from its
    table. A source that failed or did not answer makes nothing gone."""
    for p in sorted(tree):
        kids = tree[p][children]
        for c in sorted(kids):
            rec = kids[c]
            if (p, c) not in seen and rec["source"] in live:
                yield p, c, rec
