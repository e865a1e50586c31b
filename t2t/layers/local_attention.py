"""Masked local self-attention over a raster-ordered grid: the Image Transformer's local
1-D and 2-D attention (Parmar et al., 2018), with cached one-position steps.

A `LocalPattern` says, for a sequence of L = rows x cols positions in raster order, which
positions each query may read. Queries are dealt into blocks; every query of a block
reads the same memory (a fixed set of M positions), of which it sees the ones at or
before itself:
  local_1d  blocks of `block_length` consecutive positions; memory: the block and the
            `memory_blocks` blocks before it (M = (1 + memory_blocks) * block_length);
  local_2d  blocks of query_shape = (qh, qw) rectangles of the grid; memory: the
            rectangle extended by memory_flange = (fh, fw): fh rows above, fw columns
            left and right (M = (qh + fh) * (qw + 2 fw)); positions outside the grid
            are never seen.
Training computes all blocks at once: gathers of queries [nb, Q] and memories [nb, M],
O(L * M) work instead of full attention's O(L^2). A decoding step (one position p)
gathers p's block's M cached keys and values: its cost does not grow with p.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from t2t.hparams import views
from t2t.layers import attention, common

ATTENTION_TYPES = ("local_1d", "local_2d")


@dataclasses.dataclass(frozen=True)
class LocalPattern:
    """Which positions each query reads (numpy tables, built once per shape).

    query_index int32 [nb, Q]: the positions of each block's queries (a partial last
      block repeats a position: its extra rows are computed and dropped);
    memory_index int32 [nb, M]: each block's memory positions (0 where off the grid);
    visible bool [nb, Q, M]: whether that query sees that memory position;
    slot int32 [L]: where position p's query sits in query_index.reshape(-1).
    """

    query_index: np.ndarray
    memory_index: np.ndarray
    visible: np.ndarray
    slot: np.ndarray

    @property
    def length(self) -> int:
        return int(self.slot.shape[0])


def _pattern(length: int, query_blocks: list[np.ndarray], memory_blocks: list[np.ndarray]
             ) -> LocalPattern:
    """A LocalPattern from per-block query positions and memory positions (-1: none)."""
    q_size = max(len(q) for q in query_blocks)
    query = np.stack([np.pad(q, (0, q_size - len(q)), mode="edge") for q in query_blocks])
    memory = np.stack(memory_blocks)
    visible = (memory[:, None, :] >= 0) & (memory[:, None, :] <= query[:, :, None])
    slot = np.full([length], -1, np.int64)
    for flat, position in enumerate(query.reshape(-1)):
        if slot[position] < 0:
            slot[position] = flat
    if (slot < 0).any():
        raise ValueError("a local attention pattern must give every position a query slot.")
    return LocalPattern(query.astype(np.int32), np.maximum(memory, 0).astype(np.int32),
                        visible, slot.astype(np.int32))


def local_1d_pattern(length: int, block_length: int, memory_blocks: int = 1) -> LocalPattern:
    """Blocks of `block_length` positions reading themselves and `memory_blocks` blocks
    before (Tensor2Tensor's masked local 1-D attention, memory_blocks=1)."""
    if block_length < 1 or memory_blocks < 0:
        raise ValueError(f"local_1d needs block_length >= 1 and memory_blocks >= 0, got "
                         f"{block_length} and {memory_blocks}.")
    span = (1 + memory_blocks) * block_length
    queries, memories = [], []
    for start in range(0, length, block_length):
        queries.append(np.arange(start, min(start + block_length, length)))
        memory = np.arange(start - memory_blocks * block_length, start + block_length)
        memories.append(np.where((memory >= 0) & (memory < length), memory, -1)[:span])
    return _pattern(length, queries, memories)


def local_2d_pattern(rows: int, cols: int, query_shape: tuple[int, int],
                     memory_flange: tuple[int, int]) -> LocalPattern:
    """qh x qw query rectangles of a rows x cols raster, each reading itself extended by
    fh rows above and fw columns each side (Tensor2Tensor's masked local 2-D attention)."""
    (qh, qw), (fh, fw) = query_shape, memory_flange
    if min(qh, qw) < 1 or min(fh, fw) < 0:
        raise ValueError(f"local_2d needs query_shape >= (1, 1) and memory_flange >= (0, 0), "
                         f"got {tuple(query_shape)} and {tuple(memory_flange)}.")
    grid = np.arange(rows * cols).reshape(rows, cols)
    queries, memories = [], []
    for top in range(0, rows, qh):
        for left in range(0, cols, qw):
            queries.append(grid[top:top + qh, left:left + qw].reshape(-1))
            r = np.arange(top - fh, top + qh)[:, None]
            c = np.arange(left - fw, left + qw + fw)[None, :]
            inside = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
            memories.append(np.where(inside, r * cols + c, -1).reshape(-1))
    return _pattern(rows * cols, queries, memories)


def pattern_for(hparams: views.LocalAttentionHParams, rows: int, cols: int) -> LocalPattern:
    """The pattern hparams.dec_attention_type names, for a rows x cols raster."""
    kind = hparams.dec_attention_type
    if kind == "local_1d":
        return local_1d_pattern(rows * cols, hparams.block_length)
    if kind == "local_2d":
        return local_2d_pattern(rows, cols, tuple(hparams.query_shape),
                                tuple(hparams.memory_flange))
    raise ValueError(f"dec_attention_type={kind!r}: use one of {ATTENTION_TYPES}.")


class LocalSelfAttention(common.Layer):
    """Multi-head self-attention restricted to a LocalPattern; projections without bias.

    call(x [B, L, H]) -> [B, L, H]; step(x [B, 1, H], index, cache) -> ([B, 1, H], cache)
    with cache {"k", "v": [B, N, L, D]} written at `index`.
    """

    def __init__(self, pattern: LocalPattern, hidden_size: int, num_heads: int,
                 dropout: float = 0.0, kernel_initializer: Any = "glorot_uniform",
                 name: str = "local_attention"):
        super().__init__(name=name)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads "
                             f"{num_heads}.")
        self.pattern, self.num_heads = pattern, num_heads
        self.depth = hidden_size // num_heads
        self.dropout = common.Dropout(dropout)
        dense = dict(use_bias=False, kernel_initializer=kernel_initializer)
        self.q = keras.layers.Dense(hidden_size, name="q", **dense)
        self.k = keras.layers.Dense(hidden_size, name="k", **dense)
        self.v = keras.layers.Dense(hidden_size, name="v", **dense)
        self.output_transform = keras.layers.Dense(hidden_size, name="output_transform", **dense)

    def _heads(self, x: tf.Tensor) -> tf.Tensor:  # [B, T, H] -> [B, N, T, D]
        shape = tf.shape(x)
        return tf.transpose(tf.reshape(x, [shape[0], shape[1], self.num_heads, self.depth]),
                            [0, 2, 1, 3])

    def _merge(self, x: tf.Tensor) -> tf.Tensor:  # [B, N, T, D] -> [B, T, H]
        shape = tf.shape(x)
        x = tf.transpose(x, [0, 2, 1, 3])
        return tf.reshape(x, [shape[0], shape[2], self.num_heads * self.depth])

    def _attend(self, q, k, v, visible, training):
        logits = tf.einsum("...qd,...md->...qm", q, k)
        logits += tf.cast(tf.where(visible, 0.0, attention.NEG_INF), logits.dtype)
        weights = tf.cast(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1), v.dtype)
        return tf.einsum("...qm,...md->...qd", self.dropout(weights, training=training), v)

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        p = self.pattern
        q = self._heads(self.q(x)) * tf.cast(self.depth**-0.5, x.dtype)
        k, v = self._heads(self.k(x)), self._heads(self.v(x))
        blocks = tf.gather(q, p.query_index, axis=2)  # [B, N, nb, Q, D]
        keys = tf.gather(k, p.memory_index, axis=2)  # [B, N, nb, M, D]
        values = tf.gather(v, p.memory_index, axis=2)
        out = self._attend(blocks, keys, values, p.visible, training)
        shape = tf.shape(out)
        out = tf.reshape(out, [shape[0], shape[1], -1, self.depth])  # [B, N, nb * Q, D]
        return self.output_transform(self._merge(tf.gather(out, p.slot, axis=2)))

    def step(self, x: tf.Tensor, index: tf.Tensor, cache: dict) -> tuple[tf.Tensor, dict]:
        """One new position `index` (scalar int32) attending over its block's cached
        memory: O(M) work whatever `index`."""
        p = self.pattern
        q = self._heads(self.q(x)) * tf.cast(self.depth**-0.5, x.dtype)  # [B, N, 1, D]
        k_all = attention.write_position(cache["k"], self._heads(self.k(x)), index)
        v_all = attention.write_position(cache["v"], self._heads(self.v(x)), index)
        slot = tf.gather(p.slot, index)
        block, row = slot // p.query_index.shape[1], slot % p.query_index.shape[1]
        memory = tf.gather(p.memory_index, block)  # [M]
        visible = tf.gather(tf.gather(p.visible, block), row)[None, :]  # [1, M]
        out = self._attend(q, tf.gather(k_all, memory, axis=2), tf.gather(v_all, memory, axis=2),
                           visible, False)
        return self.output_transform(self._merge(out)), {"k": k_all, "v": v_all}
