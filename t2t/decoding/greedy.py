"""Greedy decoding and sampling, in-graph (tf.while_loop), driven by a step function.

    logits, state = step_fn(previous_ids [B], index, state)   # see beam_search.py
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import beam_search, sampling


def greedy_or_sample(
    step_fn: beam_search.StepFn,
    state: Any,
    batch_size: tf.Tensor,
    decode_length: tf.Tensor | int,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: int = 1,
    seed: int | None = None,
    keys: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Returns (ids int32 [B, L] with zeros after EOS, log-probability float32 [B]).

    temperature 0 takes the argmax; above 0 samples from softmax(logits / temperature)
    restricted to the top_k tokens and to the top_p nucleus, statelessly per row with
    `keys` int64 [B, 2] (sampling.row_keys; an int `seed` stands for (seed, row)).
    Stops when every sequence has produced EOS.
    """
    if keys is None and seed is not None:
        keys = sampling.row_keys(tf.constant(seed, tf.int64), None, tf.range(batch_size))
    length = tf.cast(decode_length, tf.int32)
    ids = tf.zeros([batch_size, length], tf.int32)
    scores = tf.zeros([batch_size], tf.float32)
    finished = tf.zeros([batch_size], tf.bool)
    positions = tf.range(length)

    def body(i, ids, scores, finished, state):
        previous = tf.where(i > 0, tf.gather(ids, tf.maximum(i - 1, 0), axis=1), 0)
        logits, state = step_fn(previous, i, state)
        logits = tf.cast(logits, tf.float32)
        chosen = sampling.sample(logits, temperature, top_k, top_p, keys=keys, step=i)
        picked = tf.gather(tf.nn.log_softmax(logits), chosen, batch_dims=1)
        chosen = tf.where(finished, tf.zeros_like(chosen), chosen)
        scores += tf.where(finished, 0.0, picked)
        at_i = tf.cast(tf.equal(positions, i), tf.int32)[None, :]
        ids = ids * (1 - at_i) + chosen[:, None] * at_i
        return i + 1, ids, scores, finished | tf.equal(chosen, eos_id), state

    def not_done(i, ids, scores, finished, state):
        return tf.logical_and(i < length, tf.logical_not(tf.reduce_all(finished)))

    loop_vars = (tf.constant(0), ids, scores, finished, state)
    _, ids, scores, _, _ = tf.while_loop(
        not_done, body, loop_vars, shape_invariants=beam_search.batch_invariants(loop_vars)
    )
    return ids, scores
