"""Greedy decoding and sampling, in-graph (tf.while_loop), driven by a step function.

    logits, state = step_fn(previous_ids [B], index, state)   # see beam_search.py

One loop serves t2t's decoders and the LiteRT export (t2t.serving.tflite_export): the
export keeps a fixed output buffer and stops earlier (`max_steps`), with static loop
shapes (`dynamic_batch=False`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.decoding import beam_search, sampling


def greedy_or_sample(
    step_fn: beam_search.StepFn,
    state: Any,
    batch_size: tf.Tensor | int,
    decode_length: tf.Tensor | int,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: int = 1,
    seed: int | None = None,
    keys: tf.Tensor | None = None,
    *,
    max_steps: tf.Tensor | int | None = None,
    dynamic_batch: bool = True,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Returns (ids int32 [B, L] with zeros after EOS, log-probability float32 [B]).

    temperature 0 takes the argmax; above 0 samples from softmax(logits / temperature)
    restricted to the top_k tokens and to the top_p nucleus, statelessly per row with
    `keys` int64 [B, 2] (sampling.row_keys; an int `seed` stands for (seed, row)).
    Stops when every sequence has produced EOS, or after `max_steps` tokens (an int32
    scalar <= decode_length; default decode_length): ids keep their decode_length
    columns, zeros after the stop. `dynamic_batch` lets the batch axis of the loop
    variables lose its static size (state a step reshapes); False keeps every loop shape
    as traced (a fixed-shape TFLite WHILE).
    """
    if keys is None and seed is not None:
        keys = sampling.row_keys(tf.constant(seed, tf.int64), None, tf.range(batch_size))
    length = tf.cast(decode_length, tf.int32)
    stop = length if max_steps is None else max_steps
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
        return tf.logical_and(i < stop, tf.logical_not(tf.reduce_all(finished)))

    loop_vars = (tf.constant(0), ids, scores, finished, state)
    invariants = beam_search.batch_invariants(loop_vars) if dynamic_batch else None
    _, ids, scores, _, _ = tf.while_loop(not_done, body, loop_vars, shape_invariants=invariants)
    return ids, scores
