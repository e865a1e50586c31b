"""The import direction between the parts ("units") of the t2t package.

Each subpackage of t2t/ (t2t.models, t2t.problems, ...) is one unit, and so is each module
directly in t2t/ (t2t.registry, t2t.features, ...). These tests read the source with `ast`
(nothing is imported, no TensorFlow) and keep the rules that let the library be carried
across TensorFlow/Keras releases one piece at a time:

- no cycle between units, so every unit can be understood, tested and ported on its own;
- models, problems and layers never import the trainer, decoding, bin, serving or tuning:
  they are the library, the rest are its users;
- models and problems never import each other; they meet through t2t.features;
- nothing but t2t.bin imports t2t.bin (the command-line programs are leaves);
- `import t2t` and `import t2t.registry` stay cheap: t2t/__init__.py imports nothing
  from t2t, the registry imports no TensorFlow/Keras/NumPy and no problems, models or
  hparams module (discovery goes through importlib and strings), and t2t.features
  imports only the standard library.

Every import statement counts, including those inside functions. Failures list each
offending import as `path:line (in function) statement`.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import sys
from collections import defaultdict, deque
from collections.abc import Iterable
from pathlib import Path

import pytest

PKG = "t2t"
REPO = Path(__file__).resolve().parents[1]
PKG_DIR = REPO / PKG

LIBRARY_UNITS = ("t2t.models", "t2t.problems", "t2t.layers")
USER_UNITS = ("t2t.trainer", "t2t.decoding", "t2t.bin", "t2t.serving", "t2t.tuning")
HEAVY_TOP_LEVEL = (
    "tensorflow",
    "tensorflow_datasets",
    "tensorflow_text",
    "tf_keras",
    "keras",
    "numpy",
)
REGISTRY_FORBIDDEN_UNITS = ("t2t.problems", "t2t.models", "t2t.hparams")


@dataclasses.dataclass(frozen=True)
class Import:
    """One imported name of one import statement in a t2t source file."""

    path: str  # relative to the repository root, e.g. "t2t/registry.py"
    line: int
    function: str | None  # the enclosing function or method, None at module/class level
    statement: str  # the statement as written, e.g. "from . import problem"
    module: str  # the absolute module it imports from, e.g. "t2t.problems" or "numpy"

    @property
    def top_level(self) -> str:
        return self.module.split(".")[0]

    def where(self) -> str:
        scope = f" (in {self.function})" if self.function else ""
        return f"{self.path}:{self.line}{scope} {self.statement}"


@functools.lru_cache(maxsize=1)
def _units() -> dict[str, str]:
    """Unit name ("models", "registry") -> "package" or "module", discovered from t2t/."""
    units: dict[str, str] = {}
    for child in sorted(PKG_DIR.iterdir()):
        if child.is_dir() and (child / "__init__.py").is_file():
            units[child.name] = "package"
        elif child.is_file() and child.suffix == ".py" and child.name != "__init__.py":
            units[child.stem] = "module"
    return units


def _source_files() -> list[Path]:
    return sorted(p for p in PKG_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> str:
    """The package a relative import in `path` is resolved against."""
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def unit_of_module(module: str) -> str | None:
    """The unit an absolute module belongs to: t2t.problems.problem -> t2t.problems,
    t2t.registry -> t2t.registry, t2t or t2t.__version__ -> t2t (the root package),
    numpy -> None."""
    parts = module.split(".")
    if parts[0] != PKG:
        return None
    if len(parts) > 1 and parts[1] in _units():
        return f"{PKG}.{parts[1]}"
    return PKG


def unit_of_file(path: str) -> str:
    """The unit of a source file: t2t/problems/problem.py -> t2t.problems,
    t2t/__init__.py -> t2t."""
    parts = Path(path).parts
    if len(parts) == 2:
        stem = Path(parts[1]).stem
        return PKG if stem == "__init__" else f"{PKG}.{stem}"
    return f"{PKG}.{parts[1]}"


def _statement_text(node: ast.Import | ast.ImportFrom) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
    if isinstance(node, ast.Import):
        return f"import {names}"
    return f"from {'.' * node.level}{node.module or ''} import {names}"


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rel = _rel(path)
        self.package = _package_of(path)
        self.scope: list[str] = []  # enclosing classes and functions, outermost first
        self.functions = 0  # how many of the enclosing scopes are functions
        self.imports: list[Import] = []
        self.errors: list[str] = []

    def _scoped(self, node: ast.AST, is_function: bool) -> None:
        self.scope.append(node.name)  # type: ignore[attr-defined]
        self.functions += is_function
        self.generic_visit(node)
        self.functions -= is_function
        self.scope.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, False)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, True)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node, True)

    def _add(self, node: ast.Import | ast.ImportFrom, module: str) -> None:
        function = ".".join(self.scope) if self.functions else None
        self.imports.append(Import(self.rel, node.lineno, function, _statement_text(node), module))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            if node.level - 1 >= len(parts):
                self.errors.append(
                    f"{self.rel}:{node.lineno} {_statement_text(node)}: "
                    "relative import goes above the t2t package"
                )
                return
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            if node.module:
                base = f"{base}.{node.module}"
        else:
            base = node.module or ""
        for alias in node.names:
            # `from t2t import registry` (or `from . import registry` in t2t/) names the
            # unit t2t.registry; `from t2t.problems import problem` names t2t.problems
            # whatever `problem` is, and `from os import path` names os.
            module = base
            if base == PKG and alias.name != "*":
                module = f"{base}.{alias.name}"
            self._add(node, module)


@dataclasses.dataclass
class _Scan:
    imports: list[Import]
    errors: list[str]


@functools.lru_cache(maxsize=1)
def scan() -> _Scan:
    imports: list[Import] = []
    errors: list[str] = []
    for path in _source_files():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            errors.append(f"{_rel(path)}:{exc.lineno} does not parse: {exc.msg}")
            continue
        collector = _ImportCollector(path)
        collector.visit(tree)
        imports.extend(collector.imports)
        errors.extend(collector.errors)
    return _Scan(imports, errors)


def unit_edges() -> dict[tuple[str, str], list[Import]]:
    """(importing unit, imported unit) -> the imports that make that edge.

    The root package `t2t` is left out, and so is a unit importing itself."""
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in scan().imports:
        src, dst = unit_of_file(imp.path), unit_of_module(imp.module)
        if dst is None or PKG in (src, dst) or src == dst:
            continue
        edges[(src, dst)].append(imp)
    return edges


def _dedupe(imports: Iterable[Import]) -> list[Import]:
    """One entry per statement (`from . import a, b` is one statement, two names)."""
    seen: dict[tuple[str, int, str], Import] = {}
    for imp in imports:
        seen.setdefault((imp.path, imp.line, imp.statement), imp)
    return sorted(seen.values(), key=lambda i: (i.path, i.line))


def _listing(imports: Iterable[Import]) -> str:
    return "\n".join(f"  {imp.where()}" for imp in _dedupe(imports))


def _fail_if_any(offending: list[Import], rule: str) -> None:
    if offending:
        pytest.fail(f"{rule}:\n{_listing(offending)}", pytrace=False)


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; returns the components, each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_cycle_through(start: str, graph: dict[str, set[str]], members: set[str]):
    """The shortest path start -> ... -> start inside `members` (BFS), as a node list."""
    parent: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for succ in sorted(graph.get(node, ())):
            if succ not in members:
                continue
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if succ not in seen:
                seen.add(succ)
                parent[succ] = node
                queue.append(succ)
    return None


def find_cycles() -> list[tuple[list[str], list[list[str]]]]:
    """For each component of mutually importing units: its members and a shortest cycle
    through each member (rotations of the same cycle reported once)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in unit_edges():
        graph[src].add(dst)
        graph.setdefault(dst, set())
    found = []
    for component in strongly_connected_components(graph):
        if len(component) < 2:
            continue
        members = set(component)
        cycles, seen = [], set()
        for start in component:
            cycle = _shortest_cycle_through(start, graph, members)
            key = frozenset(zip(cycle, cycle[1:], strict=False))
            if key not in seen:
                seen.add(key)
                cycles.append(cycle)
        found.append((component, cycles))
    return found


# --------------------------------------------------------------------------------- tests


def test_sources_parse_and_relative_imports_resolve():
    errors = scan().errors
    if errors:
        pytest.fail("t2t sources that cannot be read:\n" + "\n".join(errors), pytrace=False)


def test_units_are_discovered():
    units = _units()
    for expected in ("models", "problems", "layers", "trainer", "registry"):
        assert expected in units, f"unit t2t.{expected} not found under {PKG_DIR}"


def test_relative_imports_resolve_like_python():
    """The checker itself: relative imports, `from t2t import <unit>`, function scope."""
    source = (
        "from . import problem\n"
        "from .. import registry, __version__\n"
        "from ..models.t2t_model import T2TModel\n"
        "import numpy as np\n"
        "class C:\n"
        "    def f(self):\n"
        "        from t2t.decoding import greedy\n"
    )
    collector = _ImportCollector(PKG_DIR / "problems" / "example.py")
    collector.visit(ast.parse(source))
    got = [
        (imp.line, imp.function, imp.module, unit_of_module(imp.module))
        for imp in collector.imports
    ]
    assert got == [
        (1, None, "t2t.problems", "t2t.problems"),
        (2, None, "t2t.registry", "t2t.registry"),
        (2, None, "t2t.__version__", "t2t"),
        (3, None, "t2t.models.t2t_model", "t2t.models"),
        (4, None, "numpy", None),
        (7, "C.f", "t2t.decoding", "t2t.decoding"),
    ]
    init = _ImportCollector(PKG_DIR / "problems" / "__init__.py")
    init.visit(ast.parse("from . import problem\nfrom ... import x\n"))
    assert [imp.module for imp in init.imports] == ["t2t.problems"]
    assert len(init.errors) == 1 and "above the t2t package" in init.errors[0]


def test_cycle_search_finds_long_cycles():
    """The checker itself: a cycle of three units with no pair importing each other."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    components = strongly_connected_components(graph)
    assert [c for c in components if len(c) > 1] == [["a", "b", "c"]]
    assert _shortest_cycle_through("b", graph, {"a", "b", "c"}) == ["b", "c", "a", "b"]


def test_package_init_imports_nothing_from_t2t():
    # t2t.compat (the import hook for Tensor2Tensor's paths) is the one exception: it
    # imports only the standard library at module level (checked below).
    offending = [
        imp
        for imp in scan().imports
        if imp.path == f"{PKG}/__init__.py" and unit_of_module(imp.module) is not None
        and imp.module != f"{PKG}.compat"
    ]
    _fail_if_any(
        offending, "t2t/__init__.py must import nothing from t2t but t2t.compat "
        "(`import t2t` stays cheap)"
    )


def test_compat_hook_imports_only_the_standard_library_at_module_level():
    path = f"{PKG}/compat.py"
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    offending = [imp for imp in scan().imports
                 if imp.path == path and imp.function is None and imp.top_level not in stdlib]
    _fail_if_any(offending, f"{path} must import only the standard library outside functions")


def test_no_import_cycle_between_units():
    edges = unit_edges()
    cycles = find_cycles()
    if not cycles:
        return
    lines = ["import cycles between t2t units (remove the imports of one edge per cycle):"]
    for component, component_cycles in cycles:
        lines.append(f"\nunits that import each other: {', '.join(component)}")
        for cycle in component_cycles:
            lines.append("  cycle: " + " -> ".join(cycle))
            for src, dst in zip(cycle, cycle[1:], strict=False):
                lines.append(f"    {src} -> {dst}:")
                lines.extend(f"      {imp.where()}" for imp in _dedupe(edges[(src, dst)]))
    pytest.fail("\n".join(lines), pytrace=False)


def _edges_between(sources: Iterable[str], targets: Iterable[str]) -> list[Import]:
    sources, targets = set(sources), set(targets)
    return [
        imp
        for (src, dst), imports in unit_edges().items()
        if src in sources and dst in targets
        for imp in imports
    ]


def test_library_units_do_not_import_their_users():
    offending = _edges_between(LIBRARY_UNITS, USER_UNITS)
    _fail_if_any(offending, f"{', '.join(LIBRARY_UNITS)} must not import {', '.join(USER_UNITS)}")


def test_models_and_problems_do_not_import_each_other():
    offending = _edges_between(["t2t.models"], ["t2t.problems"]) + _edges_between(
        ["t2t.problems"], ["t2t.models"]
    )
    _fail_if_any(
        offending,
        "t2t.models and t2t.problems must not import each other (they meet through t2t.features)",
    )


def test_only_bin_imports_bin():
    offending = [
        imp
        for imp in scan().imports
        if unit_of_module(imp.module) == "t2t.bin" and unit_of_file(imp.path) != "t2t.bin"
    ]
    _fail_if_any(offending, "only t2t.bin may import t2t.bin")


def test_registry_imports_nothing_heavy():
    path = f"{PKG}/registry.py"
    assert (REPO / path).is_file(), f"{path} is missing"
    offending = [
        imp
        for imp in scan().imports
        if imp.path == path
        and (
            imp.top_level in HEAVY_TOP_LEVEL
            or unit_of_module(imp.module) in REGISTRY_FORBIDDEN_UNITS
        )
    ]
    _fail_if_any(
        offending,
        f"{path} must import no {'/'.join(HEAVY_TOP_LEVEL)} and no "
        f"{'/'.join(REGISTRY_FORBIDDEN_UNITS)} module, not even inside functions "
        "(discover them with importlib and strings)",
    )


def test_features_imports_only_the_standard_library():
    path = f"{PKG}/features.py"
    assert (REPO / path).is_file(), f"{path} is missing"
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    offending = [imp for imp in scan().imports if imp.path == path and imp.top_level not in stdlib]
    _fail_if_any(offending, f"{path} must import only the standard library")
