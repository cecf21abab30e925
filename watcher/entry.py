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


# errnos only a write meets: the disk (or quota) behind stdout or a file is full (EIO is left out:
# reads meet it too, and "writing failed" would be a guess)
OUTPUT_FULL = frozenset((28, 122, 27))  # ENOSPC, EDQUOT, EFBIG


def main() -> None:
    """The command, and the one answer to an output that cannot be written: `fleetwatch export >
    FILE` on a full disk (or `> /dev/full`) was a Python traceback from whichever print met it."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and not any(a in ("install", "--help", "-h") for a in argv[1:2] + argv[1:]):
        from watcher.hook.adapter import run_hook  # always exit 0 (Claude Code's hook): never through here

        sys.exit(run_hook(argv[1:]))
    try:
        run(argv)
    except KeyboardInterrupt:  # Ctrl-C in a fast-path command (`verify`, `export` of a big log): as typer's, no traceback
        sys.exit(130)
    except OSError as e:
        if e.errno not in OUTPUT_FULL:
            raise
        import os

        try:  # the final flush of what is still buffered would fail (and say so) again
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, sys.stdout.fileno())
            os.close(fd)
        except (OSError, ValueError):
            pass
        from projections.text import safe

        where = f" ({safe(e.filename)})" if e.filename else ""  # a file's name when the error has one; else the output
        print(f"fleetwatch: writing failed: {e.strerror}{where}; what was being written is incomplete\n"
              "  hint: is a disk full (the one the output goes to, or the file's)? free space, or write elsewhere",
              file=sys.stderr)
        sys.exit(1)


def version() -> str:
    """This install's version, from its ``fleetwatch-*.dist-info/METADATA`` on ``sys.path`` (a
    listdir per entry; importlib.metadata costs more than a `status`), else importlib's answer."""
    import os

    for d in sys.path:
        try:
            names = os.listdir(d or ".")
        except OSError:
            continue
        for n in names:
            if n.startswith("fleetwatch-") and n.endswith(".dist-info"):
                try:
                    with open(os.path.join(d or ".", n, "METADATA"), encoding="utf-8") as f:
                        for line in f:
                            if line.startswith("Version:"):
                                return line.split(":", 1)[1].strip()
                            if not line.strip():
                                break
                except OSError:
                    pass
    from watcher.cli import version as slow

    return slow()


def run(argv: list[str]) -> None:
    bad = not_utf8(argv)
    if bad is not None:
        from projections.text import safe

        print(f"fleetwatch: argument '{safe(bad)}' is not valid UTF-8; nothing done\n"
              "  hint: ids, subjects, types and texts are UTF-8 (an agent whose folder name is not "
              "has \\xNN escapes in its id, as `fleetwatch status` shows it)", file=sys.stderr)
        sys.exit(2)
    if argv == ["--version"]:  # without typer (and importlib.metadata): faster than `status`
        print(f"fleetwatch {version()}")
        sys.stdout.flush()
        sys.exit(0)
    if argv[:1] and argv[0] in FAST:
        from watcher.cli.fast import main as fast

        rc = fast(argv)
        if rc is not None:
            sys.stdout.flush()
            sys.exit(rc)
    from watcher.cli import app

    app()
