"""Evaluation metrics as (numerator, denominator) sums, Tensor2Tensor's definitions.

Every metric function maps (logits [..., V] float, targets [...] int, weights [...] float)
to two float32 scalars whose ratio is the metric. Sums, not means, so they add up over
replicas (`strategy.reduce(SUM, ...)`) and batches (`MetricsAccumulator`) into the exact
value over the whole eval set. Shapes: symbols: logits [B, T, V], targets [B, T],
weights = targets != 0; class labels: logits [B, 1, C], targets [B, 1], weights = 1.

Names (from `problem.eval_metrics()`), as T2T's `padded_*` metrics:
- accuracy: argmax == target, per weighted token.
- accuracy_top5: target among the top min(5, V) logits, per weighted token.
- accuracy_per_sequence: a sequence is correct iff all its weighted tokens are; the
  denominator counts sequences with at least one weighted token (T2T counted every
  row, so an all-padding row counted as correct; real sequences always have a token).
- neg_log_perplexity: -(cross-entropy), i.e. mean log-probability of the targets.
Decode-time names ("bleu", "rouge_2", "rouge_l") need decoded text; the decoder computes
them, so `compute_metrics` skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

Pair = tuple[tf.Tensor, tf.Tensor]
WeightsFn = Callable[[tf.Tensor], tf.Tensor]

DECODE_METRICS = ("bleu", "rouge_2", "rouge_l")


def weights_nonzero(targets: tf.Tensor) -> tf.Tensor:
    """1.0 where targets != 0 (0 is padding), else 0.0; float32, shape of targets."""
    return tf.cast(tf.not_equal(targets, 0), tf.float32)


def weights_all(targets: tf.Tensor) -> tf.Tensor:
    """1.0 everywhere: every position counts (class labels, images)."""
    return tf.ones_like(targets, dtype=tf.float32)


def weights_fn_for_modality(modality: str) -> WeightsFn:
    """T2T's choice: weights_nonzero for "symbol" targets, weights_all otherwise."""
    return weights_nonzero if modality == "symbol" else weights_all


def _prepare(
    logits: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """float32 logits, int64 targets, float32 weights; checks the ranks."""
    logits = tf.convert_to_tensor(logits)
    targets = tf.convert_to_tensor(targets)
    if logits.shape.rank is None or targets.shape.rank != logits.shape.rank - 1:
        raise ValueError(
            f"targets {targets.shape} must have the shape of logits {logits.shape} "
            "without its last (vocabulary) axis."
        )
    return tf.cast(logits, tf.float32), tf.cast(targets, tf.int64), tf.cast(weights, tf.float32)


def accuracy(logits: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> Pair:
    """(sum of weights where argmax(logits) == targets, sum of weights)."""
    logits, targets, weights = _prepare(logits, targets, weights)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1), targets), tf.float32)
    return tf.reduce_sum(correct * weights), tf.reduce_sum(weights)


def accuracy_top5(logits: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor, k: int = 5) -> Pair:
    """(sum of weights where targets is among the top min(k, V) logits, sum of weights)."""
    logits, targets, weights = _prepare(logits, targets, weights)
    vocab = logits.shape[-1]
    effective_k = k if vocab is None else min(k, vocab)
    _, top = tf.nn.top_k(logits, k=effective_k)
    hit = tf.reduce_any(tf.equal(tf.cast(top, tf.int64), targets[..., tf.newaxis]), axis=-1)
    return tf.reduce_sum(tf.cast(hit, tf.float32) * weights), tf.reduce_sum(weights)


def accuracy_per_sequence(logits: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> Pair:
    """(sequences whose weighted tokens are all correct, sequences with any weight).

    A sequence is a row of the batch (axis 0); all other axes are its positions.
    """
    logits, targets, weights = _prepare(logits, targets, weights)
    wrong = tf.cast(tf.not_equal(tf.argmax(logits, axis=-1), targets), tf.float32) * weights
    axes = list(range(1, targets.shape.rank))
    if axes:
        wrong = tf.reduce_sum(wrong, axis=axes)
        weights = tf.reduce_sum(weights, axis=axes)
    present = tf.cast(weights > 0, tf.float32)
    correct = (1.0 - tf.minimum(1.0, wrong)) * present
    return tf.reduce_sum(correct), tf.reduce_sum(present)


def neg_log_perplexity(logits: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> Pair:
    """(-sum of weighted cross-entropy in nats, sum of weights); no label smoothing."""
    logits, targets, weights = _prepare(logits, targets, weights)
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    return -tf.reduce_sum(xent * weights), tf.reduce_sum(weights)


METRICS: dict[str, Callable[[tf.Tensor, tf.Tensor, tf.Tensor], Pair]] = {
    "accuracy": accuracy,
    "accuracy_top5": accuracy_top5,
    "accuracy_per_sequence": accuracy_per_sequence,
    "neg_log_perplexity": neg_log_perplexity,
}


def _check_name(name: str) -> None:
    if name not in METRICS and name not in DECODE_METRICS:
        raise ValueError(
            f"Unknown metric {name!r}. Choices: {', '.join(METRICS)}; computed by the "
            f"decoder: {', '.join(DECODE_METRICS)}."
        )


def trainable_metric_names(names: Iterable[str]) -> list[str]:
    """`names` without the decode-time ones; unknown names raise ValueError."""
    names = list(names)
    for name in names:
        _check_name(name)
    return [name for name in names if name in METRICS]


def compute_metrics(
    names: Iterable[str],
    logits: tf.Tensor,
    targets: tf.Tensor,
    weights_fn: WeightsFn | str = weights_nonzero,
) -> dict[str, Pair]:
    """{name: (numerator, denominator)} for each name; decode-time names are skipped.

    weights_fn: a function of targets, or a modality name ("symbol" -> weights_nonzero,
    others -> weights_all).
    """
    if isinstance(weights_fn, str):
        weights_fn = weights_fn_for_modality(weights_fn)
    weights = tf.cast(weights_fn(tf.convert_to_tensor(targets)), tf.float32)
    return {name: METRICS[name](logits, targets, weights) for name in trainable_metric_names(names)}


def _to_float(value: Any) -> float:
    if hasattr(value, "numpy"):
        value = value.numpy()
    return float(np.sum(np.asarray(value, dtype=np.float64)))


class MetricsAccumulator:
    """Sums (numerator, denominator) pairs by name; `result()` gives the ratios.

    Pure Python/numpy: feed it host values (numpy, Python floats or eager tensors),
    after reducing over replicas (`strategy.reduce(SUM, value, axis=None)`).
    """

    def __init__(self) -> None:
        self._sums: dict[str, list[float]] = {}

    def add(self, name_or_pairs: str | Mapping[str, Any], num: Any = None, den: Any = None) -> None:
        """add("accuracy", num, den) or add({"accuracy": (num, den), ...})."""
        if isinstance(name_or_pairs, str):
            pairs: Mapping[str, Any] = {name_or_pairs: (num, den)}
        else:
            pairs = name_or_pairs
        for name, (n, d) in pairs.items():
            total = self._sums.setdefault(name, [0.0, 0.0])
            total[0] += _to_float(n)
            total[1] += _to_float(d)

    def result(self) -> dict[str, float]:
        """{name: numerator / denominator}; NaN where the denominator is 0."""
        return {name: (n / d if d else float("nan")) for name, (n, d) in self._sums.items()}

    def reset(self) -> None:
        self._sums.clear()
