"""The vocabulary-sized end of a model: logits and the label-smoothed cross entropy,
with hand-written gradients.

At real vocabularies (8k-32k pieces) these are a large share of a training step, and
TensorFlow's defaults are slow on CPU (measured with `python -m benchmarks.profile_step`,
[2048 positions, 32768] float32 on 2 cores):
- the fused SoftmaxCrossEntropyWithLogits (with its one-hot labels) takes 341-362 ms for
  the loss and its gradient (one thread); the same values here take 147-163 ms:
  log-sum-exp and one gathered logit forward, oneDNN's softmax minus the one-hot target
  backward.
- the logits are one 2-D matmul (an einsum "...h,vh->...v" had a gradient that built a
  [V, H, B, T] tensor).
"""

from __future__ import annotations

import math

import tensorflow as tf


def logits_matmul(x: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """x [..., H] @ weights [V, H]^T -> [..., V] (weights cast to x's dtype first), as one
    2-D matmul. Its gradients are TensorFlow's own: a hand-written gradient with other
    operand layouts measured a few percent faster in training, but its custom-gradient
    op left the exported SavedModel without a signature the TFLite converter accepts."""
    weights = tf.cast(weights, x.dtype)
    out = tf.matmul(tf.reshape(x, [-1, tf.shape(x)[-1]]), weights, transpose_b=True)
    out = tf.reshape(out, tf.concat([tf.shape(x)[:-1], tf.shape(weights)[:1]], 0))
    out.set_shape(x.shape[:-1].concatenate(weights.shape[:1]))
    return out


def smoothed_cross_entropy(logits: tf.Tensor, labels: tf.Tensor, vocab_size: int,
                           label_smoothing: float) -> tf.Tensor:
    """Per-position cross entropy [...] (float32, nats) of logits [..., V] against int
    labels [...] in [0, V).

    With label smoothing the target puts 1-eps on the label and eps/(V-1) elsewhere;
    the constant entropy of that distribution is subtracted (as Tensor2Tensor does), so
    a perfect model scores 0. The gradient is softmax(logits) - target, as the fused op's.
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(labels, tf.int32)
    confidence = 1.0 - label_smoothing
    low = label_smoothing / float(vocab_size - 1) if label_smoothing else 0.0
    normalizing = 0.0
    if label_smoothing:
        normalizing = -(confidence * math.log(confidence)
                        + (vocab_size - 1) * low * math.log(low + 1e-20))

    @tf.custom_gradient
    def xent(flat_logits: tf.Tensor, flat_labels: tf.Tensor) -> tuple[tf.Tensor, object]:
        # -sum_v target_v log p_v = lse - (c - low) * logit_label - low * sum_v logit_v,
        # since the target sums to 1: c + (V - 1) * low = 1.
        lse = tf.reduce_logsumexp(flat_logits, axis=-1)
        picked = tf.gather(flat_logits, flat_labels[:, None], batch_dims=1)[:, 0]
        value = lse - (confidence - low) * picked
        if low:
            value -= low * tf.reduce_sum(flat_logits, axis=-1)

        def grad(g: tf.Tensor) -> tuple[tf.Tensor, None]:
            # A one-hot target, not a scatter into the softmax: as fast here (154 vs
            # 147 ms), and DTensor has no layout propagation for TensorScatterSub.
            target = tf.one_hot(flat_labels, tf.shape(flat_logits)[-1], on_value=confidence,
                                off_value=low)
            return (tf.nn.softmax(flat_logits) - target) * g[:, None], None

        return value, grad

    flat = xent(tf.reshape(logits, [-1, tf.shape(logits)[-1]]), tf.reshape(labels, [-1]))
    out = tf.reshape(flat, tf.shape(labels))
    out.set_shape(labels.shape)
    return out - normalizing
