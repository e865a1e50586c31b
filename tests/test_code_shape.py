"""Size limits in t2t/, regression/ and benchmarks/; no Keras private attributes in t2t/.

The project guide keeps every module under 600 lines and every function or method under
80 lines, so that each piece can be read, reviewed and ported on its own: the library,
the regression suite and the benchmarks alike. Library code
must also be easy to carry across TensorFlow/Keras releases, so it never reaches into
Keras internals: no `keras.src` imports, no private attributes such as `._kernel`,
`._value`, `_trackable_children` or `_convert_input_args`, which change without notice
from one release to the next.

The tests read the files as text and with `ast`; nothing is imported.
Failures list each offender (`path (N lines)`, `path:line name (N lines)`, `path:line`).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = ("t2t",)
# The size rules hold for every Python package of the repository but the tests.
SIZE_RULED = ("t2t", "regression", "benchmarks", "docsite")

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# Each pattern betrays a Keras private attribute or module.
PRIVATE_KERAS = {
    "keras.src": re.compile(re.escape("keras.src")),
    "._kernel": re.compile(re.escape("._kernel")),
    "_trackable_children": re.compile(re.escape("_trackable_children")),
    "_convert_input_args": re.compile(re.escape("_convert_input_args")),
    r"\._value\b": re.compile(r"\._value\b"),
}


@functools.lru_cache(maxsize=4)
def sources(roots: tuple[str, ...] = LIBRARY) -> dict[str, str]:
    """Relative path ("t2t/registry.py") -> text, for every Python file under the folders
    `roots` of the repository."""
    files = sorted(p for root in roots for p in (REPO / root).rglob("*.py")
                   if "__pycache__" not in p.parts)
    return {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8") for p in files}


def function_lengths(tree: ast.AST) -> list[tuple[int, str, int]]:
    """(def line, qualified name, length) of every function and method in `tree`.

    The length runs from the `def` line to the last line of the body; decorators are not
    counted. Nested functions are reported on their own and also count in their parent."""
    found: list[tuple[int, str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                found.append((child.lineno, name, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return sorted(found)


def _fail_if_any(offending: list[str], rule: str) -> None:
    if offending:
        pytest.fail(f"{rule}:\n" + "\n".join(f"  {o}" for o in offending), pytrace=False)


def test_function_lengths_are_measured_from_def_to_end_of_body():
    """The checker itself: decorators excluded, nested functions counted twice."""
    source = (
        "@decorator\n"  # 1
        "@other(\n"  # 2
        "    1)\n"  # 3
        "def f():\n"  # 4
        "    def g():\n"  # 5
        "        return 1\n"  # 6
        "    return g\n"  # 7
        "class C:\n"  # 8
        "    async def m(self):\n"  # 9
        "        pass\n"  # 10
    )
    assert function_lengths(ast.parse(source)) == [(4, "f", 4), (5, "f.g", 2), (9, "C.m", 2)]


def test_the_size_rules_read_every_ruled_package():
    """The checked files include each ruled folder's modules (a renamed folder would
    otherwise leave the rules checking nothing)."""
    paths = sources(SIZE_RULED)
    for root in SIZE_RULED:
        assert f"{root}/__init__.py" in paths, root


def test_modules_are_short():
    offending = [
        f"{path} ({n} lines)"
        for path, text in sources(SIZE_RULED).items()
        if (n := len(text.splitlines())) > MAX_MODULE_LINES
    ]
    _fail_if_any(offending, f"modules over {MAX_MODULE_LINES} lines")


def test_functions_are_short():
    offending = []
    unreadable = []
    for path, text in sources(SIZE_RULED).items():
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            unreadable.append(f"{path}:{exc.lineno} does not parse: {exc.msg}")
            continue
        offending.extend(
            f"{path}:{line} {name} ({n} lines)"
            for line, name, n in function_lengths(tree)
            if n > MAX_FUNCTION_LINES
        )
    _fail_if_any(unreadable, "sources that cannot be read")
    _fail_if_any(
        offending,
        f"functions and methods over {MAX_FUNCTION_LINES} lines (def line to end of body)",
    )


# Private Keras uses with no public alternative, each marked "# keras-private:" on its
# line and covered by a test that fails if Keras changes it: (path, label) -> why.
ALLOWED_PRIVATE_KERAS = {
    ("t2t/parallel/sharding.py", r"\._value\b"):
        "a Keras variable backed by a DTensor DVariable (model parallelism): Keras 3's "
        "own layouts do not support the TensorFlow backend; tests/parallel/ trains on it",
}


def test_no_keras_private_attributes():
    offending = [
        f"{path}:{number} [{label}] {line.strip()}"
        for path, text in sources().items()
        for number, line in enumerate(text.splitlines(), start=1)
        for label, pattern in PRIVATE_KERAS.items()
        if pattern.search(line)
        and not ((path, label) in ALLOWED_PRIVATE_KERAS and "# keras-private:" in line)
    ]
    _fail_if_any(offending, "Keras private modules or attributes (they change between releases)")
