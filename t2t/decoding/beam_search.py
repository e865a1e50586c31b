"""Batched beam search with Tensor2Tensor's length penalty, in-graph (tf.while_loop).

The model is driven through a step function:

    logits, state = step_fn(previous_ids [N], index, state)

N = batch * beam; `previous_ids` are the tokens chosen at position index - 1 (ignored
at index 0); `state` is a nest of tensors whose first axis is N (caches, encoder
outputs). Beams are reordered by gathering every state tensor along that axis.
Scores are log-probabilities divided by the length penalty ((5 + length) / 6) ** alpha.

Slot-major state: gathering a [N, ..., L, ...] key/value cache at every step copies
O(L) memory per token. A state dict may instead hold such caches under `SLOTS` (see
t2t.models.step_interface): beam search never reorders them, and keeps
`state[ANCESTRY]`, the slot that holds each position of each hypothesis.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t.models.step_interface import ANCESTRY, SLOTS, StepFn

__all__ = ["ANCESTRY", "NEG_INF", "SLOTS", "StepFn", "batch_invariants", "beam_search",
           "length_penalty", "tile_beams"]

NEG_INF = -1.0e7


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


# Which candidates beam search keeps finished (DecodeHParams.beam_search_rule).
RULES = ("t2t", "transformers")


class _Beams:
    """The loop's arithmetic for one batch: B examples, k beams, vocabulary V."""

    def __init__(self, batch_size: tf.Tensor, k: int, length: tf.Tensor, vocab_size: int,
                 alpha: float, eos_id: int, rule: str = "t2t"):
        if rule not in RULES:
            raise ValueError(f"Unknown beam_search_rule {rule!r}: use one of {RULES}.")
        self.batch_size, self.k, self.length, self.rule = batch_size, k, length, rule
        self.vocab_size, self.alpha, self.eos_id = vocab_size, alpha, eos_id
        self.positions = tf.range(length)

    def candidates(self, i: tf.Tensor, alive_seq: tf.Tensor, alive_log_probs: tf.Tensor,
                   logits: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """The 2k best extensions of the alive beams: (sequences [B, 2k, L], scores
        (penalized) [B, 2k], log-probabilities [B, 2k], their beams [B, 2k], ended [B, 2k])."""
        b, k, v = self.batch_size, self.k, self.vocab_size
        log_probs = tf.reshape(tf.nn.log_softmax(tf.cast(logits, tf.float32)), [b, k, v])
        candidates = alive_log_probs[:, :, None] + log_probs
        penalty = length_penalty(i + 1, self.alpha)
        flat_scores = tf.reshape(candidates / penalty, [b, k * v])
        top_scores, top_ids = tf.math.top_k(flat_scores, k=2 * k)
        top_beam, top_token = top_ids // v, top_ids % v
        top_seq = tf.gather(alive_seq, top_beam, batch_dims=1)
        at_i = tf.cast(tf.equal(self.positions, i), tf.int32)[None, None, :]
        top_seq = top_seq * (1 - at_i) + top_token[:, :, None] * at_i
        return (top_seq, top_scores, top_scores * penalty, top_beam,
                tf.equal(top_token, self.eos_id))

    def keep_finished(self, finished: tuple[tf.Tensor, tf.Tensor, tf.Tensor],
                      top_seq: tf.Tensor, top_scores: tf.Tensor, top_finished: tf.Tensor,
                      i: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The k best of the finished hypotheses and the candidates that just ended (rule
        "transformers": those among the k best candidates, and at the last position
        i = length - 1 the k best whether they ended or were cut)."""
        finished_seq, finished_scores, finished_flags = finished
        if self.rule == "transformers":
            in_top = tf.range(2 * self.k)[None, :] < self.k
            top_finished = tf.logical_and(in_top, tf.logical_or(
                top_finished, tf.equal(i, self.length - 1)))
        just_finished = tf.where(top_finished, top_scores, NEG_INF)
        all_seq = tf.concat([finished_seq, top_seq], axis=1)
        all_scores = tf.concat([finished_scores, just_finished], axis=1)
        all_flags = tf.concat([finished_flags, top_finished], axis=1)
        best_scores, best = tf.math.top_k(all_scores, k=self.k)
        return (tf.gather(all_seq, best, batch_dims=1), best_scores,
                tf.gather(all_flags, best, batch_dims=1))

    def bound_met(self, alive_log_probs: tf.Tensor, finished_scores: tf.Tensor,
                  finished_flags: tf.Tensor) -> tf.Tensor:
        """Whether no alive beam can beat the worst finished one (the penalty only grows
        with length, so an alive beam's best final score is known)."""
        best_alive = alive_log_probs[:, 0] / length_penalty(self.length, self.alpha)
        worst_finished = tf.reduce_min(
            tf.where(finished_flags, finished_scores, tf.zeros_like(finished_scores)), axis=1
        )
        worst_finished = tf.where(tf.reduce_any(finished_flags, axis=1), worst_finished, NEG_INF)
        return tf.reduce_all(worst_finished > best_alive)


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
    rule: str = "t2t",
) -> tuple[tf.Tensor, tf.Tensor]:
    """Returns (ids int32 [B, top_beams, L], scores float32 [B, top_beams]), best first.

    `state` must already be tiled to B * beam_size (see `tile_beams`). A hypothesis ends
    at EOS (which it includes); ids after it are 0. Stops early once no alive beam can
    beat the worst finished one. `rule` (RULES) chooses which candidates count as
    finished: Tensor2Tensor's or Hugging Face transformers' (see _Beams.keep_finished).
    """
    k = beam_size
    length = tf.cast(decode_length, tf.int32)
    beams = _Beams(batch_size, k, length, vocab_size, alpha, eos_id, rule)
    alive_seq = tf.zeros([batch_size, k, length], tf.int32)
    alive_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch_size, 1])
    finished_seq = tf.zeros([batch_size, k, length], tf.int32)
    finished_scores = tf.fill([batch_size, k], NEG_INF)
    finished_flags = tf.zeros([batch_size, k], tf.bool)
    slotted = isinstance(state, dict) and SLOTS in state
    if slotted:
        own_slot = tf.one_hot(tf.tile(tf.range(k), [batch_size]), k)[:, None, :]  # [N, 1, K]
        state = {**state, ANCESTRY: tf.zeros([batch_size * k, length, k])}

    def body(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, state):
        previous = tf.where(i > 0, tf.gather(alive_seq, tf.maximum(i - 1, 0), axis=2), 0)
        if slotted:  # each beam writes position i into its own slot
            at_i = tf.equal(beams.positions, i)[None, :, None]
            state = {**state, ANCESTRY: tf.where(at_i, own_slot, state[ANCESTRY])}
        logits, state = step_fn(tf.reshape(previous, [-1]), i, state)
        top_seq, top_scores, top_log_probs, top_beam, top_finished = beams.candidates(
            i, alive_seq, alive_log_probs, logits)
        # The k best of the 2k candidates that did not just end continue.
        alive_scores = tf.where(top_finished, NEG_INF, top_log_probs)
        _, keep = tf.math.top_k(alive_scores, k=k)
        new_alive_seq = tf.gather(top_seq, keep, batch_dims=1)
        new_alive_log_probs = tf.gather(alive_scores, keep, batch_dims=1)
        state = _gather_beams(state, tf.gather(top_beam, keep, batch_dims=1), batch_size, k)
        finished = beams.keep_finished((finished_seq, finished_scores, finished_flags),
                                       top_seq, top_scores, top_finished, i)
        return (i + 1, new_alive_seq, new_alive_log_probs, *finished, state)

    def not_done(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, state):
        return tf.logical_and(i < length, tf.logical_not(
            beams.bound_met(alive_log_probs, finished_scores, finished_flags)))

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
