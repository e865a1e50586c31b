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
- perplexity: exp(mean per-token negative log-likelihood), over the tokens that
  neg_log_perplexity averages. A ratio of sums cannot give it directly: its pair carries
  neg_log_perplexity's sums, and `MetricsAccumulator.result()` (where the summed pairs
  become the reported values) reports exp(-numerator / denominator) (`REPORTED_AS`).
- bits_per_byte: (sum over weighted target tokens, EOS included, of -log2 p) / (UTF-8
  bytes of the text those tokens stand for). Needs the table of each id's byte length
  (`byte_lengths`, from the targets encoder's `token_byte_lengths()`, where EOS stands
  for the newline or document end); without it the metric is skipped. Comparable
  across vocabularies and with compressors.
- bits_per_dim: mean -log2 p per weighted target position: for image targets (every
  sub-pixel a position), the bits per dimension image models report.
Decode-time names (`DECODE_METRICS`: "bleu", "rouge_1", "rouge_2", "rouge_l", "wer",
"cer") need decoded text, so `compute_metrics` skips them: each training evaluation
decodes eval examples greedily and scores them (t2t.trainer.eval_decoding: "bleu" reports
bleu and chrf, any ROUGE name rouge_1, rouge_2 and rouge_l), and t2t-decoder scores its
decodes against references (`t2t.decoding.decode_scores.score_decodes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from t2t import registry
from t2t.layers import modalities
from t2t.utils import metrics as metric_names

Pair = tuple[tf.Tensor, tf.Tensor]
WeightsFn = Callable[[tf.Tensor], tf.Tensor]

DECODE_METRICS = ("bleu", "rouge_1", "rouge_2", "rouge_l", "wer", "cer")


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


def _regression_prepare(predictions: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor
                        ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    predictions = tf.cast(tf.convert_to_tensor(predictions), tf.float32)
    targets = tf.cast(tf.convert_to_tensor(targets), tf.float32)
    if predictions.shape.rank != targets.shape.rank:  # [B, 1, 1, D] for [B, 1, D]: same values
        predictions = modalities.match_target_shape(predictions, targets)
    return predictions, targets, tf.cast(weights, tf.float32)


def squared_error(predictions: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> Pair:
    """(sum of weighted (prediction - target)^2, sum of weights): "rmse" reports the
    square root of the ratio. Tensor2Tensor's "rmse" averaged |error| instead (its
    sqrt(e^2)); t2t's is the root mean square its name says, and "mean_absolute_error"
    is T2T's figure."""
    predictions, targets, weights = _regression_prepare(predictions, targets, weights)
    return tf.reduce_sum(tf.square(predictions - targets) * weights), tf.reduce_sum(weights)


def absolute_error(predictions: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> Pair:
    """(sum of weighted |prediction - target|, sum of weights)."""
    predictions, targets, weights = _regression_prepare(predictions, targets, weights)
    return tf.reduce_sum(tf.abs(predictions - targets) * weights), tf.reduce_sum(weights)


def bits_per_byte(logits: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor,
                  byte_lengths: Any) -> Pair:
    """(sum of weighted -log2 p(target), sum of weighted byte lengths of the targets).

    byte_lengths: [V] bytes of text each id stands for (a constant table)."""
    return _bits_over_bytes(neg_log_perplexity(logits, targets, weights), targets, weights,
                            byte_lengths)


def _bits_over_bytes(nll_pair: Pair, targets: tf.Tensor, weights: tf.Tensor,
                     byte_lengths: Any) -> Pair:
    """bits_per_byte's pair from neg_log_perplexity's (its numerator is -sum of nats)."""
    table = tf.cast(tf.convert_to_tensor(byte_lengths), tf.float32)
    num_bytes = tf.gather(table, tf.cast(targets, tf.int64))
    return -nll_pair[0] / math.log(2.0), tf.reduce_sum(num_bytes * tf.cast(weights, tf.float32))


METRICS: dict[str, Callable[[tf.Tensor, tf.Tensor, tf.Tensor], Pair]] = {
    "accuracy": accuracy,
    "accuracy_top5": accuracy_top5,
    "accuracy_per_sequence": accuracy_per_sequence,
    "neg_log_perplexity": neg_log_perplexity,
    "rmse": squared_error,
    "mean_absolute_error": absolute_error,
}
PERPLEXITY = "perplexity"
BITS_PER_BYTE = "bits_per_byte"
BITS_PER_DIM = "bits_per_dim"
# Computed in compute_metrics from more than (logits, targets, weights).
LM_METRICS = (PERPLEXITY, BITS_PER_BYTE)  # added to a language model's eval metrics
TRAINABLE_METRICS = (*METRICS, *LM_METRICS, BITS_PER_DIM)


def _exp_neg(value: float) -> float:
    try:
        return math.exp(-value)
    except OverflowError:
        return float("inf")


# Names whose reported value is a function of their ratio of sums.
REPORTED_AS: dict[str, Callable[[float], float]] = {PERPLEXITY: _exp_neg, "rmse": math.sqrt}


def _check_name(name: str) -> None:
    if name not in TRAINABLE_METRICS and name not in DECODE_METRICS:
        t2t_names = list(metric_names.T2T_TO_T2T)  # Tensor2Tensor's spellings work too
        near = registry.close_matches(name, [*TRAINABLE_METRICS, *DECODE_METRICS, *t2t_names])
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        raise ValueError(
            f"Unknown metric {name!r}.{hint} Choices: {', '.join(TRAINABLE_METRICS)}; "
            f"computed by the decoder: {', '.join(DECODE_METRICS)}; Tensor2Tensor's names "
            f"(metrics.Metrics) map to these."
        )


def trainable_metric_names(names: Iterable[str]) -> list[str]:
    """`names` without the decode-time ones; unknown names raise ValueError."""
    names = list(names)
    for name in names:
        _check_name(name)
    return [name for name in names if name in TRAINABLE_METRICS]


def compute_metrics(
    names: Iterable[str],
    logits: tf.Tensor,
    targets: tf.Tensor,
    weights_fn: WeightsFn | str = weights_nonzero,
    *,
    byte_lengths: Any = None,
) -> dict[str, Pair]:
    """{name: (numerator, denominator)} for each name; decode-time names are skipped.

    weights_fn: a function of targets, or a modality name ("symbol" -> weights_nonzero,
    others -> weights_all).
    byte_lengths: [V] bytes of text per id, for bits_per_byte (skipped when None).
    perplexity's pair is neg_log_perplexity's (see `REPORTED_AS`).
    """
    if isinstance(weights_fn, str):
        weights_fn = weights_fn_for_modality(weights_fn)
    weights = tf.cast(weights_fn(tf.convert_to_tensor(targets)), tf.float32)
    results: dict[str, Pair] = {}
    nll: list[Pair] = []  # neg_log_perplexity's pair, computed once for the LM metrics

    def nll_pair() -> Pair:
        if not nll:
            nll.append(neg_log_perplexity(logits, targets, weights))
        return nll[0]

    for name in trainable_metric_names(names):
        if name in (PERPLEXITY, "neg_log_perplexity"):
            results[name] = nll_pair()
        elif name == BITS_PER_DIM:
            numerator, denominator = nll_pair()
            results[name] = (-numerator / math.log(2.0), denominator)
        elif name == BITS_PER_BYTE:
            if byte_lengths is not None:
                results[name] = _bits_over_bytes(nll_pair(), targets, weights, byte_lengths)
        else:
            results[name] = METRICS[name](logits, targets, weights)
    return results


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
        """{name: numerator / denominator}, or its `REPORTED_AS` function (perplexity:
        exp(-ratio)); NaN where the denominator is 0."""
        results = {}
        for name, (n, d) in self._sums.items():
            ratio = n / d if d else float("nan")
            report = REPORTED_AS.get(name)
            results[name] = report(ratio) if report and d else ratio
        return results

    def reset(self) -> None:
        self._sums.clear()
