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

NEG_INF = -1e9  # the bias that hides a position


def padding_bias(nonpadding: tf.Tensor) -> tf.Tensor:
    """[B, 1, 1, Tk] bias hiding memory positions where `nonpadding` [B, Tk] is 0."""
    return (1.0 - tf.cast(nonpadding, tf.float32))[:, None, None, :] * NEG_INF


def visible_bias(length: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """[1, 1, 1, L] bias letting one query at position `index` attend to positions <= index
    of an L-long cache (incremental decoding)."""
    return tf.where(tf.range(length) <= index, 0.0, NEG_INF)[None, None, None, :]


def causal_bias(length: int | tf.Tensor) -> tf.Tensor:
    """[1, 1, T, T] bias letting position i attend to positions <= i only."""
    lower = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
    return ((1.0 - lower) * NEG_INF)[None, None, :, :]


def segment_bias(query_segment: tf.Tensor, memory_segment: tf.Tensor) -> tf.Tensor:
    """[B, 1, Tq, Tk] bias keeping packed examples apart (equal segment ids only)."""
    same = tf.equal(query_segment[:, :, None], memory_segment[:, None, :])
    return (1.0 - tf.cast(same, tf.float32))[:, None, :, :] * NEG_INF


def embedding_to_nonpadding(embedded: tf.Tensor) -> tf.Tensor:
    """[B, T] float: 1 where an embedded position [B, T, H] is not all zeros (padding)."""
    return tf.cast(tf.reduce_any(tf.not_equal(embedded, 0), axis=-1), tf.float32)


def empty_cache(shape: Any, dtype: tf.DType) -> tf.Tensor:
    """A zero-filled key/value buffer [B, N, L, D] that `write_position` may update in place.

    `tf.raw_ops.Empty` is a stateful op: every run allocates a new buffer, whereas a
    `tf.zeros` of a static shape may be folded into a constant shared by every call.
    """
    return tf.raw_ops.Empty(shape=tf.cast(shape, tf.int32), dtype=dtype, init=True)


def write_position(buffer: tf.Tensor, value: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """`buffer` [B, N, L, D] with position `index` set to `value` [B, N, 1, D], in place.

    O(B * N * D) work whatever L: a functional update (one-hot blend or scatter) copies
    the whole buffer at every decoding step, which made each cached token cost O(L).
    `InplaceUpdate` writes rows of its input's own memory, so the buffer must be one only
    this decode owns (from `empty_cache`, or a gather of one) and no earlier reader may
    still be pending: each decoding step's write depends, through the previous token, on
    every read of the step before.
    """
    shape = tf.shape(buffer)
    rows = tf.reshape(buffer, [-1, shape[3]])  # [B * N * L, D]; a reshape shares memory
    row_ids = tf.range(shape[0] * shape[1]) * shape[2] + tf.cast(index, tf.int32)
    updated = tf.raw_ops.InplaceUpdate(x=rows, i=row_ids, v=tf.reshape(value, [-1, shape[3]]))
    return tf.reshape(updated, shape)


def attend_over_beam_slots(
    q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor | None, ancestry: tf.Tensor
) -> tf.Tensor:
    """One query per hypothesis over slot-major caches: [B*K, N, 1, Dv].

    q [B*K, N, 1, Dk] (scaled); k, v [B*K, N, L, D] where row b*K + s is beam slot s of
    example b; ancestry float one-hot [B*K, L, K]: the slot holding each position of
    each hypothesis. Every query is scored against all K slots of its example (one
    read of the cache, as plain attention, with K rows per matmul instead of 1), then
    each position keeps the score of its own slot. No cache is copied, so a step costs
    the same whatever the hypotheses' histories, unlike reordering the caches.
    """
    beams = ancestry.shape[-1]
    shape = tf.shape(k)
    batch, heads, length = shape[0] // beams, shape[1], shape[2]
    q = tf.reshape(q, [batch, beams, heads, tf.shape(q)[3]])
    q = tf.transpose(q, [0, 2, 1, 3])[:, None]  # [B, 1, N, J (hypotheses), Dk]
    keys = tf.reshape(k, [batch, beams, heads, length, shape[3]])  # [B, S (slots), N, L, Dk]
    logits = tf.matmul(q, keys, transpose_b=True)  # [B, S, N, J, L]
    select = tf.reshape(tf.cast(ancestry, logits.dtype), [batch, beams, length, beams])
    select = tf.transpose(select, [0, 3, 1, 2])[:, :, None]  # [B, S, 1, J, L]
    logits = tf.reduce_sum(logits * select, axis=1)  # [B, N, J, L]
    if bias is not None:
        logits += tf.cast(bias, logits.dtype)
    weights = tf.cast(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1), v.dtype)
    values = tf.reshape(v, [batch, beams, heads, length, tf.shape(v)[3]])
    out = tf.reduce_sum(tf.matmul(weights[:, None] * select, values), axis=1)  # [B, N, J, Dv]
    out = tf.transpose(out, [0, 2, 1, 3])  # [B, J, N, Dv]
    return tf.reshape(out, [batch * beams, heads, 1, tf.shape(v)[3]])


class MultiHeadAttention(common.Layer):
    """Tensor2Tensor's multihead_attention: projections without bias, scaled dot product
    (`use_bias`: q/k/v/output projections with biases, as Marian's; `scale_queries`
    False: unscaled, as T5, whose initialization takes the scale instead).

    `call(query [B, Tq, H], memory [B, Tk, H] or None for self-attention, bias)`
    returns [B, Tq, H]. With `cache` (a dict holding "k" and "v" [B, N, L, D] for a
    self-attention layer, filled up to `decode_index`), the query is one new position
    [B, 1, H]: its key and value are written at `decode_index`, attention reads the
    whole buffer, so earlier positions are never recomputed, and the call returns
    (output, the cache with the new "k" and "v"). With `beam_ancestry`
    (beam search's slot-major cache, see `decoding.beam_search`), row b of the cache is
    a beam slot, not a hypothesis: position t of hypothesis b is read from the slot
    that `beam_ancestry[b, t]` (one-hot [B, L, beam]) names.
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
        use_bias: bool = False,
        scale_queries: bool = True,
    ):
        super().__init__(name=name)
        self.scale_queries = scale_queries
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
            units, use_bias=use_bias, kernel_initializer=common.clone_initializer(kernel_initializer),
            name=n
        )
        self.q = dense(key_channels, "q")
        self.k = dense(key_channels, "k")
        self.v = dense(value_channels, "v")
        self.output_transform = dense(hidden_size, "output_transform")
        self.dropout = common.Dropout(dropout)

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
        beam_ancestry: tf.Tensor | None = None,
        return_weights: bool = False,
    ) -> tf.Tensor | tuple[tf.Tensor, Any]:
        """`return_weights` (no cache, no beam slots): (output, softmax weights
        float32 [B, N, Tq, Tk] before dropout), e.g. for attention heat maps."""
        if return_weights and (cache is not None or beam_ancestry is not None):
            raise ValueError("return_weights reads the attention of a whole sequence: not "
                             "with an incremental-decoding cache or beam slots.")
        q = self._split_heads(self.q(query), self.key_depth)
        if self.scale_queries:
            q *= tf.cast(self.key_depth**-0.5, q.dtype)
        if memory_kv is not None:
            k, v = memory_kv
        else:
            k, v = self.project_memory(query if memory is None else memory)
        if cache is not None:
            # Write this step's key/value at decode_index; the buffer holds the past.
            k = write_position(cache["k"], k, decode_index)
            v = write_position(cache["v"], v, decode_index)
            cache = {**cache, "k": k, "v": v}
        if bias is not None and bias.shape.rank == 4 and bias.shape[0] == 1:
            # Same broadcast, rank 3: with oneDNN (TensorFlow's default on x86) adding a
            # [1, 1, Tq, Tk] bias to the [B, N, Tq, Tk] logits was ~100x slower than the
            # matmul itself (145 ms vs 1.5 ms at B=8, N=4, T=128); [1, Tq, Tk] is not.
            bias = bias[0]
        if beam_ancestry is not None:
            out = attend_over_beam_slots(q, k, v, bias, beam_ancestry)
        else:
            logits = tf.matmul(q, k, transpose_b=True)
            if bias is not None:
                logits += tf.cast(bias, logits.dtype)
            probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
            weights = self.dropout(tf.cast(probabilities, v.dtype), training=training)
            out = tf.matmul(weights, v)  # [B, N, Tq, D]
        out = tf.transpose(out, [0, 2, 1, 3])
        shape = tf.shape(out)
        out = tf.reshape(out, [shape[0], shape[1], self.num_heads * self.value_depth])
        out = self.output_transform(out)
        if return_weights:
            return out, probabilities
        return out if cache is None else (out, cache)
