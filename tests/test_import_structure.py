"""The package's import structure: no import circles, no private names across package folders.

Parsed with :mod:`ast` (nothing is imported), so the checks see every import, including those a
lazy loader or a function body would only run later:

- a circle among wsikit modules counting module-level imports (imports inside an
  ``if TYPE_CHECKING:`` block are excluded: they never run) is a module that can be half
  initialised when another reads it;
- a circle counting function-level imports too is a pair of layers that each call the other;
- a private name (``_x``, not ``__x__``) imported from a module outside the importer's own
  package folder is an internal that another layer has come to rely on;
- the packages are floors of the pipeline (:data:`FLOORS`, declared once here): an import that
  runs up a floor, or a circle among packages (counting imports inside functions), is a lower
  stage that knows a higher one;
- the top level holds the public face and a few small private modules (at most
  :data:`MAX_TOP_LEVEL` modules): everything else lives in the package of its stage.

An edge goes to the most specific module an import names: ``from a.b import c`` is an import of
``a.b.c`` when that is a module, else of ``a.b`` (parent packages, whose ``__init__`` also runs,
are not counted: wsikit's package ``__init__`` files are lazy loaders).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "wsikit"

#: wsikit's floors, bottom to top: a module imports from its own floor and the floors below,
#: never from one above. ``"_"`` is the top level's own modules (``errors.py`` and the small
#: private helpers); every other floor is the top-level package of that name. The public face
#: (:data:`FACE`) stands above them all. ARCHITECTURE.md ("Layout") says why this order.
FLOORS = ("_", "outputs", "slide", "tissue", "patches", "models", "features", "selection",
          "evidence", "look", "run", "batch", "integrations", "cli")

#: Modules above every floor: the lazy public face (``import wsikit``) and ``python -m wsikit``.
FACE = ("wsikit", "wsikit.__main__")

#: The most modules the top level of wsikit may hold (``__init__``, ``__main__``, ``errors``,
#: ``_version`` and at most four small private modules).
MAX_TOP_LEVEL = 8

@dataclass(frozen=True)
class ImportEdge:
    """One import statement's target, as seen from the importing module."""

    importer: str
    target: str
    names: tuple[str, ...]
    line: int
    module_level: bool


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` (packages by their ``__init__.py``)."""
    out: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Import statements with whether each runs at import time (not in a function body);
    ``if TYPE_CHECKING:`` bodies are skipped."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, module_level))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), module_level)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, False)
            else:
                visit(child, module_level)

    visit(tree, True)
    return found


def import_edges(root: Path, package: str) -> list[ImportEdge]:
    """Every import of a ``package`` module by a ``package`` module."""
    modules = module_names(root, package)
    edges: list[ImportEdge] = []
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, module_level in _import_nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        edges.append(ImportEdge(name, alias.name, (), node.lineno,
                                                module_level))
                continue
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source not in modules:
                continue
            plain = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    edges.append(ImportEdge(name, sub, (), node.lineno, module_level))
                else:
                    plain.append(alias.name)
            if plain:
                edges.append(ImportEdge(name, source, tuple(plain), node.lineno, module_level))
    return edges


def import_circles(edges: list[ImportEdge], *, module_level_only: bool
                   ) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.importer != e.target and (e.module_level or not module_level_only):
            graph.setdefault(e.importer, set()).add(e.target)
            graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[tuple[str, ...]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(tuple(sorted(component)))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(circles)


def _package_of(module: str, modules: dict[str, Path]) -> str:
    """The package folder a module lives in (a package's ``__init__`` lives in itself)."""
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(root: Path, package: str) -> list[str]:
    """``"importer: module.name"`` for every private name (or private module) imported from a
    module outside the importer's own package folder.

    A private module (``wsikit._atomic``) is private to its parent package, so any module
    inside that package's folder tree may import it.
    """
    modules = module_names(root, package)
    found = []
    for e in import_edges(root, package):
        own = _package_of(e.importer, modules)
        where = _package_of(e.target, modules)
        for name in e.names:
            if _private(name) and where != own:
                found.append(f"{e.importer}: {e.target}.{name}")
        parts = e.target.split(".")
        for i, part in enumerate(parts):
            parent = ".".join(parts[:i])
            if _private(part) and not (own == parent or own.startswith(parent + ".")):
                found.append(f"{e.importer}: {e.target}")
                break
    return sorted(set(found))


def private_imports_outside(root: Path, package: str, folders: tuple[str, ...]
                            ) -> list[str]:
    """``"file: module.name"`` for every private name a file under ``folders`` (tests,
    benchmarks, examples) imports from a ``package`` module with ``from module import _name``.
    A private *module* (``from wsikit.cli import _common``) is its names' defining module and
    is allowed."""
    modules = module_names(root, package)
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0
                        and node.module in modules):
                    continue
                for alias in node.names:
                    if _private(alias.name) and f"{node.module}.{alias.name}" not in modules:
                        found.append(f"{path.relative_to(root).as_posix()}: "
                                     f"{node.module}.{alias.name}")
    return sorted(set(found))


def floor_of(module: str, modules: dict[str, Path]) -> str:
    """The floor of ``module``: ``"_"`` for a module of the top level (and the package's own
    ``__init__``), else the name of the top-level package it lives in."""
    parts = module.split(".")
    if len(parts) == 1:
        return "_"
    return parts[1] if modules[".".join(parts[:2])].name == "__init__.py" else "_"


def package_edges(root: Path, package: str, face: tuple[str, ...] = FACE
                  ) -> list[ImportEdge]:
    """Every import between modules of ``package`` (the face left out) as an edge between
    their floors (see :func:`floor_of`), function-level imports included."""
    modules = module_names(root, package)
    return [ImportEdge(floor_of(e.importer, modules), floor_of(e.target, modules), e.names,
                       e.line, e.module_level)
            for e in import_edges(root, package)
            if e.importer not in face and e.target not in face]


def unknown_floors(root: Path, package: str, floors: tuple[str, ...]) -> list[str]:
    """Top-level packages of ``package`` that ``floors`` does not place, and floors that name
    no package."""
    modules = module_names(root, package)
    found = {floor_of(name, modules) for name in modules if "." in name}
    return sorted(found - set(floors)) + sorted(f"{f} (no such package)"
                                                 for f in set(floors) - found)


def imports_up_a_floor(root: Path, package: str, floors: tuple[str, ...],
                       face: tuple[str, ...] = FACE) -> list[str]:
    """``"importer -> target (floor -> higher floor)"`` for every import (function-level ones
    included, ``if TYPE_CHECKING:`` ones not: they never run) that runs up a floor."""
    modules = module_names(root, package)
    rank = {f: i for i, f in enumerate(floors)}
    found = []
    for e in import_edges(root, package):
        if e.importer in face or e.target in face:
            continue
        low, high = floor_of(e.importer, modules), floor_of(e.target, modules)
        if low in rank and high in rank and rank[low] < rank[high]:
            found.append(f"{e.importer}:{e.line} -> {e.target} ({low} -> {high})")
    return sorted(found)


def top_level_modules(root: Path, package: str) -> list[str]:
    """The modules directly in the package folder (``__init__`` included)."""
    return sorted(p.stem for p in (root / package).glob("*.py"))


def _describe(circles: list[tuple[str, ...]]) -> str:
    return "\n".join(" <-> ".join(c) for c in circles)


def test_no_module_level_import_circles() -> None:
    circles = import_circles(import_edges(ROOT, PACKAGE), module_level_only=True)
    assert not circles, ("import circles among wsikit modules (module-level imports); move "
                         "the shared code down a layer:\n" + _describe(circles))


def test_no_import_circles_counting_function_level_imports() -> None:
    circles = import_circles(import_edges(ROOT, PACKAGE), module_level_only=False)
    assert not circles, ("import circles among wsikit modules (counting imports inside "
                         "functions); a lower layer must not call back up:\n"
                         + _describe(circles))


def test_every_package_has_a_floor() -> None:
    unknown = unknown_floors(ROOT, PACKAGE, FLOORS)
    assert not unknown, ("top-level packages of wsikit that FLOORS does not place (or floors "
                         f"without a package); say where each stands: {unknown}")


def test_no_import_runs_up_a_floor() -> None:
    found = imports_up_a_floor(ROOT, PACKAGE, FLOORS)
    assert not found, ("imports that run up a floor (a lower stage calling a higher one); move "
                       "the function to the floor where it belongs, or pass the data down:\n"
                       + "\n".join(found))


def test_no_circles_among_packages_counting_function_level_imports() -> None:
    circles = import_circles(package_edges(ROOT, PACKAGE), module_level_only=False)
    assert not circles, ("import circles among wsikit's packages (counting imports inside "
                         "functions):\n" + _describe(circles))


def test_the_top_level_holds_few_modules() -> None:
    found = top_level_modules(ROOT, PACKAGE)
    assert len(found) <= MAX_TOP_LEVEL, (
        f"{len(found)} modules at wsikit's top level (at most {MAX_TOP_LEVEL}): {found}; move "
        "each into the package of its stage")
    public = [m for m in found if not m.startswith("_") and m != "errors"]
    assert not public, f"public modules at the top level besides errors.py: {public}"


def test_no_private_names_imported_across_package_folders() -> None:
    found = private_imports(ROOT, PACKAGE)
    assert not found, ("private names imported from outside the importer's package folder; "
                       "make the name public where it is defined (or move the caller):\n"
                       + "\n".join(found))


def test_tests_and_benchmarks_import_no_private_names() -> None:
    found = private_imports_outside(ROOT, PACKAGE, ("tests", "benchmarks", "examples"))
    assert not found, ("tests import private names; test through the public function, or "
                       "make the name public where it is defined:\n" + "\n".join(found))


# --- the checks catch what they claim, on a synthetic package ---------------------------------

def _write_package(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/_util.py": "VALUE = 1\n",
        "pkg/low.py": "from ._util import VALUE\n_helper = VALUE\n",
        "pkg/high.py": "from .low import _helper\n",  # same folder: allowed
        "pkg/sub/__init__.py": "",
        "pkg/sub/mod.py": """\
            from typing import TYPE_CHECKING
            from .. import low
            from .._util import VALUE  # private module of an enclosing package: allowed
            if TYPE_CHECKING:
                from ..high import _helper
            """,
    })
    return tmp_path


def test_a_clean_package_passes(synthetic: Path) -> None:
    edges = import_edges(synthetic, "pkg")
    assert import_circles(edges, module_level_only=False) == []
    assert private_imports(synthetic, "pkg") == []


def test_a_module_level_circle_is_found(synthetic: Path) -> None:
    _write_package(synthetic, {"pkg/_util.py": "from .sub import mod\nVALUE = 1\n"})
    edges = import_edges(synthetic, "pkg")
    # _util -> sub.mod -> low -> _util
    assert import_circles(edges, module_level_only=True) == [
        ("pkg._util", "pkg.low", "pkg.sub.mod")]


def test_a_function_level_circle_is_found_only_when_counted(synthetic: Path) -> None:
    _write_package(synthetic, {"pkg/low.py": """\
        from ._util import VALUE
        _helper = VALUE
        def later():
            from .high import _helper
            return _helper
        """})
    edges = import_edges(synthetic, "pkg")
    assert import_circles(edges, module_level_only=True) == []
    assert import_circles(edges, module_level_only=False) == [("pkg.high", "pkg.low")]


def test_a_type_checking_import_is_not_a_circle(synthetic: Path) -> None:
    _write_package(synthetic, {"pkg/low.py": """\
        from typing import TYPE_CHECKING
        from ._util import VALUE
        _helper = VALUE
        if TYPE_CHECKING:
            from .sub.mod import low
        """})
    edges = import_edges(synthetic, "pkg")
    assert import_circles(edges, module_level_only=False) == []


def test_a_private_name_from_another_folder_is_found(synthetic: Path) -> None:
    _write_package(synthetic, {"pkg/sub/other.py": """\
        def f():
            from ..low import _helper, VALUE
            from pkg.high import _helper as h
            return _helper, h
        """})
    assert private_imports(synthetic, "pkg") == ["pkg.sub.other: pkg.high._helper",
                                                 "pkg.sub.other: pkg.low._helper"]


def test_a_test_importing_a_private_name_is_found(synthetic: Path) -> None:
    _write_package(synthetic, {"tests/test_x.py": """\
        from pkg import _util
        from pkg.low import VALUE, _helper
        """})
    assert private_imports_outside(synthetic, "pkg", ("tests",)) == [
        "tests/test_x.py: pkg.low._helper"]


def test_a_private_module_of_a_sibling_package_is_found(synthetic: Path) -> None:
    _write_package(synthetic, {"pkg/sub/_inner.py": "X = 1\n",
                               "pkg/low.py": "from .sub._inner import X\n_helper = X\n"})
    assert private_imports(synthetic, "pkg") == ["pkg.low: pkg.sub._inner"]


@pytest.fixture
def floored(tmp_path: Path) -> Path:
    """A package of three floors (``_``, ``low``, ``high``) whose imports run downwards."""
    _write_package(tmp_path, {
        "pkg/__init__.py": "from .high import run\n",  # the face: above every floor
        "pkg/__main__.py": "from .high import run\n",
        "pkg/_util.py": "VALUE = 1\n",
        "pkg/low/__init__.py": "",
        "pkg/low/core.py": """\
            from typing import TYPE_CHECKING
            from .._util import VALUE
            if TYPE_CHECKING:
                from ..high.app import run  # a type only: never runs
            """,
        "pkg/high/__init__.py": "",
        "pkg/high/app.py": "from ..low.core import VALUE\ndef run():\n    return VALUE\n",
    })
    return tmp_path


FLOORED = ("_", "low", "high")


def test_a_package_whose_imports_run_down_passes(floored: Path) -> None:
    assert unknown_floors(floored, "pkg", FLOORED) == []
    assert imports_up_a_floor(floored, "pkg", FLOORED, ("pkg", "pkg.__main__")) == []
    assert import_circles(package_edges(floored, "pkg", ("pkg", "pkg.__main__")),
                          module_level_only=False) == []
    assert top_level_modules(floored, "pkg") == ["__init__", "__main__", "_util"]


def test_an_import_up_a_floor_inside_a_function_is_found(floored: Path) -> None:
    _write_package(floored, {"pkg/low/later.py": """\
        def later():
            from ..high.app import run
            return run()
        """})
    assert imports_up_a_floor(floored, "pkg", FLOORED, ("pkg", "pkg.__main__")) == [
        "pkg.low.later:2 -> pkg.high.app (low -> high)"]
    # and the two packages now import each other, though no two modules do
    assert import_circles(import_edges(floored, "pkg"), module_level_only=False) == []
    assert import_circles(package_edges(floored, "pkg", ("pkg", "pkg.__main__")),
                          module_level_only=False) == [("high", "low")]


def test_a_top_level_module_importing_a_package_runs_up(floored: Path) -> None:
    _write_package(floored, {"pkg/_util.py": "from .low.core import VALUE\n"})
    assert imports_up_a_floor(floored, "pkg", FLOORED, ("pkg", "pkg.__main__")) == [
        "pkg._util:1 -> pkg.low.core (_ -> low)"]


def test_a_package_without_a_floor_is_named(floored: Path) -> None:
    _write_package(floored, {"pkg/extra/__init__.py": ""})
    assert unknown_floors(floored, "pkg", FLOORED) == ["extra"]
    assert unknown_floors(floored, "pkg", (*FLOORED, "gone")) == [
        "extra", "gone (no such package)"]
