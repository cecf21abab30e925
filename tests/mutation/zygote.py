"""A pytest launcher for the mutation gate: imports pytest, Hypothesis and the third-party libraries
once, then forks one child per request, so a mutant's test run does not pay their import again
(about half of a short run). Never imports the project: each child imports it from its own copy.

Protocol (one request at a time, JSON lines): stdin ``{"cwd", "argv", "env", "out"}`` -> stdout
``{"pid": N}`` when the child started, then ``{"rc": N}`` when it ended (-9 when killed). The
child is a session leader (its `fleetwatch run` subprocesses die with its process group).
"""
from __future__ import annotations

import importlib
import json
import os
import sys

for _name in ("pytest", "hypothesis", "hypothesis.strategies", "apsw", "msgspec", "apprise", "typer",
              "typer.testing", "click", "werkzeug", "tomllib"):
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001 - a library the tests may not need
        pass
_OURS = ("events", "projections", "watcher", "tests", "conftest")
assert not [m for m in sys.modules if m.split(".")[0] in _OURS], "the zygote must not import the project"


def _child(req: dict) -> None:
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)  # never the zygote's request pipe
    os.dup2(null, 0)
    os.close(null)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.path[:0] = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.argv = ["pytest", *req["argv"]]
    import pytest
    rc = 3
    try:
        rc = int(pytest.main(req["argv"]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)


def main() -> None:
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        print(json.dumps({"rc": rc}), flush=True)


if __name__ == "__main__":
    main()
