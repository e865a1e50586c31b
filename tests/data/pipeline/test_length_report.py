"""Tests of t2t.data.pipeline.length_report: what the length filter drops, counted as the
input pipeline drops it, and said by the Trainer before the first step."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from t2t import registry
from t2t.config import TrainerConfig
from t2t.data.pipeline import input_pipeline, length_report
from t2t.hparams.basic import create_hparams
from tests.helpers.image_data import tiny_fashion_mnist  # noqa: F401 (a fixture)

PROBLEM = "algorithmic_reverse_binary40_test"  # lengths 1..10 (+ EOS), 1000 train, 100 dev


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    return problem, data_dir


def _source_lengths(problem, data_dir, split):
    """(inputs lengths, targets lengths) int [n] of every example of `split`, read plainly."""
    pairs = [(len(ex["inputs"]), len(ex["targets"])) for ex in problem.dataset(
        "eval", data_dir, shuffle_files=False, split=split).as_numpy_iterator()]
    return np.array(pairs).T


def _pipeline_counts(problem, data_dir, hparams, mode):
    """(examples, tokens) that input_dataset's batches hold (0 is padding; packed rows
    hold segments 1, 2, ...)."""
    dataset = input_pipeline.input_dataset(problem, mode, data_dir, hparams, repeat=False)
    examples = tokens = 0
    for batch in dataset.as_numpy_iterator():
        segments = batch.get("targets_segmentation")
        examples += len(batch["targets"]) if segments is None else int(segments.max(1).sum())
        tokens += int((batch["inputs"] > 0).sum() + (batch["targets"] > 0).sum())
    return examples, tokens


@pytest.mark.parametrize("mode,overrides", [
    ("train", "max_length=6"),
    ("eval", "max_length=6,eval_drop_long_sequences=true,min_length=4"),
    ("train", "max_length=4,max_input_seq_length=4,max_target_seq_length=3,min_length=3"),
    ("train", "max_length=7,pack_dataset=true"),
])
def test_counts_are_what_the_pipeline_keeps(data, mode, overrides):
    problem, data_dir = data
    hparams = create_hparams("transformer_test", f"batch_size=64,{overrides}")
    split = "train" if mode == "train" else "dev"
    report = length_report.length_report(problem, data_dir, hparams, split)
    examples, tokens = _pipeline_counts(problem, data_dir, hparams, mode)
    assert report.complete and report.examples_seen == (1000 if split == "train" else 100)
    assert 0 < report.examples_dropped < report.examples_seen
    assert report.examples_seen - report.examples_dropped == examples
    assert report.tokens_seen - report.tokens_truncated - report.tokens_dropped == tokens


def test_the_message_counts_the_drops_and_names_the_fix(data):
    problem, data_dir = data
    inputs, targets = _source_lengths(problem, data_dir, "train")
    lengths = np.maximum(inputs, targets)
    long = lengths > 6
    hparams = create_hparams("transformer_test", "batch_size=64,max_length=6")
    report = length_report.length_report(problem, data_dir, hparams, "train")
    assert (report.examples_dropped, report.longest) == (int(long.sum()), int(lengths.max()))
    assert report.tokens_seen == int(inputs.sum() + targets.sum())
    assert report.tokens_dropped == int(inputs[long].sum() + targets[long].sum())
    assert report.needs_warning()
    share = 100 * long.sum() / 1000
    assert report.message().startswith(
        f"Length filter: max_length=6 drops {long.sum()} of 1,000 train examples ({share:.1f}%, ")
    assert report.message().endswith(
        f"longest {lengths.max()}). Keep them with --hparams=max_length={lengths.max()} (or cut "
        f"examples shorter at datagen).")

    kept = length_report.length_report(problem, data_dir, create_hparams(
        "transformer_test", "batch_size=64,max_length=0"), "train")
    assert kept.examples_dropped == 0 and not kept.needs_warning()
    assert kept.message() == (f"Length filter: max_length=0 (so batch_size=64) keeps all 1,000 "
                              f"train examples (longest {lengths.max()}).")


def test_a_prefix_is_an_exact_count_and_said_to_be_an_estimate(data):
    problem, data_dir = data
    hparams = create_hparams("transformer_test", "batch_size=64,max_length=6")
    report = length_report.length_report(problem, data_dir, hparams, "train", max_examples=300)
    lengths = np.maximum(*_source_lengths(problem, data_dir, "train"))
    assert not report.complete and report.examples_seen == 300
    assert 0 < report.examples_dropped < 300
    assert f"drops {report.examples_dropped} of the first 300 train examples read (" in \
        report.message() and "; an estimate: the split holds more)." in report.message()
    whole = length_report.length_report(problem, data_dir, hparams, "train", max_examples=1000)
    assert whole.complete and whole.examples_dropped == int((lengths > 6).sum())
    with pytest.raises(ValueError, match="max_examples >= 1"):
        length_report.length_report(problem, data_dir, hparams, "train", max_examples=0)


def test_length_keeping():
    lengths = np.arange(1, 101)
    assert length_report.length_keeping(lengths, np.ones(100), 0.99) == 99
    assert length_report.length_keeping(lengths, np.ones(100), 1.0) == 100
    # One long example holds half the tokens: keeping 99% of the tokens keeps it.
    assert length_report.length_keeping(lengths, np.r_[np.ones(99), 99], 0.99) == 100
    assert length_report.length_keeping(np.zeros(0, int), np.zeros(0), 0.99) == 0


def test_the_trainer_says_it_before_the_first_step(data, tmp_path, caplog, capsys):
    from t2t.trainer.trainer import Trainer

    problem, data_dir = data
    hparams = create_hparams("transformer_test", "batch_size=64,max_length=6")
    with caplog.at_level(logging.WARNING):
        trainer = Trainer(problem, "transformer", hparams, data_dir, str(tmp_path / "run"),
                          TrainerConfig(train_steps=1, local_eval_frequency=1, eval_steps=1))
    warnings = [r.getMessage() for r in caplog.records if "Length filter" in r.getMessage()]
    assert trainer.step == 0 and len(warnings) == 2, warnings
    assert "max_length=6 drops" in warnings[0] and "Keep them with --hparams=max_length=11" in warnings[0]
    assert "dev examples read" in warnings[1] and "longer than training keeps" in warnings[1]



def test_below_the_threshold_one_info_line_per_split(data, caplog, capsys):
    problem, data_dir = data
    hparams = create_hparams("transformer_test", "batch_size=64,max_length=0")
    with caplog.at_level(logging.WARNING):
        reports = length_report.report_input_lengths(problem, data_dir, hparams,
                                                     eval_split="dev")
    assert [r.split for r in reports] == ["train", "dev"] and not caplog.records
    assert capsys.readouterr().out.splitlines() == [
        "Length filter: max_length=0 (so batch_size=64) keeps all 1,000 train examples "
        "(longest 11).",
        "Length filter: no max_length in EVAL (eval_drop_long_sequences=False) keeps all 100 "
        "dev examples (longest 11)."]
    # A split without data is skipped (the pipeline says so when it reads it).
    assert [r.split for r in length_report.report_input_lengths(
        problem, data_dir, hparams, train=False, eval_split="test")] == []


def test_images_and_labels_are_not_reported(tiny_fashion_mnist, capsys):  # noqa: F811
    data_dir, _ = tiny_fashion_mnist
    problem = registry.problem("image_fashion_mnist")
    hparams = create_hparams("transformer_test", "batch_size=4")
    report = length_report.length_report(problem, data_dir, hparams, "train")
    assert report.setting == length_report.NO_SEQUENCES and report.examples_seen == 0
    assert length_report.report_input_lengths(problem, data_dir, hparams, eval_split="dev") == []
    assert "Length filter" not in capsys.readouterr().out
