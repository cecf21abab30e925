"""``fw(*args)``: one real ``fleetwatch`` command in a subprocess, run from this checkout with no
``FLEETWATCH_*`` variable of the caller's and no user config (``XDG_CONFIG_HOME`` points nowhere),
so only the paths a test passes count."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
FW = [sys.executable, "-c", "import sys; from watcher.entry import main; sys.argv[0] = 'fleetwatch'; main()"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
ENV.update(PYTHONPATH=ROOT, XDG_CONFIG_HOME="/nonexistent/config")


def fw(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``env``: variables added to the clean environment."""
    return subprocess.run([*FW, *args], capture_output=True, text=True, timeout=timeout, env={**ENV, **(env or {})})


# Another user (nobody), for a test run as root that needs a user who may not read or write a file
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []


def as_nobody_env(base) -> dict[str, str]:
    """The other user's environment: its HOME and XDG folders under ``base`` (the conftest's XDG
    folders are root's: since 730d587 a config path the user may not stat is an error, not absent)."""
    return {**os.environ, "HOME": str(base), "XDG_CONFIG_HOME": os.path.join(base, ".config"),
            "XDG_STATE_HOME": os.path.join(base, ".state")}
