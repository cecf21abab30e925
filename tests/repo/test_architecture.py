"""The layout's rules, checked from every module's imports (ast only; fast):

- no import circles anywhere (module-level or deferred imports alike);
- dependencies go watcher -> projections -> events, never back;
- projections import no apsw, apprise, watchdog, typer, rich, os/subprocess I/O or ``time``;
- nothing outside ``watcher/cli`` imports from it (the entry point excepted);
- every module stays under 500 lines;
- projections/ is rooms: a module sits in a room package (or is one of ``projections.SHARED``)
  and imports only its own room, the shared modules and the rooms its ``__init__``'s ``USES`` names.
"""
from __future__ import annotations

import ast
import pathlib

import pytest
from tests.support.exe import ROOT

PACKAGES = ("events", "projections", "watcher")
LAYER = {"events": 0, "projections": 1, "watcher": 2}
PURE_FORBIDDEN = {"apsw", "apprise", "watchdog", "typer", "rich", "os", "subprocess", "socket", "time",
                  "sqlite3", "threading", "shutil", "events.log", "events.chain", "events.lock", "events.schema"}
MAX_LINES = 500


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            rel = p.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """Fully qualified names a module imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found.add(base)
            for a in node.names:   # `from watcher.cli import log` imports a module too
                if f"{base}.{a.name}" in MODULES:
                    found.add(f"{base}.{a.name}")
    return found


def _internal(target: str) -> str | None:
    """The module of ours that ``target`` names (longest match), or None."""
    parts = target.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in MODULES:
            return cand
        parts.pop()
    return None


GRAPH = {m: {t for t in (_internal(i) for i in _imports(m, p)) if t and t != m} for m, p in MODULES.items()}


def _parents(mod: str) -> set[str]:
    parts = mod.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_no_import_circles():
    """Tarjan's SCCs over the module graph; importing a package's own parent package is not a
    circle (Python runs the parent's __init__ first either way)."""
    graph = {m: {t for t in ts if t not in _parents(m)} for m, ts in GRAPH.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    assert cycles == [], f"import circles: {cycles}"


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_dependency_direction(mod):
    mine = LAYER[mod.split(".")[0]]
    back = sorted(t for t in GRAPH[mod] if LAYER[t.split(".")[0]] > mine)
    assert back == [], f"{mod} imports a layer above it: {back}"


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if m.startswith("projections")))
def test_projections_are_pure(mod):
    bad = sorted(i for i in _imports(mod, MODULES[mod])
                 if i in PURE_FORBIDDEN or i.split(".")[0] in PURE_FORBIDDEN - {"events.log"})
    assert bad == [], f"{mod} imports I/O or the store: {bad}"


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if not m.startswith("watcher.cli")
                                       and m != "watcher.entry"))
def test_nothing_imports_the_cli(mod):
    bad = sorted(t for t in GRAPH[mod] if t == "watcher.cli" or t.startswith("watcher.cli."))
    assert bad == [], f"{mod} imports the CLI: {bad}"


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_modules_stay_small(mod):
    n = MODULES[mod].read_text().count("\n")
    assert n <= MAX_LINES, f"{MODULES[mod].relative_to(ROOT)} has {n} lines (> {MAX_LINES}): split it by responsibility"


def _literal(path: pathlib.Path, name: str):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"{path.relative_to(ROOT)} declares no {name}")


SHARED = set(_literal(ROOT / "projections" / "__init__.py", "SHARED"))
ROOMS = sorted(p.parent.name for p in (ROOT / "projections").glob("*/__init__.py"))


def test_projections_are_rooms():
    """Every module of projections/ is in a room or is shared; every room states its contract."""
    loose = sorted(p.stem for p in (ROOT / "projections").glob("*.py") if p.stem != "__init__")
    assert loose == sorted(SHARED), f"modules of projections/ outside a room and not in SHARED: {loose}"
    for room in ROOMS:
        init = ROOT / "projections" / room / "__init__.py"
        assert (ast.get_docstring(ast.parse(init.read_text())) or "").count("Contract"), f"{room}: no contract"
        assert set(_literal(init, "USES")) <= set(ROOMS), room


@pytest.mark.parametrize("room", ROOMS)
def test_rooms_import_only_what_they_declare(room):
    allowed = {room, *_literal(ROOT / "projections" / room / "__init__.py", "USES")}
    bad = sorted(t for m in MODULES if m.startswith(f"projections.{room}.") for t in GRAPH[m]
                 if t.startswith("projections.") and t.split(".")[1] not in allowed | SHARED)
    assert bad == [], f"projections.{room} imports undeclared rooms: {bad}"
