"""Self-attention with learned relative position embeddings (Shaw et al., 2018).

As in T2T's `common_attention.dot_product_attention_relative` (self_attention_type
"dot_product_relative"): two tables of 2M + 1 learned vectors of the per-head depth,
one for keys and one for values, shared by all heads (M = max_relative_position).
Query i and key j use the vectors of their clipped distance clip(j - i, -M, M):

    logits[i, j] = q_i . (k_j + a^K[j - i]) / sqrt(D)
    out[i]       = sum_j softmax(logits)[i, j] * (v_j + a^V[j - i])

Shapes: B batch, T length, H hidden size, N heads, D per-head depth.

Incremental (cached) decoding is supported and cheap: a single query at position t
sees key j at distance j - t whatever the beam slot that holds it, so the step adds
the gathered vectors a^K[j - t], a^V[j - t] ([L, D]) to the cached keys and values
and runs ordinary attention over them (also over beam search's slot-major caches).

Differences from Tensor2Tensor:
- one Keras layer (projections + relative attention) instead of a function inside
  `multihead_attention`; the tables live in the layer as "relative_keys" and
  "relative_values" rather than in variable scopes "relative_positions_keys/values".
- T2T's later variants (dot_product_relative_v2, unmasked/masked local relative,
  heads_share_relative_embedding, add_relative_to_values) are not implemented.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.layers import attention, common


def relative_positions_matrix(length_q: int | tf.Tensor, length_k: int | tf.Tensor,
                              max_relative_position: int, query_start: int | tf.Tensor = 0
                              ) -> tf.Tensor:
    """int32 [Tq, Tk] table indices clip(j - i, -M, M) + M for queries at positions
    query_start .. query_start + Tq - 1 and keys at 0 .. Tk - 1 (T2T's
    _generate_relative_positions_matrix)."""
    queries = tf.range(length_q) + tf.cast(query_start, tf.int32)
    distance = tf.range(length_k)[None, :] - queries[:, None]
    return tf.clip_by_value(distance, -max_relative_position, max_relative_position) + max_relative_position


class RelativeMultiHeadAttention(attention.MultiHeadAttention):
    """Multi-head self-attention with relative position keys and values.

    `call(query [B, T, H], bias=None)` -> [B, T, H]; `bias` broadcasts to [B, N, T, T]
    (padding, causal, segment masks), and `causal=True` adds the causal mask itself.
    With `cache` ({"k", "v": [B, N, L, D]}), `decode_index` and a one-position query
    [B, 1, H], it returns (output, updated cache) exactly as MultiHeadAttention does,
    and accepts `beam_ancestry` (slot-major beam caches). Self-attention only:
    `memory` / `memory_kv` are refused.
    """

    def __init__(self, hidden_size: int, num_heads: int, max_relative_position: int,
                 dropout: float = 0.0, kernel_initializer: Any = "glorot_uniform",
                 key_channels: int = 0, value_channels: int = 0, causal: bool = False,
                 name: str | None = None, use_bias: bool = False, scale_queries: bool = True):
        super().__init__(hidden_size, num_heads, dropout=dropout,
                         kernel_initializer=kernel_initializer, key_channels=key_channels,
                         value_channels=value_channels, name=name, use_bias=use_bias,
                         scale_queries=scale_queries)
        if not max_relative_position or max_relative_position < 1:
            raise ValueError(
                f"max_relative_position must be > 0 for relative self-attention, got "
                f"{max_relative_position!r}."
            )
        self.max_relative_position = int(max_relative_position)
        self.causal = causal
        self._table_initializer = kernel_initializer

    def build(self, *args: Any, **kwargs: Any) -> None:
        vocab = 2 * self.max_relative_position + 1
        init = self._table_initializer
        self.relative_keys = self.add_weight(
            name="relative_keys", shape=(vocab, self.key_depth),
            initializer=common.clone_initializer(init))
        self.relative_values = self.add_weight(
            name="relative_values", shape=(vocab, self.value_depth),
            initializer=common.clone_initializer(init))
        super().build(*args, **kwargs)

    def relative_embeddings(self, indices: tf.Tensor, dtype: tf.DType) -> tuple[tf.Tensor, tf.Tensor]:
        """(a^K, a^V) gathered at `indices` (any int shape S): [*S, Dk], [*S, Dv]."""
        keys = tf.gather(tf.cast(self.relative_keys, dtype), indices)
        values = tf.gather(tf.cast(self.relative_values, dtype), indices)
        return keys, values

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
    ) -> tf.Tensor | tuple[tf.Tensor, dict[str, tf.Tensor]]:
        if memory is not None or memory_kv is not None:
            raise ValueError("RelativeMultiHeadAttention is self-attention only (no memory).")
        q = self._split_heads(self.q(query), self.key_depth)
        if self.scale_queries:
            q *= tf.cast(self.key_depth**-0.5, q.dtype)
        k, v = self.project_memory(query)
        if bias is not None and bias.shape.rank == 4 and bias.shape[0] == 1:
            bias = bias[0]  # rank 3 broadcasts faster with oneDNN (see MultiHeadAttention)
        if cache is None:
            out = self._attend_full(q, k, v, bias, training)
        else:
            k = attention.write_position(cache["k"], k, decode_index)
            v = attention.write_position(cache["v"], v, decode_index)
            cache = {**cache, "k": k, "v": v}
            out = self._attend_one(q, k, v, bias, decode_index, beam_ancestry)
        out = tf.transpose(out, [0, 2, 1, 3])
        shape = tf.shape(out)
        out = tf.reshape(out, [shape[0], shape[1], self.num_heads * self.value_depth])
        out = self.output_transform(out)
        return out if cache is None else (out, cache)

    def _attend_full(self, q, k, v, bias, training):
        """q [B, N, T, Dk], k, v [B, N, T, D] -> [B, N, T, Dv] (T2T's _relative_attention_inner)."""
        length = tf.shape(q)[2]
        indices = relative_positions_matrix(length, length, self.max_relative_position)
        rel_k, rel_v = self.relative_embeddings(indices, q.dtype)  # [T, T, D]
        logits = tf.matmul(q, k, transpose_b=True) + tf.einsum("bhxd,xyd->bhxy", q, rel_k)
        if bias is not None:
            logits += tf.cast(bias, logits.dtype)
        if self.causal:
            logits += tf.cast(attention.causal_bias(length)[0], logits.dtype)
        weights = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        weights = self.dropout(tf.cast(weights, v.dtype), training=training)
        return tf.matmul(weights, v) + tf.einsum("bhxy,xyd->bhxd", weights, rel_v)

    def _attend_one(self, q, k, v, bias, index, beam_ancestry):
        """One query at `index` over L cached positions: [B, N, 1, Dv].

        Its relative vectors depend on the key position only, so they are added to
        every cached key and value (every beam slot alike) before plain attention."""
        length = tf.shape(k)[2]
        indices = relative_positions_matrix(1, length, self.max_relative_position, index)[0]
        rel_k, rel_v = self.relative_embeddings(indices, k.dtype)  # [L, D]
        k, v = k + rel_k, v + rel_v
        if self.causal:
            visible = attention.visible_bias(length, index)[0]
            bias = visible if bias is None else bias + visible
        if beam_ancestry is not None:
            return attention.attend_over_beam_slots(q, k, v, bias, beam_ancestry)
        logits = tf.matmul(q, k, transpose_b=True)
        if bias is not None:
            logits += tf.cast(bias, logits.dtype)
        weights = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        return tf.matmul(tf.cast(weights, v.dtype), v)
