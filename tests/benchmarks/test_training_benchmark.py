"""Smoke test of benchmarks/training.py's measurement helpers (a few tiny steps)."""

import argparse
import os
import sys

import numpy as np
import pytest

try:
    from benchmarks import real_text, training
except ImportError:  # pytest run from elsewhere than the repository root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from benchmarks import real_text, training

BATCH, LENGTH, VOCAB = 4, 8, 12
ONE_LAYER = "num_hidden_layers=1"  # traces twice as fast as transformer_test's two


@pytest.fixture(scope="module")
def problem_and_data(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    return training.make_problem(VOCAB, LENGTH, data_dir, train_size=64), data_dir


@pytest.fixture(scope="module")
def text_problem(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("text"))
    return real_text.make_text_problem(1000, data_dir, limit=4000), data_dir


def _check(result, tokens_per_step):
    assert result["steps"] == 2
    assert result["step_ms"] > 0 and result["tokens_per_s"] > 0 and result["examples_per_s"] > 0
    assert result["tokens_per_step"] == tokens_per_step


def test_trainer_and_bare_paths_train_on_the_same_batches(problem_and_data, tmp_path):
    problem, data_dir = problem_and_data
    hp = training.model_hparams("transformer_test", BATCH, LENGTH, ONE_LAYER)
    trainer = training.measure_trainer(problem, data_dir, str(tmp_path / "run"), hp, steps=2,
                                       warmup=1)
    # Every example is exactly LENGTH tokens: the Trainer counts no padding.
    _check(trainer, 2 * BATCH * LENGTH)
    assert trainer["examples_per_s"] * trainer["step_ms"] / 1000 == pytest.approx(BATCH)
    batches = training.sample_batches(problem, data_dir, hp, 3)
    assert [b["inputs"].shape for b in batches] == [(BATCH, LENGTH)] * 3
    bare = training.measure_bare(problem.hparams(data_dir), hp, batches, steps=2, warmup=1)
    _check(bare, 2 * BATCH * LENGTH)


def test_text_rows_read_real_sentences_at_real_lengths(text_problem, tmp_path):
    problem, data_dir = text_problem
    assert problem.load_encoder(data_dir).vocab_size == 1000
    hp = training.text_hparams("transformer_test", 512, 64, ONE_LAYER)
    batches = training.sample_batches(problem, data_dir, hp, 4)
    lengths = np.concatenate([np.count_nonzero(b["targets"], axis=1) for b in batches])
    assert len(set(lengths.tolist())) > 5 and lengths.max() <= 64  # varied, cut at max_length
    assert all(b["inputs"].size <= 512 and b["targets"].size <= 512 for b in batches)
    decoded = problem.load_encoder(data_dir).decode(batches[0]["inputs"][0].tolist(),
                                                    strip_extraneous=True)
    assert len(decoded.split()) >= real_text.MIN_WORDS  # a docstring sentence, not noise
    # The Trainer (seeded) reads exactly the sampled batches, in order: the same tokens.
    trainer = training.trainer_step(problem, data_dir, str(tmp_path / "run"), hp)
    bare = training.bare_step(problem.hparams(data_dir), hp, batches)
    for batch in batches:
        tokens = np.count_nonzero(batch["inputs"]) + np.count_nonzero(batch["targets"])
        assert trainer()[1] == bare()[1] == tokens


def test_a_vocabulary_the_corpus_cannot_fill_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not 32768.*smaller vocabulary"):
        real_text.make_text_problem(32768, str(tmp_path), limit=4000)


def test_flops_matmul_and_hparams(text_problem):
    hp = training.model_hparams("transformer_tiny", 32, 64)
    assert hp.batch_size == 2048 and hp.max_length == 64 and hp.static_shapes
    d = training.dims(hp)
    assert (d["hidden"], d["filter"], d["heads"], d["encoder_layers"]) == (128, 512, 4, 2)
    weights = 2 * (4 * 128**2 + 2 * 128 * 512) + 2 * (8 * 128**2 + 2 * 128 * 512) + 12 * 128
    no_attention = training.model_flops(hp, 12, 32, 64, 64, attention=False)
    assert no_attention == 6 * weights * 32 * 64
    assert training.model_flops(hp, 12, 32, 64, 64) > no_attention
    # Padding is not work: a padded batch costs what its real tokens cost.
    ids = np.ones([2, 6], np.int32)
    padded = {"inputs": np.pad(ids, [(0, 0), (0, 4)]), "targets": np.pad(ids, [(0, 0), (0, 4)])}
    assert training.flops_per_token(hp, 12, [padded]) == pytest.approx(
        training.model_flops(hp, 12, 2, 6, 6) / 24)
    assert training.measure_matmul(128, "float32", seconds=0.05) > 1e6


def test_bad_vocabularies_are_refused_with_the_fix():
    with pytest.raises(SystemExit):
        training.parse_args(["--vocabs", "8k"])
    with pytest.raises(argparse.ArgumentTypeError, match="'8k'.*8192,32768,12"):
        training._int_list("8k")
    with pytest.raises(argparse.ArgumentTypeError, match=">= 4"):
        training._int_list("2")
    assert training.parse_args([]).vocab_list == [8192, 32768, 12]


@pytest.mark.skipif(not training.torch_available(), reason="torch is not installed")
def test_torch_path(problem_and_data):
    problem, data_dir = problem_and_data
    hp = training.model_hparams("transformer_test", BATCH, LENGTH)
    batches = training.sample_batches(problem, data_dir, hp, 3)
    _check(training.measure_torch(training.dims(hp), VOCAB, batches, steps=2, warmup=1,
                                  threads=1), 2 * BATCH * LENGTH)
