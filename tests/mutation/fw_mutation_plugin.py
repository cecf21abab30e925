"""pytest plugin of the mutation gate (``-p fw_mutation_plugin``; see mutate.py). Two jobs, by environment:

- ``FW_MUT_COVERAGE=<rcfile>``: measure line coverage per test. Coverage starts when this plugin is
  imported (before any test module imports the core), so lines run at import or collection get the
  empty context; each test's setup, call and teardown run under the context ``<nodeid>``. Python
  subprocesses (``fleetwatch run``) are measured too (COVERAGE_PROCESS_START): they read the same
  rcfile, whose static context is ``${FW_MUT_CTX}``, set here to the running test's nodeid. The
  duration of each test and the tests that failed go to ``FW_MUT_DURATIONS`` (JSON).
- ``FW_MUT_SELECT=<file>``: run only the tests whose nodeid is a line of the file (in collection
  order); the others are deselected.
"""
from __future__ import annotations

import json
import os
import time

import pytest

_cov = None
if os.environ.get("FW_MUT_COVERAGE"):
    import coverage

    os.environ["COVERAGE_PROCESS_START"] = os.environ["FW_MUT_COVERAGE"]
    os.environ["FW_MUT_CTX"] = ""
    _cov = coverage.Coverage(config_file=os.environ["FW_MUT_COVERAGE"])
    _cov.start()
_durations: dict[str, float] = {}
_failed: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _cov is None:
        yield
        return
    _cov.switch_context(item.nodeid)
    os.environ["FW_MUT_CTX"] = item.nodeid
    t0 = time.monotonic()
    yield
    _durations[item.nodeid] = time.monotonic() - t0
    _cov.switch_context("")
    os.environ["FW_MUT_CTX"] = ""


def pytest_runtest_logreport(report):
    if _cov is not None and report.failed and report.nodeid not in _failed:
        _failed.append(report.nodeid)


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("FW_MUT_SELECT")
    if not path:
        return
    with open(path) as f:
        wanted = set(f.read().splitlines())
    keep = [it for it in items if it.nodeid in wanted]
    drop = [it for it in items if it.nodeid not in wanted]
    missing = wanted - {it.nodeid for it in keep}
    if missing:  # the selection names a test that is not collected: fail loudly, never pass silently
        raise pytest.UsageError(f"fw_mutation_plugin: {len(missing)} selected tests not collected: "
                                f"{sorted(missing)[:3]}")
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_unconfigure(config):
    if _cov is None:
        return
    _cov.stop()
    _cov.save()
    out = os.environ.get("FW_MUT_DURATIONS")
    if out:
        with open(out, "w") as f:
            json.dump({"durations": _durations, "failed": _failed}, f)
