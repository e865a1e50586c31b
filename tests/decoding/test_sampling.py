"""Tests of token choice: greedy, temperature, top-k, nucleus."""

import numpy as np
import tensorflow as tf

from t2t.decoding import sampling

LOGITS = tf.constant([[0.0, 3.0, 2.0, -1.0], [5.0, 0.0, 0.0, 4.9]])


def test_greedy():
    assert sampling.sample(LOGITS).numpy().tolist() == [1, 0]


def test_top_k_one_is_greedy_even_when_sampling():
    for seed in range(5):
        ids = sampling.sample(LOGITS, temperature=1.0, top_k=1, seed=seed)
        assert ids.numpy().tolist() == [1, 0]


def test_filter_logits_top_k_and_top_p():
    kept = sampling.filter_logits(LOGITS, top_k=2).numpy() > -1e8
    assert kept.tolist() == [[False, True, True, False], [True, False, False, True]]
    # Row 0: softmax ~ [0.035, 0.70, 0.26, 0.01]: top_p 0.5 keeps only the best token.
    kept = sampling.filter_logits(LOGITS, top_p=0.5).numpy() > -1e8
    assert kept[0].tolist() == [False, True, False, False]
    assert kept[1].tolist() == [True, False, False, False]


def test_sampling_follows_the_distribution():
    logits = tf.math.log(tf.constant([[0.7, 0.3]] * 4000))
    ids = sampling.sample(logits, temperature=1.0, seed=3).numpy()
    assert abs(np.mean(ids == 0) - 0.7) < 0.03
