"""`fleetwatch --version` was slower than `fleetwatch status` (it built the typer app and read
importlib.metadata, issue 45): it now reads the install's METADATA and imports neither. Speed
itself is the benchmarks' business; this checks the output and what is imported."""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from tests.support.fwcli import ENV, ROOT

CODE = ("import sys; from watcher.entry import main; sys.argv = ['fleetwatch', '--version']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    rc = e.code\n"
        "print(rc, sorted(m for m in ('typer', 'click', 'rich', 'importlib.metadata', 'msgspec', 'apsw')"
        " if m in sys.modules), file=sys.stderr)")


def test_version_prints_the_installed_version_without_typer_or_metadata():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)
    assert r.stdout == f"fleetwatch {version('fleetwatch')}\n"
    assert r.stderr.strip().splitlines()[-1] == "0 []", r.stderr


def test_version_with_another_option_is_typers():
    r = subprocess.run([sys.executable, "-c", CODE.replace("'--version']", "'--version', '--help']")],
                       capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)
    assert r.stdout.startswith("fleetwatch ") and "typer" in r.stderr.splitlines()[-1]
