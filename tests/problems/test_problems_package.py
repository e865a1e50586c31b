"""Tests of t2t/problems/__init__.py: Tensor2Tensor's `problems.available()`."""

from __future__ import annotations

import subprocess
import sys

import pytest

import t2t.problems
from t2t import registry


def test_available_lists_every_registered_problem_sorted():
    names = t2t.problems.available()
    assert names == sorted(names) == sorted(registry.list_problems())
    assert {"algorithmic_reverse_binary40_test", "translate_ende_wmt32k"} <= set(names)


def test_importing_the_package_stays_light():
    """`import t2t.problems` and available() import no TensorFlow, as the registry."""
    code = ("import sys, t2t.problems; n = len(t2t.problems.available()); "
            "print(n, 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert int(out[0]) > 20 and out[1] == "False"


def test_every_moved_module_keeps_its_old_import_path():
    """`t2t.problems.<old>` is the moved module itself (not a copy), in every import form."""
    import importlib

    for old, new in t2t.problems.MOVED_MODULES.items():
        moved = importlib.import_module(new)
        assert importlib.import_module(f"t2t.problems.{old}") is moved, old
        assert getattr(t2t.problems, old) is moved
        assert moved.__spec__.name == new  # the alias does not rename the module
    from t2t.problems import generator_utils, problem, text_encoder, text_problems

    assert problem.Problem.__module__ == "t2t.data.problem"
    assert text_problems.Text2TextProblem and generator_utils.generate_files
    assert text_encoder.EOS_ID == 1


def test_unknown_names_in_the_package_still_fail():
    with pytest.raises(ModuleNotFoundError, match="t2t.problems.no_such_module"):
        __import__("t2t.problems.no_such_module")


def test_python_dash_m_runs_a_moved_module_by_its_old_name():
    out = subprocess.run([sys.executable, "-m", "t2t.problems.catalog"], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "algorithmic_reverse_binary40_test" in out


def test_t2t_code_imports_the_new_paths():
    """The aliases are for users: t2t's own code, regression/ and benchmarks/ import the
    modules where they live (the import-direction tests read the real edges)."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    moved = set(t2t.problems.MOVED_MODULES)
    found = []
    for folder in ("t2t", "regression", "benchmarks"):
        for path in sorted((repo / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "t2t.problems":
                    names = [a.name for a in node.names if a.name in moved]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module] if node.module.split(".")[:2] == ["t2t", "problems"] \
                        and len(node.module.split(".")) > 2 \
                        and node.module.split(".")[2] in moved else []
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names if a.name.split(".")[:2] == ["t2t", "problems"]
                             and len(a.name.split(".")) > 2 and a.name.split(".")[2] in moved]
                else:
                    continue
                found += [f"{path.relative_to(repo)}:{node.lineno} {n}" for n in names]
    assert not found, "\n".join(found)
