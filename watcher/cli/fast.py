"""The fast start path: `tail`, `status`, `summary`, `verify` and `export` without typer.

typer (and what it pulls in) costs more than these commands' whole work on a small log, and
scripts and the board call them in loops. ``main(argv)`` reads the plain, common forms of these
commands' options and calls the very functions their typer commands call
(``watcher.cli.log.tail`` …, ``watcher.cli.status.status`` …), so output, exit codes and error
text are the same. Anything else returns None and the console script hands the whole command
line to the typer app: ``--help``/``-h``, ``--``, unknown or malformed options, a value typer
would refuse (``-n -1``, ``--since x``), joined short options (``-fn5``), positional arguments, and
the options this path does not take (``verify --expect-head``/``--restore-guards``), so typer
keeps the one wording of help and usage errors. ``tests/test_fast_cli.py`` checks that these
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
        from watcher.cli import status as mod
    else:
        from watcher.cli import log as mod
    return getattr(mod, name)


# Modules msgspec's import pulls in and these paths never use (import_msgspec_lean)
STAND_INS = ("platform", "textwrap", "msgspec.inspect")


def import_msgspec_lean() -> None:
    """Import msgspec without typing_extensions (which imports inspect, ast, dis, tokenize): about
    a tenth of `status`'s start (bench_rebuild.py's CLI rows). msgspec takes typing_extensions'
    ``get_type_hints``/``Required``/``NotRequired`` if it can import it, else typing's own. On
    Python >= 3.11 (pyproject's floor) ``Required``/``NotRequired`` are typing's very objects and
    typing_extensions' ``get_type_hints(..., include_extras=True)`` (msgspec's only call) returns
    typing's answer unchanged; fleetwatch declares no typing_extensions-only form (ReadOnly …:
    tests/test_fast_cli.py checks no module imports it). The block lasts only for msgspec's own
    import: anything imported later gets typing_extensions as usual.

    Three more modules msgspec's import pulls in and never uses on these paths are stood in for by
    ``Deferred`` modules while it imports (STAND_INS): ``platform``, which ``uuid`` imports only to
    ask ``platform.system()`` once (answered from ``os.uname()``, as platform does on POSIX), and
    ``textwrap``, which ``msgspec.json``'s schema generator uses (``msgspec.json.schema``); both
    compile regular expressions at import (~3-4 ms of `status`'s start, 2026-12-01). And
    ``msgspec.inspect`` (~1.4 ms: some thirty Struct classes), which ``msgspec/__init__`` and the
    schema generator bind as a module and call only for ``msgspec.inspect.*`` or a schema. Any other
    use of one of them imports the real module then; after msgspec's import ``import platform``,
    ``textwrap``, ``msgspec.inspect`` give the real modules as usual (``msgspec.inspect`` then is
    the real module too). ``datetime`` is loaded as Python 3.12 lays it out (``datetime_from_c``),
    and ``typing.ForwardRef`` answers msgspec's one import-time probe without compiling
    (``probe_forward_ref``)."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    datetime_from_c()
    stand_ins = {n: Deferred(n) for n in STAND_INS if n not in sys.modules}
    if "platform" in stand_ins:
        import os

        stand_ins["platform"].system = lambda: os.uname().sysname  # type: ignore[attr-defined]
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # "import" raises ImportError
    sys.modules.update(stand_ins)
    import typing

    forward_ref = typing.ForwardRef
    typing.ForwardRef = probe_forward_ref(forward_ref)  # type: ignore[misc]
    try:
        import msgspec  # noqa: F401
    finally:
        typing.ForwardRef = forward_ref  # type: ignore[misc]
        del sys.modules["typing_extensions"]
        for n, mod in stand_ins.items():
            if sys.modules.get(n) is mod:
                del sys.modules[n]


def probe_forward_ref(real: Any) -> Any:
    """What ``typing.ForwardRef`` is while msgspec imports: ``msgspec._utils`` calls
    ``typing.ForwardRef("Foo", is_class=True)`` once at import, only to learn whether
    ``ForwardRef`` takes ``is_class``; every later use looks ``typing.ForwardRef`` up again (the real
    one by then). The real class compiles its string, and a process's first ``compile()`` builds
    CPython's AST types: ~10 M instructions, 2-3 ms of `status`'s start (valgrind, 2026-12-01),
    for a name nobody evaluates. This stand-in answers the probe as the real class would (raises
    TypeError exactly when the real ``__init__`` takes no keyword it is given) and compiles nothing.
    It pays only while nothing else on the path compiles an annotation string (typing.NamedTuple
    fields under ``from __future__ import annotations`` do: each is a ForwardRef)."""
    code = real.__init__.__code__
    takes = set(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])

    def probe(arg: Any, *args: Any, **kw: Any) -> None:
        if len(args) > 2 or not set(kw) <= takes:
            raise TypeError(f"ForwardRef() got an unexpected argument {sorted(set(kw) - takes)}")

    return probe


DATETIME_ALL = ("date", "datetime", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR", "UTC")


def datetime_from_c() -> None:
    """On Python 3.11 make ``datetime`` the module 3.12 makes it: the C ``_datetime``'s names (and
    ``__all__``, ``sys``), without first running the pure-Python implementation that
    ``datetime.py`` defines and then replaces with ``from _datetime import *`` (1.3 ms of
    `status`'s start, 2026-12-01; msgspec imports datetime). The classes are the very same C types
    either way, so every date, time and pickle behaves as before; only the unused pure-Python
    definitions are never made. ``__file__``/``__spec__`` name datetime.py. Python >= 3.12, no
    ``_datetime`` (another implementation) or datetime already imported: nothing done."""
    if sys.version_info >= (3, 12) or "datetime" in sys.modules:
        return
    try:
        import _datetime
    except ImportError:  # pragma: no cover - CPython always has it
        return
    import os

    mod = type(sys)("datetime", _datetime.__doc__)
    mod.__dict__.update({k: v for k, v in vars(_datetime).items() if not k.startswith("__")})
    mod.__all__ = DATETIME_ALL  # type: ignore[attr-defined]
    mod.sys = sys  # type: ignore[attr-defined]  # datetime.py's one other public leftover
    mod.__file__ = os.path.join(os.path.dirname(os.__file__), "datetime.py")
    mod.__spec__ = type(os.__spec__)("datetime", None, origin=mod.__file__)  # a ModuleSpec, no importlib
    mod.__package__ = ""
    sys.modules["datetime"] = mod


class Deferred(type(sys)):  # type: ignore[misc]  # a module type
    """A stand-in module: the first attribute it does not have imports the real module (once
    the stand-in has left ``sys.modules``) and answers from it."""

    def __getattr__(self, name: str) -> Any:
        import importlib

        real = sys.modules.get(self.__name__)
        if real is None or real is self:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
        return getattr(real, name)


def main(argv: list[str]) -> int | None:
    """Run the command and return its exit status, or None when typer must handle it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    name, kw = parsed
    import gc

    # The imports allocate ~10^5 objects that live until exit (functions, classes, code): with the
    # cyclic GC on, each collection on the way scans them again (3-8 ms of `status`'s start on
    # bench_rebuild.py's log). So it is off while importing, and what they made is frozen
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
