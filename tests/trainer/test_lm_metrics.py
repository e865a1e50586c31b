"""perplexity and bits_per_byte: their sums, how they are reported, which problems get
them, when they are skipped."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.hparams.basic import create_hparams
from t2t.trainer import metrics
from t2t.trainer import task as task_lib

TARGETS = np.array([[3, 4, 1, 0], [2, 1, 0, 0]], np.int64)


def _logits(seed: int = 0, vocab: int = 6) -> np.ndarray:
    return np.random.RandomState(seed).normal(size=(*TARGETS.shape, vocab)).astype(np.float32)


def _value(pair):
    return float(pair[0]) / float(pair[1])


def test_perplexity_has_the_sums_of_neg_log_perplexity_and_is_reported_as_exp():
    logits = _logits()
    results = metrics.compute_metrics(["neg_log_perplexity", "perplexity"], logits, TARGETS)
    assert [float(v) for v in results["perplexity"]] == [
        float(v) for v in results["neg_log_perplexity"]]
    accumulator = metrics.MetricsAccumulator()
    for row in range(2):  # one batch per row: the mean is over all tokens, then exp
        batch = metrics.compute_metrics(["perplexity", "neg_log_perplexity"],
                                        logits[row:row + 1], TARGETS[row:row + 1])
        accumulator.add({k: (v[0].numpy(), v[1].numpy()) for k, v in batch.items()})
    reported = accumulator.result()
    assert reported["perplexity"] == pytest.approx(math.exp(-reported["neg_log_perplexity"]))
    assert reported["perplexity"] == pytest.approx(
        math.exp(-_value(results["neg_log_perplexity"])), rel=1e-6)
    # Alone (without neg_log_perplexity in the list) it is computed all the same.
    alone = metrics.compute_metrics(["perplexity"], logits, TARGETS)
    assert _value(alone["perplexity"]) == pytest.approx(_value(results["neg_log_perplexity"]))


def test_perplexity_of_an_empty_or_hopeless_eval():
    accumulator = metrics.MetricsAccumulator()
    accumulator.add("perplexity", 0.0, 0.0)
    assert math.isnan(accumulator.result()["perplexity"])
    accumulator.reset()
    accumulator.add("perplexity", -1e6, 1.0)  # exp(1e6) overflows a float
    assert accumulator.result()["perplexity"] == float("inf")


def test_bits_per_byte_is_nll_in_bits_over_the_bytes_of_the_targets():
    logits = _logits(1)
    byte_lengths = np.array([0, 1, 3, 2, 5, 1], np.float32)  # PAD 0, EOS 1
    results = metrics.compute_metrics(["neg_log_perplexity", "bits_per_byte"], logits,
                                      TARGETS, byte_lengths=byte_lengths)
    nll_nats = -float(results["neg_log_perplexity"][0])
    bits, num_bytes = (float(v) for v in results["bits_per_byte"])
    assert bits == pytest.approx(nll_nats / math.log(2), rel=1e-6)
    assert num_bytes == 2 + 5 + 1 + 3 + 1  # targets 3, 4, EOS, 2, EOS; padding counts 0
    # One byte per token (EOS included): bits_per_byte is the mean NLL in bits.
    ones = np.array([0, 1, 1, 1, 1, 1], np.float32)
    per_byte = metrics.compute_metrics(["bits_per_byte"], logits, TARGETS, byte_lengths=ones)
    assert _value(per_byte["bits_per_byte"]) == pytest.approx(
        -_value(results["neg_log_perplexity"]) / math.log(2), rel=1e-6)


def test_bits_per_byte_without_a_table_is_skipped_and_names_are_checked():
    results = metrics.compute_metrics(["accuracy", "bits_per_byte"], _logits(), TARGETS)
    assert list(results) == ["accuracy"]
    assert metrics.trainable_metric_names(["perplexity", "bleu", "bits_per_byte"]) == [
        "perplexity", "bits_per_byte"]
    with pytest.raises(ValueError, match="perplexity.*bits_per_byte"):
        metrics.trainable_metric_names(["bits_per_word"])


def test_bits_per_byte_in_a_tf_function_with_bfloat16_logits():
    fn = tf.function(lambda logits: metrics.compute_metrics(
        ["bits_per_byte", "perplexity"], logits, TARGETS,
        byte_lengths=np.array([0, 1, 1, 1, 1, 1], np.float32)))
    results = fn(tf.cast(_logits(), tf.bfloat16))
    assert results["bits_per_byte"][0].dtype == tf.float32
    assert float(results["bits_per_byte"][1]) == 5.0


class _IntegerLm(problem_lib.Problem):
    """A language model whose encoder (integers as text) cannot give byte lengths."""

    def problem_hparams(self, data_dir):
        return problem_lib.ProblemHParams(modality={"targets": "symbol"},
                                          vocab_size={"targets": 10})

    def build_encoders(self, data_dir):
        return {"targets": text_encoder.TextEncoder()}


def _task(problem):
    return task_lib.Task(problem, "transformer", create_hparams("transformer_test"), None)


def test_language_models_get_perplexity_and_bits_per_byte_when_the_encoder_can_say(caplog):
    lm = _task(registry.problem("algorithmic_lm_reverse_binary10"))
    assert lm.is_language_model()
    assert lm.eval_metric_names() == ["accuracy", "neg_log_perplexity", "perplexity",
                                      "bits_per_byte"]
    # Tokens "0", "1", "|": each with its separating space (the last one's stands for
    # the line end); PAD 0, EOS 0.
    assert lm.target_byte_lengths().tolist() == [0, 0, 2, 2, 2]
    seq2seq = _task(registry.problem("algorithmic_reverse_binary40_test"))
    assert not seq2seq.is_language_model()
    assert seq2seq.eval_metric_names() == ["accuracy", "accuracy_per_sequence",
                                           "neg_log_perplexity"]
    integers = _task(_IntegerLm())
    with caplog.at_level(logging.WARNING):
        names = integers.eval_metric_names()
    assert names == ["accuracy", "accuracy_per_sequence", "neg_log_perplexity", "perplexity"]
    assert "bits_per_byte skipped" in caplog.text and integers.target_byte_lengths() is None
