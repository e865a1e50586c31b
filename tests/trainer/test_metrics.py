"""Tests of t2t.trainer.metrics on hand-made logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t.trainer import metrics


def _one_hot_logits(predictions, vocab: int, high: float = 5.0) -> np.ndarray:
    """Logits whose argmax is `predictions` ([B, T] ints) -> [B, T, vocab]."""
    predictions = np.asarray(predictions)
    logits = np.zeros(predictions.shape + (vocab,), np.float32)
    np.put_along_axis(logits, predictions[..., None], high, axis=-1)
    return logits


# targets: row 0 has 3 real tokens + 1 pad, row 1 has 2 real tokens + 2 pads.
TARGETS = np.array([[1, 2, 3, 0], [4, 2, 0, 0]], np.int64)
# predictions: row 0 all real tokens right (pad position "wrong"), row 1 one of two wrong.
PREDICTIONS = np.array([[1, 2, 3, 4], [4, 1, 3, 3]], np.int64)


def _pair(pair):
    return float(pair[0]), float(pair[1])


def test_accuracy_ignores_padding():
    logits = _one_hot_logits(PREDICTIONS, 6)
    results = metrics.compute_metrics(["accuracy"], logits, TARGETS)
    assert _pair(results["accuracy"]) == (4.0, 5.0)


def test_accuracy_per_sequence():
    logits = _one_hot_logits(PREDICTIONS, 6)
    weights = metrics.weights_nonzero(TARGETS)
    assert _pair(metrics.accuracy_per_sequence(logits, TARGETS, weights)) == (1.0, 2.0)
    # An all-padding row (e.g. a filler row of a padded batch) is not counted.
    targets = np.concatenate([TARGETS, np.zeros((1, 4), np.int64)])
    logits = _one_hot_logits(np.concatenate([PREDICTIONS, np.ones((1, 4), np.int64)]), 6)
    result = metrics.compute_metrics(["accuracy_per_sequence"], logits, targets)
    assert _pair(result["accuracy_per_sequence"]) == (1.0, 2.0)


def test_accuracy_top5():
    # Vocabulary 8; logits rank the ids 0 > 1 > ... > 7 everywhere.
    logits = np.tile(np.arange(8, 0, -1, dtype=np.float32), (1, 3, 1))  # [1, 3, 8]
    targets = np.array([[4, 5, 0]])  # id 4 is 5th best: hit; id 5 is 6th: miss; pad.
    results = metrics.compute_metrics(["accuracy_top5", "accuracy"], logits, targets)
    assert _pair(results["accuracy_top5"]) == (1.0, 2.0)
    assert _pair(results["accuracy"]) == (0.0, 2.0)
    # A vocabulary smaller than 5: every target is in the top min(5, V).
    small = metrics.accuracy_top5(logits[..., :3], np.array([[2, 1, 1]]), tf.ones((1, 3)))
    assert _pair(small) == (3.0, 3.0)


def test_neg_log_perplexity_value():
    logits = np.array([[[2.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 3.0, 0.5]]], np.float32)
    targets = np.array([[1, 2, 0]])  # last position is padding
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = log_probs[0, 0, 1] + log_probs[0, 1, 2]
    num, den = _pair(
        metrics.compute_metrics(["neg_log_perplexity"], logits, targets)["neg_log_perplexity"]
    )
    assert den == 2.0
    assert num == pytest.approx(expected, rel=1e-6)
    assert num / den == pytest.approx(
        (math.log(math.exp(1) / (math.exp(2) + math.exp(1) + 1)) - math.log(3)) / 2
    )


def test_class_labels_count_label_zero():
    logits = _one_hot_logits([[0], [2], [1]], 3)  # [B, 1, C]
    targets = np.array([[0], [2], [2]])
    results = metrics.compute_metrics(
        ["accuracy", "accuracy_per_sequence"], logits, targets, "class_label"
    )
    assert _pair(results["accuracy"]) == (2.0, 3.0)
    assert _pair(results["accuracy_per_sequence"]) == (2.0, 3.0)
    assert metrics.weights_fn_for_modality("symbol") is metrics.weights_nonzero
    assert metrics.weights_fn_for_modality("image") is metrics.weights_all


def test_decode_time_metrics_are_skipped_unknown_fail():
    logits = _one_hot_logits(PREDICTIONS, 6)
    results = metrics.compute_metrics(["accuracy", "bleu", "rouge_2", "rouge_l"], logits, TARGETS)
    assert list(results) == ["accuracy"]
    assert metrics.trainable_metric_names(["bleu", "neg_log_perplexity"]) == ["neg_log_perplexity"]
    with pytest.raises(ValueError, match="'acc'") as err:
        metrics.compute_metrics(["acc"], logits, TARGETS)
    for name in (
        "accuracy",
        "accuracy_top5",
        "accuracy_per_sequence",
        "neg_log_perplexity",
        "bleu",
    ):
        assert name in str(err.value)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        metrics.accuracy(
            np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 1), np.int64), tf.ones((2, 3))
        )


def test_works_in_tf_function_with_bfloat16_logits():
    fn = tf.function(
        lambda logits, targets: metrics.compute_metrics(
            ["accuracy", "neg_log_perplexity"], logits, targets
        )
    )
    logits = tf.cast(_one_hot_logits(PREDICTIONS, 6), tf.bfloat16)
    results = fn(logits, tf.constant(TARGETS))
    assert _pair(results["accuracy"]) == (4.0, 5.0)
    assert results["neg_log_perplexity"][0].dtype == tf.float32


def test_accumulator_equals_metric_of_concatenated_batches():
    logits = _one_hot_logits(PREDICTIONS, 6)
    names = ["accuracy", "accuracy_per_sequence", "neg_log_perplexity"]
    accumulator = metrics.MetricsAccumulator()
    for row in range(2):  # one batch per row
        batch = metrics.compute_metrics(names, logits[row : row + 1], TARGETS[row : row + 1])
        accumulator.add({k: (v[0].numpy(), v[1].numpy()) for k, v in batch.items()})
    whole = metrics.compute_metrics(names, logits, TARGETS)
    result = accumulator.result()
    for name in names:
        assert result[name] == pytest.approx(float(whole[name][0] / whole[name][1]), rel=1e-6)
    assert result["accuracy"] == pytest.approx(0.8)  # 4/5, not the mean of 3/3 and 1/2
    accumulator.add("loss", 3.0, 2.0)
    accumulator.add("loss", np.float32(1.0), np.array(2.0))
    accumulator.add("empty", 0.0, 0.0)
    result = accumulator.result()
    assert result["loss"] == 1.0 and math.isnan(result["empty"])
    accumulator.reset()
    assert accumulator.result() == {}


def test_rmse_and_mean_absolute_error_of_real_targets():
    predictions = tf.constant([[[[1.0]]], [[[3.0]]]])  # a body's [B, 1, 1, D] output
    targets = tf.constant([[[2.0]], [[0.0]]])  # stored [B, 1, D]
    result = metrics.compute_metrics(["rmse", "mean_absolute_error"], predictions, targets,
                                     "real")
    accumulator = metrics.MetricsAccumulator()
    accumulator.add(result)
    values = accumulator.result()
    assert values["rmse"] == pytest.approx(((1.0 + 9.0) / 2) ** 0.5)
    assert values["mean_absolute_error"] == pytest.approx(2.0)
