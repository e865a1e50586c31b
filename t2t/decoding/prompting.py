"""Decoding after a prompt: the prompt's tokens are forced through the step loop.

A language model continues a prompt (a seq2seq model may continue a target prefix the
same way). Row r of a batch has prompt[r, :n_r] (0-padded on the right); for steps
i < n_r the wrapped step function's logits are replaced by a one-hot of prompt[r, i]
(log-probability 0, so scores are those of the continuation alone), which feeds the
prompt through the model's own (cached) step, token by token, without a separate
prefill graph. From step n_r + max_new_tokens on, EOS is forced: every row gets at
most max_new_tokens new tokens however long the other rows' prompts are.
`continuation` then left-aligns what came after each prompt. `exact_length_step`
(force_decode_length) keeps EOS out until a row's end and forces it there.
"""

from __future__ import annotations

import tensorflow as tf

from t2t.decoding.sampling import NEG_INF
from t2t.models.step_interface import StepFn


def prompt_lengths(prompt: tf.Tensor) -> tf.Tensor:
    """int32 [N]: tokens in each row of a 0-padded prompt [N, P]."""
    return tf.reduce_sum(tf.cast(tf.not_equal(prompt, 0), tf.int32), axis=1)


def forced_step(step_fn: StepFn, prompt: tf.Tensor, max_new_tokens: tf.Tensor, eos_id: int
                ) -> StepFn:
    """`step_fn` with each row's prompt forced at its first steps and EOS forced once
    it has max_new_tokens new tokens. prompt: int32 [N, P], 0-padded."""
    lengths = prompt_lengths(prompt)
    stop_at = lengths + tf.cast(max_new_tokens, tf.int32)
    padded = tf.pad(tf.cast(prompt, tf.int32), [[0, 0], [0, 1]])  # P may be 0
    last = tf.shape(padded)[1] - 1

    def step(previous_ids: tf.Tensor, index: tf.Tensor, state):
        logits, state = step_fn(previous_ids, index, state)
        logits = tf.cast(logits, tf.float32)
        in_prompt = index < lengths
        target = tf.where(in_prompt, tf.gather(padded, tf.minimum(index, last), axis=1), eos_id)
        forced = tf.one_hot(target, tf.shape(logits)[-1], on_value=0.0, off_value=NEG_INF)
        return tf.where((in_prompt | (index >= stop_at))[:, None], forced, logits), state

    return step


def exact_length_step(step_fn: StepFn, end_index: tf.Tensor, eos_id: int) -> StepFn:
    """`step_fn` whose row r cannot choose EOS before step end_index[r] and must choose it
    there (log-probability 0): its output has exactly end_index[r] tokens before EOS
    (T2T's force_decode_length). end_index: int32 [N]."""
    end_index = tf.cast(end_index, tf.int32)

    def step(previous_ids: tf.Tensor, index: tf.Tensor, state):
        logits, state = step_fn(previous_ids, index, state)
        logits = tf.cast(logits, tf.float32)
        vocab = tf.shape(logits)[-1]
        is_eos = tf.equal(tf.range(vocab), eos_id)[None, :]
        early = (index < end_index)[:, None]
        without_eos = tf.where(is_eos & early, tf.constant(NEG_INF, tf.float32), logits)
        only_eos = tf.one_hot(tf.fill(tf.shape(end_index), eos_id), vocab, on_value=0.0,
                              off_value=NEG_INF)
        return tf.where(early, without_eos, only_eos), state

    return step


def continuation(ids: tf.Tensor, lengths: tf.Tensor, max_new_tokens: tf.Tensor) -> tf.Tensor:
    """ids [B, L] (or [B, K, L]) -> the max_new_tokens ids after each row's prompt
    (lengths [B]), 0 past the end."""
    length = tf.shape(ids)[-1]
    offsets = tf.range(tf.cast(max_new_tokens, tf.int32))
    if ids.shape.rank == 3:
        lengths = tf.broadcast_to(lengths[:, None], tf.shape(ids)[:2])
    index = lengths[..., None] + offsets
    gathered = tf.gather(ids, tf.minimum(index, length - 1), batch_dims=ids.shape.rank - 1)
    return tf.where(index < length, gathered, tf.zeros_like(gathered))
