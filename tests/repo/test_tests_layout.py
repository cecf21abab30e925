"""The test suite's own layout: test modules share helpers through tests/support/ and fixtures
through conftest.py, never by importing from one another (a test module imported by another runs
its module-level code twice, and a fixture imported by name shadows the conftest's and trips F811).

Read with ast, so an import inside a function counts as much as one at the top.
"""
from __future__ import annotations

import ast
import pathlib

from tests.support.exe import TESTS

ROOT = TESTS.parent


def _py_files() -> list[pathlib.Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _is_test_module(path: pathlib.Path) -> bool:
    return path.name.startswith("test_")


def _imported(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in ``path``, relative ones resolved against its package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]   # `from tests import test_x`
    return out


def _names_a_test_module(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] != "tests":
        return parts[0].startswith("test_") and len(parts) == 1   # `import test_x` (rootdir on sys.path)
    return any(p.startswith("test_") for p in parts[1:])


def test_no_module_of_the_suite_imports_a_test_module():
    """Tests, support modules, drills, benches and the mutation runner alike: a helper two modules
    need lives in tests/support/, a fixture in a conftest.py."""
    found = []
    for path in _py_files():
        me = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        lines = {}
        for line, mod in _imported(path):
            if _names_a_test_module(mod) and not (mod == me or mod.startswith(me + ".")):
                lines.setdefault(line, mod)
        found += [f"{path.relative_to(ROOT)}:{line}: imports {mod}" for line, mod in sorted(lines.items())]
    assert not found, "move what is shared to tests/support/ (fixtures: tests/conftest.py):\n" + "\n".join(found)


def test_the_top_of_tests_holds_only_the_conftest():
    """Test modules mirror the package layout; shared non-test modules live in tests/support/."""
    stray = [p.name for p in TESTS.glob("*.py") if p.name not in ("__init__.py", "conftest.py")]
    assert not stray, f"move these into their room (tests/<package>/<room>/) or tests/support/: {stray}"


# folders of tests/ that mirror no package
OWN = {"repo", "support", "drills", "bench", "mutation", "fixtures"}


def test_test_modules_mirror_the_package_layout():
    """tests/events/, tests/projections/<room>/ and tests/watcher/<room>/ exist as packages;
    tests/repo/ checks the repository as a whole. Every folder of test modules is a package
    (an __init__.py: two test files of one name in two rooms stay two modules)."""
    bad = []
    for path in TESTS.rglob("test_*.py"):
        rel = path.relative_to(TESTS).parts[:-1]
        if not rel or rel[0] in OWN:
            continue
        if not (ROOT.joinpath(*rel) / "__init__.py").exists() and not (ROOT.joinpath(*rel).with_suffix(".py")).exists():
            bad.append(f"{path.relative_to(ROOT)}: tests/{'/'.join(rel)} mirrors no package of the project")
        if not (TESTS.joinpath(*rel) / "__init__.py").exists():
            bad.append(f"{path.relative_to(ROOT)}: tests/{'/'.join(rel)} has no __init__.py")
    assert not bad, "\n".join(sorted(set(bad)))


def test_support_modules_define_no_fixtures():
    """A fixture in a support module is used by importing it by name into a test module, which
    shadows any conftest fixture of that name; shared fixtures live in tests/conftest.py."""
    found = []
    for path in sorted((TESTS / "support").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    target = d.func if isinstance(d, ast.Call) else d
                    if ast.unparse(target) in ("pytest.fixture", "fixture"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert not found, "move these fixtures to tests/conftest.py:\n" + "\n".join(found)
