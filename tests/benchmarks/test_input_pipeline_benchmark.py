"""benchmarks/input_pipeline.py: its hparams give every batching field (fast); at a tiny
size every stage reads real generated data (slow: ~35 s on 2 shared cores)."""

from __future__ import annotations

import pathlib
import sys

import pytest

try:
    from benchmarks import input_pipeline
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import input_pipeline

from t2t.data.pipeline.input_pipeline import Batching


def test_the_benchmark_hparams_hold_every_batching_field():
    batching = Batching.from_hparams(input_pipeline._hparams(batch_shuffle_size=32))
    assert (batching.batch_size, batching.batch_shuffle_size) == (4096, 32)
    assert (batching.max_input_seq_length, batching.max_target_seq_length) == (0, 0)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    problem = input_pipeline._BenchReverseDecimal40()
    problem.train_size = 300
    tmp = tmp_path_factory.mktemp("input_pipeline")
    data_dir = str(tmp / "data")
    problem.generate_data(data_dir, str(tmp / "tmp"), progress=False)
    return problem, data_dir


@pytest.mark.slow
def test_every_stage_yields_counted_batches(tiny_data):
    problem, data_dir = tiny_data
    stages = input_pipeline._stages(problem, data_dir, shuffle=8)
    assert len(stages) == 7
    for name, make in stages.items():
        batch = next(iter(make()))
        examples, real, padded = input_pipeline._count(batch)
        assert examples > 0 and 0 < real <= padded, name
        if name.startswith("packing"):  # several examples share a row of 256 positions
            assert batch["targets"].shape[1] == 256 and examples > len(batch["targets"]), name


@pytest.mark.slow
def test_measure_reports_rates_after_the_first_batch(tiny_data):
    problem, data_dir = tiny_data
    make = input_pipeline._stages(problem, data_dir, shuffle=8)[
        "parse: Problem.dataset + padded_batch(256)"]
    figures = input_pipeline.measure(make, seconds=0.05)
    assert figures["examples_per_s"] > 0 and figures["tokens_per_s"] > 0
    assert 0 < figures["efficiency"] <= 1
    assert figures["padded_tokens_per_s"] >= figures["tokens_per_s"]
    assert figures["first_batch_s"] > 0
