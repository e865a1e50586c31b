"""Tests of the greedy / sampling loop on a known Markov "model"."""

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t.decoding import greedy

EOS = 1
TABLE = np.log(np.array([
    [0.05, 0.15, 0.5, 0.3],
    [0.25, 0.25, 0.25, 0.25],
    [0.1, 0.5, 0.1, 0.3],
    [0.1, 0.2, 0.6, 0.1],
], np.float32))


def markov_step(previous_ids, index, state):
    return tf.gather(tf.constant(TABLE), previous_ids), state


def test_greedy_follows_argmax_and_stops_at_eos():
    ids, score = greedy.greedy_or_sample(markov_step, {"dummy": tf.zeros([1, 1])}, tf.constant(1), 6,
                                         eos_id=EOS)
    # 0 -> 2 (0.5) -> 1=EOS (0.5): then zeros.
    assert ids.numpy().tolist() == [[2, 1, 0, 0, 0, 0]]
    assert float(score[0]) == pytest.approx(math.log(0.5) * 2, rel=1e-5)



def test_sampling_with_a_seed_is_repeatable_and_varies():
    runs = [greedy.greedy_or_sample(markov_step, {"d": tf.zeros([64, 1])}, tf.constant(64), 5,
                                    temperature=1.0, seed=seed)[0].numpy() for seed in (1, 1, 2)]
    assert len({tuple(row) for row in runs[0]}) > 3  # samples differ between examples
    assert (runs[0][:, 0] == 2).mean() == pytest.approx(0.5, abs=0.2)


def test_max_steps_stops_early_and_keeps_the_buffer():
    """LiteRT export's use: a fixed buffer of decode_length, stopped after max_steps
    (a tensor known at run time), static loop shapes."""
    always_two = np.log(np.array([[0.1, 0.1, 0.7, 0.1]] * 4, np.float32))

    def step(previous_ids, index, state):
        return tf.gather(tf.constant(always_two), previous_ids), state

    ids, score = greedy.greedy_or_sample(step, {"d": tf.zeros([1, 3])}, 1, 6, eos_id=EOS,
                                         max_steps=tf.constant(4), dynamic_batch=False)
    assert ids.shape == (1, 6) and ids.numpy().tolist() == [[2, 2, 2, 2, 0, 0]]
    assert float(score[0]) == pytest.approx(math.log(0.7) * 4, rel=1e-5)
    ids, _ = greedy.greedy_or_sample(markov_step, {"d": tf.zeros([1, 1])}, 1, 6, eos_id=EOS,
                                     max_steps=tf.constant(5), dynamic_batch=False)
    assert ids.numpy().tolist() == [[2, 1, 0, 0, 0, 0]]  # EOS still stops first


def test_dynamic_batch_false_keeps_loop_shapes_static():
    def growing(previous_ids, index, state):  # a state whose batch axis changes
        return tf.gather(tf.constant(TABLE), previous_ids), {"d": tf.concat([state["d"]] * 2, 0)}

    traced = tf.function(lambda d: greedy.greedy_or_sample(
        growing, {"d": d}, 1, 3, eos_id=EOS, dynamic_batch=False))
    with pytest.raises(ValueError, match="shape"):
        traced.get_concrete_function(tf.TensorSpec([1, 1], tf.float32))
    relaxed = tf.function(lambda d: greedy.greedy_or_sample(growing, {"d": d}, 1, 3, eos_id=EOS))
    assert relaxed(tf.zeros([1, 1]))[0].shape == (1, 3)
