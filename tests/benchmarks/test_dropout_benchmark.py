"""Smoke test of benchmarks/dropout.py on a small activation."""

from __future__ import annotations

import json
import pathlib
import sys

try:
    from benchmarks import dropout
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import dropout


def test_both_kernels_are_timed_in_both_precisions(capsys):
    rows = dropout.main(["--quick"])
    assert [row["dtype"] for row in rows] == ["float32", "bfloat16"]
    for row in rows:
        assert row["keras_ms"] > 0 and row["t2t_ms"] > 0
        assert abs(row["speedup"] - row["keras_ms"] / row["t2t_ms"]) < 1e-9
    out = capsys.readouterr().out
    assert "dropout rate 0.1 on [512, 512]" in out
    assert json.loads(out.strip().splitlines()[-1])["shape"] == [512, 512]
