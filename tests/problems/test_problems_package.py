"""Tests of t2t/problems/__init__.py: Tensor2Tensor's `problems.available()`."""

from __future__ import annotations

import subprocess
import sys

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
