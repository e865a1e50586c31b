"""Choosing the next token from logits: greedy, temperature, top-k and nucleus (top-p)."""

from __future__ import annotations

import tensorflow as tf


def filter_logits(logits: tf.Tensor, top_k: int = 0, top_p: float = 1.0) -> tf.Tensor:
    """logits [B, V] with everything outside the top_k / top-p nucleus set to -inf."""
    neg_inf = tf.constant(-1e9, logits.dtype)
    if top_k and top_k > 0:
        k = tf.minimum(top_k, tf.shape(logits)[-1])
        kth = tf.math.top_k(logits, k=k).values[:, -1:]
        logits = tf.where(logits < kth, neg_inf, logits)
    if top_p < 1.0:
        sorted_logits = tf.sort(logits, direction="DESCENDING", axis=-1)
        probs = tf.nn.softmax(sorted_logits, axis=-1)
        cumulative = tf.cumsum(probs, axis=-1, exclusive=True)
        # Keep the smallest prefix whose probability reaches top_p (at least one token).
        keep = cumulative < top_p
        threshold = tf.reduce_min(tf.where(keep, sorted_logits, sorted_logits[:, :1]), axis=-1, keepdims=True)
        logits = tf.where(logits < threshold, neg_inf, logits)
    return logits


def sample(
    logits: tf.Tensor,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
) -> tf.Tensor:
    """int32 ids [B] from logits [B, V]: argmax when temperature is 0, else a sample."""
    if not temperature:
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    logits = filter_logits(tf.cast(logits, tf.float32) / temperature, top_k, top_p)
    return tf.squeeze(tf.random.categorical(logits, 1, dtype=tf.int32, seed=seed), axis=-1)
