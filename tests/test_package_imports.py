"""The import direction between the parts ("units") of the t2t package, and no import
cycle or private import between any two modules of t2t/, regression/ and benchmarks/.

Each subpackage of t2t/ (t2t.models, t2t.problems, ...) is one unit, and so is each module
directly in t2t/ (t2t.registry, t2t.features, ...). These tests read the source with `ast`
(nothing is imported, no TensorFlow; the reader is tests/helpers/import_graph.py) and keep
the rules that let the library be carried across TensorFlow/Keras releases one piece at a
time:

- no cycle between units, so every unit can be understood, tested and ported on its own;
- no cycle between modules either (of t2t/, regression/ and benchmarks/; a package's
  __init__ is a module, `from pkg import sub` imports the submodule): what two modules
  share lives in a lower module;
- no private name (`_x`, not a dunder) taken from another module, by `from m import _x`
  or `m._x`: what another module needs is public;
- models, problems and layers never import the trainer, decoding, bin, serving or tuning:
  they are the library, the rest are its users;
- models and problems never import each other; they meet through t2t.features;
- the data framework (t2t.data) never imports a data set (t2t.problems), and the models
  never import t2t.problems (NEVER_IMPORTS; checked for each package that exists);
- nothing but t2t.bin imports t2t.bin (the command-line programs are leaves);
- `import t2t` and `import t2t.registry` stay cheap: t2t/__init__.py imports nothing
  from t2t, the registry imports no TensorFlow/Keras/NumPy and no problems, models or
  hparams module (discovery goes through importlib and strings), and t2t.features
  imports only the standard library.

Every import statement counts, including those inside functions. Failures list each
offending import as `path:line (in function) statement`, and each cycle as the chain of
such statements.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.helpers import import_graph
from tests.helpers.import_graph import (
    Import,
    ImportCollector,
    dedupe,
    shortest_cycle_through,
    strongly_connected_components,
)

PKG = "t2t"
REPO = Path(__file__).resolve().parents[1]
PKG_DIR = REPO / PKG
MODULE_PACKAGES = (PKG, "regression", "benchmarks", "docsite")  # no module cycle, no private import

LIBRARY_UNITS = ("t2t.models", "t2t.data", "t2t.problems", "t2t.layers")
USER_UNITS = ("t2t.trainer", "t2t.decoding", "t2t.bin", "t2t.serving", "t2t.tuning")
HEAVY_TOP_LEVEL = (
    "tensorflow",
    "tensorflow_datasets",
    "tensorflow_text",
    "tf_keras",
    "keras",
    "numpy",
)
REGISTRY_FORBIDDEN_UNITS = ("t2t.data", "t2t.problems", "t2t.models", "t2t.hparams")
# package -> the packages it must never import (checked once the package exists).
NEVER_IMPORTS = {
    "t2t.data": ("t2t.problems",),  # the data framework never imports a data set
    "t2t.models": ("t2t.problems",),
}


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


def unit_of_module(module: str) -> str | None:
    """The unit an absolute module belongs to: t2t.data.problem -> t2t.data,
    t2t.registry -> t2t.registry, t2t or t2t.__version__ -> t2t (the root package),
    numpy -> None."""
    parts = module.split(".")
    if parts[0] != PKG:
        return None
    if len(parts) > 1 and parts[1] in _units():
        return f"{PKG}.{parts[1]}"
    return PKG


def unit_of_file(path: str) -> str:
    """The unit of a source file: t2t/data/problem.py -> t2t.data,
    t2t/__init__.py -> t2t."""
    parts = Path(path).parts
    if len(parts) == 2:
        stem = Path(parts[1]).stem
        return PKG if stem == "__init__" else f"{PKG}.{stem}"
    return f"{PKG}.{parts[1]}"


@functools.lru_cache(maxsize=1)
def scan_all() -> import_graph.Scan:
    """The imports of every module of t2t/, regression/ and benchmarks/."""
    return import_graph.scan_tree(REPO, MODULE_PACKAGES)


def scan() -> import_graph.Scan:
    """The part of scan_all() in t2t/ (the units)."""
    everything = scan_all()
    return import_graph.Scan(
        [imp for imp in everything.imports if imp.path.startswith(f"{PKG}/")],
        [], {n: p for n, p in everything.modules.items() if p.startswith(f"{PKG}/")}, [])


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


def _listing(imports: Iterable[Import]) -> str:
    return "\n".join(f"  {imp.where()}" for imp in dedupe(imports))


def _fail_if_any(offending: list[Import], rule: str) -> None:
    if offending:
        pytest.fail(f"{rule}:\n{_listing(offending)}", pytrace=False)


def find_cycles() -> list[tuple[list[str], list[list[str]]]]:
    """For each component of mutually importing units: its members and a shortest cycle
    through each member (rotations of the same cycle reported once)."""
    return import_graph.find_cycles(unit_edges())


# --------------------------------------------------------------------------------- tests


def test_sources_parse_and_relative_imports_resolve():
    errors = scan_all().errors
    if errors:
        pytest.fail(f"{'/'.join(MODULE_PACKAGES)} sources that cannot be read:\n"
                    + "\n".join(errors), pytrace=False)


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
    collector = ImportCollector(PKG_DIR / "problems" / "example.py", REPO)
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
    init = ImportCollector(PKG_DIR / "problems" / "__init__.py", REPO)
    init.visit(ast.parse("from . import problem\nfrom ... import x\n"))
    assert [imp.module for imp in init.imports] == ["t2t.problems"]
    assert len(init.errors) == 1 and "above the t2t package" in init.errors[0]


def test_cycle_search_finds_long_cycles():
    """The checker itself: a cycle of three units with no pair importing each other."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    components = strongly_connected_components(graph)
    assert [c for c in components if len(c) > 1] == [["a", "b", "c"]]
    assert shortest_cycle_through("b", graph, {"a", "b", "c"}) == ["b", "c", "a", "b"]


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
                lines.extend(f"      {imp.where()}" for imp in dedupe(edges[(src, dst)]))
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


# ------------------------------------------------------------- modules of t2t, regression, benchmarks


def test_no_import_cycle_between_modules():
    chains = import_graph.cycle_chains(scan_all())
    if chains:
        pytest.fail(
            f"import cycles between modules of {', '.join(MODULE_PACKAGES)} (move what the "
            "modules share to a lower module), each as its chain of imports:\n"
            + "\n".join(f"  {chain}" for chain in chains), pytrace=False)


def test_no_private_name_is_imported_from_another_module():
    found = import_graph.private_imports(scan_all())
    if found:
        pytest.fail(
            "private names (_x) taken from another module (make them public, or move them to "
            "the module that uses them):\n" + "\n".join(f"  {where}" for where in found),
            pytrace=False)


@pytest.mark.parametrize("importer", sorted(NEVER_IMPORTS))
def test_never_imports(importer):
    forbidden = NEVER_IMPORTS[importer]
    offending = import_graph.forbidden_imports(scan_all(), importer, forbidden)
    _fail_if_any(offending, f"{importer} must never import {', '.join(forbidden)}")


def _tree(root: Path, files: dict[str, str]) -> import_graph.Scan:
    """A synthetic source tree under `root` ({relative path: source}), scanned."""
    for rel, source in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source, encoding="utf-8")
    return import_graph.scan_tree(root, sorted({rel.split("/")[0] for rel in files}))


def test_module_checks_find_cycles_private_names_and_forbidden_imports(tmp_path):
    """The checkers themselves, on a tree with one violation of each kind."""
    scan = _tree(tmp_path, {
        "t2t/__init__.py": "",
        "t2t/a.py": "from t2t import b\n",
        "t2t/b.py": "def f():\n    from t2t.c import _helper, public\n",
        "t2t/c.py": "from . import a\nimport t2t.d as d\nx = d._table + d.__doc__\n",
        "t2t/d.py": "from t2t import __version__\n_table = {}\nx = _table\n",
        "t2t/data/__init__.py": "",
        "t2t/data/pipeline.py": "from t2t.problems import text_problems\n",
        "t2t/problems/__init__.py": "",
        "t2t/problems/text_problems.py": "from t2t.data.pipeline import read\nimport numpy\n",
        "t2t/models/m.py": "def f():\n    import t2t.problems.text_problems as tp\n    "
                           "return tp._private.x, tp.public._y, numpy._z, self._w\n",
        "benchmarks/__init__.py": "",
        "benchmarks/suite.py": "from t2t import a\n",
    })
    assert scan.errors == []
    assert import_graph.cycle_chains(scan) == [
        "t2t/a.py:1 from t2t import b -> t2t/b.py:2 (in f) from t2t.c import _helper, public "
        "-> t2t/c.py:1 from . import a -> (back to) t2t/a.py",
        "t2t/data/pipeline.py:1 from t2t.problems import text_problems -> "
        "t2t/problems/text_problems.py:1 from t2t.data.pipeline import read "
        "-> (back to) t2t/data/pipeline.py",
    ]
    assert import_graph.private_imports(scan) == [
        "t2t/b.py:2 (in f) from t2t.c import _helper, public",
        "t2t/c.py:3 d._table",
        "t2t/models/m.py:3 (in f) tp._private",
    ]
    wheres = {pkg: [i.where() for i in import_graph.forbidden_imports(scan, pkg, ("t2t.problems",))]
              for pkg in ("t2t.data", "t2t.models", "t2t.absent")}
    assert wheres == {
        "t2t.data": ["t2t/data/pipeline.py:1 from t2t.problems import text_problems"],
        "t2t.models": ["t2t/models/m.py:2 (in f) import t2t.problems.text_problems as tp"],
        "t2t.absent": [],
    }
