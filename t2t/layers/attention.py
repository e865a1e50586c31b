"""Multi-head dot-product attention and its additive bias masks.

Shapes: B batch, Tq / Tk query and memory lengths, H hidden size, N heads, D = H / N.
A bias is added to the attention logits: 0 where attending is allowed, a large
negative number where it is not; it broadcasts to [B, N, Tq, Tk].
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t.layers import common

_NEG_INF = -1e9


def padding_bias(nonpadding: tf.Tensor) -> tf.Tensor:
    """[B, 1, 1, Tk] bias hiding memory positions where `nonpadding` [B, Tk] is 0."""
    return (1.0 - tf.cast(nonpadding, tf.float32))[:, None, None, :] * _NEG_INF


def causal_bias(length: int | tf.Tensor) -> tf.Tensor:
    """[1, 1, T, T] bias letting position i attend to positions <= i only."""
    lower = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
    return ((1.0 - lower) * _NEG_INF)[None, None, :, :]


def segment_bias(query_segment: tf.Tensor, memory_segment: tf.Tensor) -> tf.Tensor:
    """[B, 1, Tq, Tk] bias keeping packed examples apart (equal segment ids only)."""
    same = tf.equal(query_segment[:, :, None], memory_segment[:, None, :])
    return (1.0 - tf.cast(same, tf.float32))[:, None, :, :] * _NEG_INF


def embedding_to_nonpadding(embedded: tf.Tensor) -> tf.Tensor:
    """[B, T] float: 1 where an embedded position [B, T, H] is not all zeros (padding)."""
    return tf.cast(tf.reduce_any(tf.not_equal(embedded, 0), axis=-1), tf.float32)


class MultiHeadAttention(common.Layer):
    """Tensor2Tensor's multihead_attention: projections without bias, scaled dot product.

    `call(query [B, Tq, H], memory [B, Tk, H] or None for self-attention, bias)`
    returns [B, Tq, H]. With `cache` (a dict holding "k" and "v" [B, N, L, D] for a
    self-attention layer, filled up to `decode_index`), the query is one new position
    [B, 1, H]: its key and value are written at `decode_index` and attention reads the
    whole buffer, so earlier positions are never recomputed.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        kernel_initializer: Any = "glorot_uniform",
        key_channels: int = 0,
        value_channels: int = 0,
        name: str | None = None,
    ):
        super().__init__(name=name)
        key_channels = key_channels or hidden_size
        value_channels = value_channels or hidden_size
        if key_channels % num_heads or value_channels % num_heads:
            raise ValueError(
                f"Attention channels ({key_channels}, {value_channels}) must be divisible by "
                f"num_heads={num_heads}."
            )
        self.num_heads = num_heads
        self.key_depth = key_channels // num_heads
        self.value_depth = value_channels // num_heads
        dense = lambda units, n: keras.layers.Dense(  # noqa: E731
            units, use_bias=False, kernel_initializer=common.clone_initializer(kernel_initializer),
            name=n
        )
        self.q = dense(key_channels, "q")
        self.k = dense(key_channels, "k")
        self.v = dense(value_channels, "v")
        self.output_transform = dense(hidden_size, "output_transform")
        self.dropout = keras.layers.Dropout(dropout)
        # Keras' __call__ would copy dict arguments (converting their tensors), so the
        # key/value writes into `cache` would be lost; pass arguments through as given.
        self._convert_input_args = False

    def _split_heads(self, x: tf.Tensor, depth: int) -> tf.Tensor:
        shape = tf.shape(x)
        x = tf.reshape(x, [shape[0], shape[1], self.num_heads, depth])
        return tf.transpose(x, [0, 2, 1, 3])

    def project_memory(self, memory: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Keys and values [B, N, Tk, D] of `memory` (computed once per decode)."""
        return self._split_heads(self.k(memory), self.key_depth), self._split_heads(self.v(memory), self.value_depth)

    def call(
        self,
        query: tf.Tensor,
        memory: tf.Tensor | None = None,
        bias: tf.Tensor | None = None,
        training: bool | None = None,
        cache: dict[str, tf.Tensor] | None = None,
        decode_index: tf.Tensor | None = None,
        memory_kv: tuple[tf.Tensor, tf.Tensor] | None = None,
    ) -> tf.Tensor:
        q = self._split_heads(self.q(query), self.key_depth)
        if memory_kv is not None:
            k, v = memory_kv
        else:
            k, v = self.project_memory(query if memory is None else memory)
        if cache is not None:
            # Write this step's key/value at decode_index; the buffer holds the past.
            length = tf.shape(cache["k"])[2]
            at = tf.cast(tf.one_hot(decode_index, length), k.dtype)[None, None, :, None]
            cache["k"] = cache["k"] * (1 - at) + k * at
            cache["v"] = cache["v"] * (1 - at) + v * at
            k, v = cache["k"], cache["v"]
        q *= tf.cast(self.key_depth**-0.5, q.dtype)
        logits = tf.matmul(q, k, transpose_b=True)
        if bias is not None:
            logits += tf.cast(bias, logits.dtype)
        weights = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        weights = self.dropout(tf.cast(weights, v.dtype), training=training)
        out = tf.matmul(weights, v)  # [B, N, Tq, D]
        out = tf.transpose(out, [0, 2, 1, 3])
        shape = tf.shape(out)
        out = tf.reshape(out, [shape[0], shape[1], self.num_heads * self.value_depth])
        return self.output_transform(out)
