"""Smoke test of benchmarks/training.py's measurement helpers (a few tiny steps, no torch)."""

import os
import sys

import pytest

try:
    from benchmarks import training
except ImportError:  # pytest run from elsewhere than the repository root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from benchmarks import training

BATCH, LENGTH, VOCAB = 4, 8, 12
ONE_LAYER = "num_hidden_layers=1"  # traces twice as fast as transformer_test's two


@pytest.fixture(scope="module")
def problem_and_data(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    return training.make_problem(VOCAB, LENGTH, data_dir, train_size=64), data_dir


def _check(result, tokens_per_step):
    assert result["steps"] == 2
    assert result["step_ms"] > 0 and result["tokens_per_s"] > 0 and result["examples_per_s"] > 0
    assert result["tokens_per_step"] == tokens_per_step


def test_trainer_and_bare_paths_measure_the_same_batches(problem_and_data, tmp_path):
    problem, data_dir = problem_and_data
    trainer = training.measure_trainer(
        problem, data_dir, str(tmp_path / "run"), "transformer_test", BATCH, LENGTH, steps=2,
        warmup=1, hparams_overrides=ONE_LAYER,
    )
    # Every example is exactly LENGTH tokens: the Trainer counts no padding.
    _check(trainer, 2 * BATCH * LENGTH)
    assert trainer["examples_per_s"] * trainer["step_ms"] / 1000 == pytest.approx(BATCH)
    bare = training.measure_bare(
        problem.hparams(data_dir), "transformer_test", BATCH, LENGTH, steps=2, warmup=1,
        hparams_overrides=ONE_LAYER,
    )
    _check(bare, 2 * BATCH * LENGTH)


def test_flops_matmul_and_hparams():
    hp = training.model_hparams("transformer_tiny", 32, 64)
    assert hp.batch_size == 2048 and hp.max_length == 64 and hp.static_shapes
    d = training.dims(hp)
    assert (d["hidden"], d["filter"], d["heads"], d["encoder_layers"]) == (128, 512, 4, 2)
    weights = 2 * (4 * 128**2 + 2 * 128 * 512) + 2 * (8 * 128**2 + 2 * 128 * 512) + 12 * 128
    no_attention = training.model_flops(hp, 12, 32, 64, 64, attention=False)
    assert no_attention == 6 * weights * 32 * 64
    assert training.model_flops(hp, 12, 32, 64, 64) > no_attention
    assert training.measure_matmul(128, "float32", seconds=0.05) > 1e6


@pytest.mark.skipif(not training.torch_available(), reason="torch is not installed")
def test_torch_path():
    d = training.dims(training.model_hparams("transformer_test", BATCH, LENGTH))
    _check(training.measure_torch(d, VOCAB, BATCH, LENGTH, steps=2, warmup=1, threads=1),
           2 * BATCH * LENGTH)
