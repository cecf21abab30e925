"""The pure core: folds of the event log and judges of what the sources observe.

No I/O and no clock here: time comes from ``rec.time`` or a ``now`` parameter. watcher/ reads,
schedules and writes; events/ holds the log; projections/ only computes.

Rooms (one package per projection, each ``__init__`` states its contract and ``USES``: the rooms
it may import besides the shared modules, tests/repo/test_architecture.py checks it):
``fleet`` (classes of agents, fan-out), ``dod`` (done for real), ``runs`` (the outer loop's steps
and rules), ``missions`` (work packages), ``swarms``, ``notify`` (conditions and the push
pipeline), ``report``, ``plans`` (the closed loop), ``present`` (what the person sees).

Shared modules every room may read: ``classes`` (the one class table), ``observations`` (what a
tick observed), ``base`` (the Projection protocol and the registry), ``identity``, ``rows``,
``text``.

A module with a ``typing.NamedTuple`` has no ``from __future__ import annotations``: the NamedTuple
would compile each of its string field annotations (a ForwardRef each), and a process's first
compile() builds CPython's AST types; `status` loads such modules (tests/watcher/cli/test_cli_start.py:
the fast paths compile nothing).
"""

# the modules every room may import (tests/repo/test_architecture.py)
SHARED: tuple[str, ...] = ("base", "classes", "identity", "observations", "rows", "text")
