"""T5's relative position attention bias (Raffel et al., 2020; Mesh TensorFlow's
relative_position_bucket): a learned scalar per head and bucket of the distance between
query and memory positions, added to the attention logits of every self-attention layer
of a stack (hparams.pos "relative_buckets", t2t.models.transformer).

Distances below num_buckets / 2 (half of that when bidirectional) get a bucket each; longer
ones share logarithmically wider buckets up to max_distance, beyond which all share the last.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from t2t.layers import common


def relative_position_buckets(relative_position: tf.Tensor, bidirectional: bool,
                              num_buckets: int = 32, max_distance: int = 128) -> tf.Tensor:
    """int32 buckets in [0, num_buckets) of `relative_position` (memory position minus
    query position, int [...]). Unidirectional (a decoder): positive distances (the
    future) share bucket 0 with distance 0."""
    relative_position = tf.cast(relative_position, tf.int32)
    buckets = tf.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += tf.cast(relative_position > 0, tf.int32) * num_buckets
        distance = tf.abs(relative_position)
    else:
        distance = -tf.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    # float32 as the reference computes it; the cast truncates toward zero as .to(long) does
    scaled = (tf.math.log(tf.cast(tf.maximum(distance, 1), tf.float32) / max_exact)
              / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    large = tf.minimum(max_exact + tf.cast(scaled, tf.int32), num_buckets - 1)
    return buckets + tf.where(distance < max_exact, distance, large)


class RelativePositionBias(common.Layer):
    """[num_buckets, N] learned biases ("embeddings"); call(query_positions [B|1, Tq],
    memory_positions [B|1, Tk]) -> float32 bias [B|1, N, Tq, Tk] to add to the logits."""

    def __init__(self, num_heads: int, bidirectional: bool, num_buckets: int = 32,
                 max_distance: int = 128, name: str = "relative_position_bias"):
        super().__init__(name=name)
        if num_buckets < 2 or max_distance <= num_buckets // (4 if bidirectional else 2):
            raise ValueError(
                f"relative_attention_num_buckets={num_buckets} and "
                f"relative_attention_max_distance={max_distance}: need at least 2 buckets and a "
                f"max_distance above the exact buckets (T5: 32 and 128).")
        self.num_heads, self.bidirectional = num_heads, bidirectional
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.embeddings = self.add_weight(
            name="embeddings", shape=(num_buckets, num_heads),
            initializer=keras.initializers.RandomNormal(0.0, 1.0))

    def call(self, query_positions: tf.Tensor, memory_positions: tf.Tensor) -> tf.Tensor:
        relative = memory_positions[:, None, :] - query_positions[:, :, None]  # [B, Tq, Tk]
        buckets = relative_position_buckets(relative, self.bidirectional, self.num_buckets,
                                            self.max_distance)
        bias = tf.gather(tf.cast(self.embeddings, tf.float32), buckets)  # [B, Tq, Tk, N]
        return tf.transpose(bias, [0, 3, 1, 2])

    def for_length(self, length: tf.Tensor) -> tf.Tensor:
        """[1, N, T, T] bias of positions 0 .. length - 1 attending to each other."""
        positions = tf.range(length)[None]
        return self(positions, positions)
