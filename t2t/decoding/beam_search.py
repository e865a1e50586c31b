"""Batched beam search with Tensor2Tensor's length penalty, in-graph (tf.while_loop).

The model is driven through a step function:

    logits, state = step_fn(previous_ids [N], index, state)

N = batch * beam; `previous_ids` are the tokens chosen at position index - 1 (ignored
at index 0); `state` is a nest of tensors whose first axis is N (caches, encoder
outputs). Beams are reordered by gathering every state tensor along that axis.
Scores are log-probabilities divided by the length penalty ((5 + length) / 6) ** alpha.

Slot-major state: gathering a [N, ..., L, ...] key/value cache at every step copies
O(L) memory per token. A state dict may instead hold such caches under `SLOTS`: beam
search never reorders them. Beam slot j of an example writes position i of its cache
at step i, and beam search keeps `state[ANCESTRY]`, float32 one-hot [N, L, beam]: for
each current beam and past position, the slot whose cache holds it (the beam's own
slot at the current index). The step function attends through it (see
`attention.MultiHeadAttention`), so a reorder moves only [N, L, beam] floats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

NEG_INF = -1.0e7

StepFn = Callable[[tf.Tensor, tf.Tensor, Any], tuple[tf.Tensor, Any]]

SLOTS = "beam_slots"
ANCESTRY = "beam_ancestry"


def length_penalty(length: tf.Tensor | int, alpha: float) -> tf.Tensor:
    """((5 + length) / 6) ** alpha (Wu et al., 2016), as Tensor2Tensor."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def tile_beams(tensor: tf.Tensor, beam_size: int) -> tf.Tensor:
    """[B, ...] -> [B * beam, ...], each example repeated beam_size times."""
    tensor = tf.convert_to_tensor(tensor)
    tiled = tf.repeat(tensor[:, None], beam_size, axis=1)
    return tf.reshape(tiled, tf.concat([[-1], tf.shape(tensor)[1:]], axis=0))


def batch_invariants(loop_vars: Any) -> Any:
    """Loop shape invariants that let only the first (batch) axis lose its static size."""
    return tf.nest.map_structure(
        lambda t: tf.TensorShape([None] + t.shape.as_list()[1:]) if t.shape.rank else t.shape,
        loop_vars,
    )


def _gather_beams(nest: Any, indices: tf.Tensor, batch_size: tf.Tensor, beam_size: int) -> Any:
    """Gathers [B * K, ...] (or [B, K, ...]) tensors by beam indices [B, M]; a dict's
    `SLOTS` entry stays as it is."""
    flat_indices = tf.reshape(indices + tf.range(batch_size)[:, None] * beam_size, [-1])

    def gather(t):
        return tf.gather(t, flat_indices)

    if isinstance(nest, dict) and SLOTS in nest:
        rest = {key: value for key, value in nest.items() if key != SLOTS}
        return {**tf.nest.map_structure(gather, rest), SLOTS: nest[SLOTS]}
    return tf.nest.map_structure(gather, nest)


def beam_search(
    step_fn: StepFn,
    state: Any,
    batch_size: tf.Tensor,
    beam_size: int,
    decode_length: tf.Tensor | int,
    vocab_size: int,
    alpha: float = 0.6,
    eos_id: int = 1,
    top_beams: int = 1,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Returns (ids int32 [B, top_beams, L], scores float32 [B, top_beams]), best first.

    `state` must already be tiled to B * beam_size (see `tile_beams`). A hypothesis ends
    at EOS (which it includes); ids after it are 0. Stops early once no alive beam can
    beat the worst finished one.
    """
    k = beam_size
    length = tf.cast(decode_length, tf.int32)
    alive_seq = tf.zeros([batch_size, k, length], tf.int32)
    alive_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch_size, 1])
    finished_seq = tf.zeros([batch_size, k, length], tf.int32)
    finished_scores = tf.fill([batch_size, k], NEG_INF)
    finished_flags = tf.zeros([batch_size, k], tf.bool)
    positions = tf.range(length)
    slotted = isinstance(state, dict) and SLOTS in state
    if slotted:
        own_slot = tf.one_hot(tf.tile(tf.range(k), [batch_size]), k)[:, None, :]  # [N, 1, K]
        state = {**state, ANCESTRY: tf.zeros([batch_size * k, length, k])}

    def body(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, state):
        previous = tf.where(i > 0, tf.gather(alive_seq, tf.maximum(i - 1, 0), axis=2), 0)
        if slotted:  # each beam writes position i into its own slot
            at_i = tf.equal(positions, i)[None, :, None]
            state = {**state, ANCESTRY: tf.where(at_i, own_slot, state[ANCESTRY])}
        logits, state = step_fn(tf.reshape(previous, [-1]), i, state)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
        log_probs = tf.reshape(log_probs, [batch_size, k, vocab_size])
        candidates = alive_log_probs[:, :, None] + log_probs
        penalty = length_penalty(i + 1, alpha)
        flat_scores = tf.reshape(candidates / penalty, [batch_size, k * vocab_size])
        top_scores, top_ids = tf.math.top_k(flat_scores, k=2 * k)
        top_beam = top_ids // vocab_size
        top_token = top_ids % vocab_size
        top_log_probs = top_scores * penalty
        top_seq = tf.gather(alive_seq, top_beam, batch_dims=1)
        at_i = tf.cast(tf.equal(positions, i), tf.int32)[None, None, :]
        top_seq = top_seq * (1 - at_i) + top_token[:, :, None] * at_i
        top_finished = tf.equal(top_token, eos_id)

        # The k best of the 2k candidates that did not just end continue.
        alive_scores = tf.where(top_finished, NEG_INF, top_log_probs)
        _, keep = tf.math.top_k(alive_scores, k=k)
        new_alive_seq = tf.gather(top_seq, keep, batch_dims=1)
        new_alive_log_probs = tf.gather(alive_scores, keep, batch_dims=1)
        state = _gather_beams(state, tf.gather(top_beam, keep, batch_dims=1), batch_size, k)

        # Finished: the k best of the old finished and the candidates that just ended.
        just_finished = tf.where(top_finished, top_scores, NEG_INF)
        all_seq = tf.concat([finished_seq, top_seq], axis=1)
        all_scores = tf.concat([finished_scores, just_finished], axis=1)
        all_flags = tf.concat([finished_flags, top_finished], axis=1)
        best_scores, best = tf.math.top_k(all_scores, k=k)
        finished_seq = tf.gather(all_seq, best, batch_dims=1)
        finished_flags = tf.gather(all_flags, best, batch_dims=1)
        return (i + 1, new_alive_seq, new_alive_log_probs, finished_seq, best_scores,
                finished_flags, state)

    def not_done(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, state):
        # Best possible final score of an alive beam (the penalty only grows with length).
        best_alive = alive_log_probs[:, 0] / length_penalty(length, alpha)
        worst_finished = tf.reduce_min(
            tf.where(finished_flags, finished_scores, tf.zeros_like(finished_scores)), axis=1
        )
        worst_finished = tf.where(tf.reduce_any(finished_flags, axis=1), worst_finished, NEG_INF)
        bound_met = tf.reduce_all(worst_finished > best_alive)
        return tf.logical_and(i < length, tf.logical_not(bound_met))

    loop_vars = (tf.constant(0), alive_seq, alive_log_probs, finished_seq, finished_scores,
                 finished_flags, state)
    _, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, _ = tf.while_loop(
        not_done, body, loop_vars, shape_invariants=batch_invariants(loop_vars)
    )
    # An example with no finished hypothesis returns its alive beams.
    any_finished = tf.reduce_any(finished_flags, axis=1)
    seq = tf.where(any_finished[:, None, None], finished_seq, alive_seq)
    scores = tf.where(any_finished[:, None], finished_scores,
                      alive_log_probs / length_penalty(length, alpha))
    return seq[:, :top_beams], scores[:, :top_beams]
