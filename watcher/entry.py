"""The console script. Two fast paths never import typer/rich: ``fleetwatch hook`` (a Claude Code
hook must start and exit in well under 100 ms) and the plain forms of ``tail``, ``status``,
``summary``, ``verify`` and ``export`` (``watcher.cli.fast``: the same functions the typer
commands call); everything else, ``--help`` included, is the typer app."""
from __future__ import annotations

import sys

FAST = ("tail", "status", "summary", "verify", "export")
# Options whose value is a file name: the only arguments that may hold bytes that are not UTF-8
# (Python hands them over as lone surrogates, which SQLite, msgspec and stdout refuse)
PATH_OPTS = frozenset(("--config", "--db", "--html", "--goals-dir", "--settings", "--command"))


def not_utf8(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 and is not a file name (a ``PATH_OPTS`` value or
    ``backup``'s PATH), else None. An agent id, subject, type, verifier or evidence given so
    was a UnicodeEncodeError traceback (`verdict X met --force`, `tail --subject X`)."""
    prev = ""
    for i, a in enumerate(argv):
        if not a.isascii():
            try:
                a.encode("utf-8")
            except UnicodeEncodeError:
                name = a.partition("=")[0]
                if not (prev in PATH_OPTS or name in PATH_OPTS or (argv[0] == "backup" and i and a[:1] != "-")):
                    return a
        prev = a
    return None


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and not any(a in ("install", "--help", "-h") for a in argv[1:2] + argv[1:]):
        from watcher.hook.adapter import run_hook

        sys.exit(run_hook(argv[1:]))
    bad = not_utf8(argv)
    if bad is not None:
        from projections.text import safe

        print(f"fleetwatch: argument '{safe(bad)}' is not valid UTF-8; nothing done\n"
              "  hint: ids, subjects, types and texts are UTF-8 (an agent whose folder name is not "
              "has \\xNN escapes in its id, as `fleetwatch status` shows it)", file=sys.stderr)
        sys.exit(2)
    if argv[:1] and argv[0] in FAST:
        from watcher.cli.fast import main as fast

        rc = fast(argv)
        if rc is not None:
            sys.stdout.flush()
            sys.exit(rc)
    from watcher.cli import app

    app()
