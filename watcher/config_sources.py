"""The one table of source kinds (``[[sources]] kind``): which class reads a kind and which keys a
source of that kind must set. watcher/config.py validates every ``[[sources]]`` entry from it and
watcher/sources/ makes each source from it (re-exported there as ``watcher.sources.KINDS``).
Imports nothing of fleetwatch (watcher/config.py imports it)."""
# No `from __future__ import annotations`: a NamedTuple's string annotations would be compiled at
# start (tests/watcher/cli/test_cli_start.py: a fast path compiles no source text)
from typing import NamedTuple


class Kind(NamedTuple):
    module: str                       # the module of its class (imported when a source of the kind is made)
    cls: str                          # a watcher.sources.Source
    needs: tuple = ()                 # keys a source of this kind must set (tuple[str, ...])
    entities: tuple = ()              # the `entity` values it gives rows of (empty: it reads no `entity`)


KINDS = {
    "goals": Kind("watcher.sources.files", "GoalsSource", ("glob",)),
    "steps": Kind("watcher.sources.files", "StepsSource", ("glob",)),
    "command": Kind("watcher.sources.command", "CommandSource", ("argv",), ("agent", "swarm")),
    "tmux": Kind("watcher.sources.proc", "TmuxSource"),
    "sqlite": Kind("watcher.sources.sqlite", "SqliteSource", ("path", "query", "key", "entity"),
                   ("wp", "circuit", "swarm")),
    "claude": Kind("watcher.sources.claude", "ClaudeSource"),
}

# what a missing key's message shows (the form of its value)
EXAMPLE = {"argv": 'argv = ["prog", "arg", ...]'}
