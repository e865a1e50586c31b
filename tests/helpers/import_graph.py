"""The imports of a tree of Python packages, read with `ast` (nothing is imported).

Used by tests/test_package_imports.py. `scan_tree(root, ("t2t", "regression"))` reads every
import statement (including those inside functions) and every `name._private` attribute
of the packages under `root`; on that scan:

- `module_edges`: (importing module, imported module) -> the imports that make the edge.
  A module is a .py file, a package's __init__.py is the package's module, and
  `from pkg import name` imports the submodule pkg.name when there is one;
- `find_cycles` / `cycle_chains`: the import cycles of any length, each as a chain of
  `path:line statement`;
- `private_imports`: `from m import _x` and `m._x` on an imported module, across modules;
- `forbidden_imports`: the imports from one package into others it must never import.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Import:
    """One imported name of one import statement in a source file."""

    path: str  # relative to the scanned root, e.g. "t2t/registry.py"
    line: int
    function: str | None  # the enclosing function or method, None at module/class level
    statement: str  # the statement as written, e.g. "from . import problem"
    module: str  # the absolute module it imports from, e.g. "t2t.problems" or "numpy"
    name: str | None = None  # the name of `from module import name`; None for `import`
    bound_name: str = ""  # the local name the statement binds ("np", "problem", "t2t")
    bound_to: str = ""  # what that local name is: "numpy", "t2t.problems.problem", "t2t"

    @property
    def top_level(self) -> str:
        return self.module.split(".")[0]

    def where(self) -> str:
        scope = f" (in {self.function})" if self.function else ""
        return f"{self.path}:{self.line}{scope} {self.statement}"


@dataclasses.dataclass(frozen=True)
class PrivateAttribute:
    """A `name.attr._x` expression; private when `name.attr` is an imported module."""

    path: str
    line: int
    function: str | None
    dotted: str  # e.g. "parity._Comparison"


@dataclasses.dataclass
class Scan:
    imports: list[Import]
    attributes: list[PrivateAttribute]
    modules: dict[str, str]  # module name -> its path relative to the root
    errors: list[str]


def is_private(name: str) -> bool:
    """`_x` and `__x` are private; dunders (`__version__`) are not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, root: Path) -> str:
    """t2t/problems/problem.py -> t2t.problems.problem, t2t/problems/__init__.py -> t2t.problems."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(path: Path, root: Path) -> str:
    """The package a relative import in `path` is resolved against."""
    name = module_name(path, root)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def statement_text(node: ast.Import | ast.ImportFrom) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
    if isinstance(node, ast.Import):
        return f"import {names}"
    return f"from {'.' * node.level}{node.module or ''} import {names}"


def _dotted(node: ast.AST) -> str | None:
    """"a.b.c" for the expression a.b.c, None when it is not a chain of plain names."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


class ImportCollector(ast.NodeVisitor):
    """The imports and private attribute expressions of one file."""

    def __init__(self, path: Path, root: Path) -> None:
        self.rel = path.relative_to(root).as_posix()
        self.package = package_of(path, root)
        self.top = self.rel.split("/")[0]
        self.scope: list[str] = []  # enclosing classes and functions, outermost first
        self.functions = 0  # how many of the enclosing scopes are functions
        self.imports: list[Import] = []
        self.attributes: list[PrivateAttribute] = []
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

    def _function(self) -> str | None:
        return ".".join(self.scope) if self.functions else None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is not None and is_private(node.attr):
            self.attributes.append(PrivateAttribute(self.rel, node.lineno, self._function(), dotted))
        self.generic_visit(node)

    def _add(self, node: ast.Import | ast.ImportFrom, module: str, alias: ast.alias,
             name: str | None, bound_to: str) -> None:
        bound_name = alias.asname or alias.name.split(".")[0]
        self.imports.append(Import(self.rel, node.lineno, self._function(), statement_text(node),
                                   module, name, bound_name, bound_to))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound_to = alias.name if alias.asname else alias.name.split(".")[0]
            self._add(node, alias.name, alias, None, bound_to)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            if node.level - 1 >= len(parts):
                self.errors.append(f"{self.rel}:{node.lineno} {statement_text(node)}: "
                                   f"relative import goes above the {self.top} package")
                return
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            if node.module:
                base = f"{base}.{node.module}"
        else:
            base = node.module or ""
        for alias in node.names:
            # `from t2t import registry` (or `from . import registry` in t2t/) names the
            # unit t2t.registry; `from t2t.problems import problem` names t2t.problems
            # whatever `problem` is (module_of resolves the submodule), `from os import
            # path` names os.
            module = base
            if base == self.top and alias.name != "*":
                module = f"{base}.{alias.name}"
            self._add(node, module, alias, alias.name, f"{base}.{alias.name}")


def scan_tree(root: Path, packages: Sequence[str]) -> Scan:
    """Every import of the .py files of `packages` (folders directly under `root`)."""
    imports: list[Import] = []
    attributes: list[PrivateAttribute] = []
    errors: list[str] = []
    modules: dict[str, str] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            modules[module_name(path, root)] = rel
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            except SyntaxError as exc:
                errors.append(f"{rel}:{exc.lineno} does not parse: {exc.msg}")
                continue
            collector = ImportCollector(path, root)
            collector.visit(tree)
            imports.extend(collector.imports)
            attributes.extend(collector.attributes)
            errors.extend(collector.errors)
    return Scan(imports, attributes, modules, errors)


def module_of(imp: Import, modules: dict[str, str]) -> str | None:
    """The scanned module an import loads: the submodule of `from pkg import sub`, else
    the longest scanned prefix of the module (t2t.__version__ -> t2t); None if outside."""
    if imp.name and f"{imp.module}.{imp.name}" in modules:
        return f"{imp.module}.{imp.name}"
    name = imp.module
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_edges(scan: Scan) -> dict[tuple[str, str], list[Import]]:
    """(importing module, imported module) -> its imports; a module importing itself is
    left out."""
    by_path = {path: name for name, path in scan.modules.items()}
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in scan.imports:
        src, dst = by_path[imp.path], module_of(imp, scan.modules)
        if dst is not None and dst != src:
            edges[(src, dst)].append(imp)
    return edges


def dedupe(imports: Iterable[Import]) -> list[Import]:
    """One entry per statement (`from . import a, b` is one statement, two names)."""
    seen: dict[tuple[str, int, str], Import] = {}
    for imp in imports:
        seen.setdefault((imp.path, imp.line, imp.statement), imp)
    return sorted(seen.values(), key=lambda i: (i.path, i.line))


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


def shortest_cycle_through(start: str, graph: dict[str, set[str]], members: set[str]):
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


def find_cycles(edges: Iterable[tuple[str, str]]) -> list[tuple[list[str], list[list[str]]]]:
    """For each component of mutually importing nodes: its members and a shortest cycle
    through each member (rotations of the same cycle reported once)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        graph[src].add(dst)
        graph.setdefault(dst, set())
    found = []
    for component in strongly_connected_components(graph):
        if len(component) < 2:
            continue
        members = set(component)
        cycles, seen = [], set()
        for start in component:
            cycle = shortest_cycle_through(start, graph, members)
            key = frozenset(zip(cycle, cycle[1:], strict=False))
            if key not in seen:
                seen.add(key)
                cycles.append(cycle)
        found.append((component, cycles))
    return found


def cycle_chains(scan: Scan) -> list[str]:
    """Each module import cycle as one line: `path:line statement -> path:line statement
    -> ... -> (back to) path`, one statement per edge (the first; `(+N)` more)."""
    edges = module_edges(scan)
    chains = []
    for _, cycles in find_cycles(edges):
        for cycle in cycles:
            steps = []
            for src, dst in zip(cycle, cycle[1:], strict=False):
                statements = dedupe(edges[(src, dst)])
                more = f" (+{len(statements) - 1})" if len(statements) > 1 else ""
                steps.append(statements[0].where() + more)
            chains.append(" -> ".join([*steps, f"(back to) {scan.modules[cycle[0]]}"]))
    return chains


def private_imports(scan: Scan) -> list[str]:
    """`path:line statement` of each private name taken from another scanned module:
    `from m import _x`, and `m._x` where m is a module the file imported."""
    by_path = {path: name for name, path in scan.modules.items()}
    found = []
    bindings: dict[str, dict[str, str]] = defaultdict(dict)  # path -> local name -> module
    for imp in scan.imports:
        source = module_of(imp, scan.modules)
        if source is None:
            continue
        bindings[imp.path][imp.bound_name] = imp.bound_to
        if imp.name and is_private(imp.name) and source != by_path[imp.path]:
            found.append((imp.path, imp.line, imp.where()))
    for attr in scan.attributes:
        head, _, rest = attr.dotted.partition(".")
        if head not in bindings[attr.path]:
            continue
        owner = f"{bindings[attr.path][head]}.{rest}".rpartition(".")[0]  # what `._x` is read from
        if owner in scan.modules and owner != by_path[attr.path]:
            scope = f" (in {attr.function})" if attr.function else ""
            found.append((attr.path, attr.line, f"{attr.path}:{attr.line}{scope} {attr.dotted}"))
    return [where for _, _, where in sorted(set(found))]


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def forbidden_imports(scan: Scan, importer: str, forbidden: Sequence[str]) -> list[Import]:
    """The imports by modules of package `importer` of anything in a `forbidden` package
    (none while `importer` does not exist)."""
    by_path = {path: name for name, path in scan.modules.items()}
    return [
        imp for imp in scan.imports
        if within(by_path[imp.path], importer)
        and any(within(imp.module, f) or within(imp.bound_to, f) for f in forbidden)
    ]
