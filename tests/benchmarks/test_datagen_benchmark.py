"""benchmarks/datagen.py at a tiny size: real generation in subprocesses, no timing checks."""

from __future__ import annotations

import pathlib
import sys

import pytest

try:
    from benchmarks import datagen
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import datagen


def test_benchmark_counts_rates_and_memory(tmp_path):
    figures = datagen.benchmark(datagen.PROBLEM, examples=200, scale=2, work_dir=str(tmp_path))
    assert set(figures) == {"problem", "scale", "runs", "peak_ratio", "added_ratio"}
    assert figures["problem"] == datagen.PROBLEM and figures["scale"] == 2
    small, large = figures["runs"]
    assert (small["train_examples"], large["train_examples"]) == (200, 400)
    # Every split is counted: train_size = n, dev_size = n // 10.
    assert (small["examples"], large["examples"]) == (220, 440)
    for run in figures["runs"]:
        assert run["seconds"] > 0 and run["examples_per_s"] > 0 and run["mib_per_s"] > 0
        assert run["examples_per_s"] == pytest.approx(run["examples"] / run["seconds"])
        assert run["peak_mib"] >= run["base_mib"] > 10  # a Python process with TensorFlow
        assert run["added_mib"] == pytest.approx(max(run["peak_mib"] - run["base_mib"], 0))
    assert figures["peak_ratio"] == pytest.approx(large["peak_mib"] / small["peak_mib"])
    assert figures["added_ratio"] == pytest.approx(large["added_mib"]
                                                   / max(small["added_mib"], 1.0))
    assert list(tmp_path.iterdir()) == []  # the generated data is removed

    table = datagen.format_table(figures)
    lines = table.splitlines()
    assert "examples/s" in lines[0] and "peak MiB" in lines[0]
    assert lines[1].split()[:2] == ["200", "220"] and lines[2].split()[:2] == ["400", "440"]
    assert f"peak(2N) / peak(N) = {figures['peak_ratio']:.3f}" in lines[-1]


def test_failing_worker_reports_its_output(tmp_path):
    with pytest.raises(RuntimeError, match="datagen worker .* failed") as info:
        datagen.run_child("no_such_problem_for_the_benchmark", 10, str(tmp_path / "w"))
    assert "no_such_problem_for_the_benchmark" in str(info.value)
