"""The fast start path: `tail`, `status`, `summary`, `verify` and `export` without typer.

typer (and what it pulls in) costs more than these commands' whole work on a small log, and
scripts and the board call them in loops. ``main(argv)`` reads the plain, common forms of these
commands' options and calls the very functions their typer commands call
(``watcher.cli.log.tail`` …, ``watcher.cli.status.status`` …), so output, exit codes and error
text are the same. Anything else returns None and the console script hands the whole command
line to the typer app: ``--help``/``-h``, ``--``, unknown or malformed options, a value typer
would refuse (``-n -1``, ``--since x``), joined short options (``-fn5``), positional arguments, and
the options this path does not take (``verify --expect-head``/``--restore-guards``), so typer
keeps the one wording of help and usage errors. ``tests/watcher/cli/test_fast_cli.py`` checks that these
tables name the typer commands' options exactly.

Importing this module imports no typer, click, rich, apprise or watchdog (rich only when a
human reads a TTY, as in the typer commands).
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported later, with the GC off (see main)
    from typing import Any


class Opt:
    """One option a fast command reads (a plain class: no typing.NamedTuple before main)."""

    __slots__ = ("dest", "kind", "names")

    def __init__(self, dest: str, kind: str, names: tuple[str, ...]) -> None:
        self.dest = dest      # the keyword of the command function
        self.kind = kind      # "flag" | "int" | "str" | "list"
        self.names = names

    def __repr__(self) -> str:
        return f"Opt({self.dest!r}, {self.kind!r}, {self.names!r})"


COMMON = (Opt("config", "str", ("--config",)), Opt("db", "str", ("--db",)))
SPECS: dict[str, tuple[Opt, ...]] = {
    "tail": (Opt("follow", "flag", ("-f", "--follow")), Opt("lines", "int", ("-n", "--lines")),
             Opt("since", "int", ("--since",)), Opt("type_", "list", ("--type", "-t")),
             Opt("subject", "str", ("--subject", "-s")), Opt("verbose", "flag", ("-v", "--verbose")),
             Opt("as_json", "flag", ("--json",)), *COMMON),
    "verify": (Opt("as_json", "flag", ("--json",)), *COMMON),
    "export": (Opt("since", "int", ("--since",)), *COMMON),
    "status": (Opt("json", "flag", ("--json",)), *COMMON),
    "summary": (Opt("json", "flag", ("--json",)), *COMMON),
}
# options of these typer commands that only the typer path takes
TYPER_ONLY: dict[str, frozenset[str]] = {"verify": frozenset(("--expect-head", "--restore-guards"))}


def parse(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """(command, keyword arguments) for the forms this path takes; None: let typer do it."""
    if not argv or argv[0] not in SPECS:
        return None
    name, args = argv[0], argv[1:]
    by_name = {n: o for o in SPECS[name] for n in o.names}
    kw: dict[str, Any] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        value: str | None = None
        if tok.startswith("--") and "=" in tok:
            tok, value = tok.split("=", 1)
        opt = by_name.get(tok)
        if opt is None:  # help, --, a positional, an unknown or joined option: typer's answer
            return None
        if opt.kind == "flag":
            if value is not None:
                return None
            kw[opt.dest] = True
            continue
        if value is None:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if opt.kind == "int":
            try:
                n = int(value)
            except ValueError:
                return None
            if n < 0 or n >= 1 << 63:  # every int option here has min=0; larger than SQLite takes: typer's way
                return None
            kw[opt.dest] = n
        elif opt.kind == "list":
            kw.setdefault(opt.dest, []).append(value)
        else:
            kw[opt.dest] = value
    return name, kw


def _command(name: str):
    if name in ("status", "summary"):
        from watcher.cli import status

        return getattr(status, name)
    from watcher.cli import log

    return getattr(log, name)


def import_msgspec_lean() -> None:
    """Import msgspec without typing_extensions (which imports inspect, ast, dis, tokenize).
    Kept because it pays: ~10 % of `status`'s start and ~13 % of `tail -n 20`'s (docs/bench.md).

    msgspec takes typing_extensions' ``get_type_hints``/``Required``/``NotRequired`` if it can
    import it, else typing's own. On Python >= 3.11 (pyproject's floor) ``Required``/``NotRequired``
    are typing's very objects and typing_extensions' ``get_type_hints(..., include_extras=True)``
    (msgspec's only call) returns typing's answer unchanged; fleetwatch declares no
    typing_extensions-only form (ReadOnly …: tests/watcher/cli/test_fast_cli.py checks no module imports it).
    The block lasts only for msgspec's own import: anything imported later gets typing_extensions
    as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # "import" raises ImportError
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


def main(argv: list[str]) -> int | None:
    """Run the command and return its exit status, or None when typer must handle it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    name, kw = parsed
    import gc

    # The imports allocate ~10^5 objects that live until exit (functions, classes, code): with the
    # cyclic GC on, each collection on the way scans them again. So it is off while importing,
    # and what they made is frozen
    # (gc.freeze: never scanned again) before the command runs with the GC as usual.
    gc.disable()
    try:
        import_msgspec_lean()
        from events.errors import FleetwatchError
        from watcher.cli.plain import error_text

        command = _command(name)
    finally:
        gc.freeze()
        gc.enable()
    try:
        command(**kw)
    except FleetwatchError as e:
        print(error_text(e), file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        from watcher.cli.log import _quiet_pipe

        _quiet_pipe()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0
