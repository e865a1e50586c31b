"""vocab_ops: the hand-written gradients equal TensorFlow's own, values and gradients."""

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t.layers import vocab_ops


def _reference_xent(logits, labels, vocab, eps):
    """TensorFlow's fused op on one-hot smoothed labels (what t2t used before)."""
    confidence, low = 1.0 - eps, eps / (vocab - 1)
    soft = tf.one_hot(labels, vocab, on_value=confidence, off_value=low)
    normalizing = -(confidence * math.log(confidence) + (vocab - 1) * low * math.log(low + 1e-20)) if eps else 0.0
    return tf.nn.softmax_cross_entropy_with_logits(labels=soft, logits=logits) - normalizing


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cross_entropy_and_its_gradient_equal_the_fused_op(eps):
    rng = np.random.default_rng(0)
    vocab = 37
    logits = tf.constant(rng.normal(0, 3, [2, 5, vocab]), tf.float32)
    labels = tf.constant(rng.integers(0, vocab, [2, 5]), tf.int32)
    weights = tf.constant(rng.uniform(0, 1, [2, 5]), tf.float32)
    results = []
    for fn in (vocab_ops.smoothed_cross_entropy, _reference_xent):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            xent = fn(logits, labels, vocab, eps)
            loss = tf.reduce_sum(xent * weights)
        results.append((xent.numpy(), tape.gradient(loss, logits).numpy()))
    assert results[0][0].shape == (2, 5)
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)


def test_cross_entropy_of_bfloat16_logits_is_float32_and_differentiable():
    logits = tf.cast(tf.random.stateless_normal([3, 11], [1, 2]), tf.bfloat16)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        xent = vocab_ops.smoothed_cross_entropy(logits, tf.constant([0, 4, 10]), 11, 0.1)
        total = tf.reduce_sum(xent)
    assert xent.dtype == tf.float32
    grad = tape.gradient(total, logits)
    assert grad.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.reduce_sum(tf.cast(grad, tf.float32), -1), 0.0, atol=0.02)


def test_a_label_outside_the_vocabulary_fails_loudly():
    with pytest.raises(tf.errors.InvalidArgumentError):
        vocab_ops.smoothed_cross_entropy(tf.zeros([2, 5]), tf.constant([1, 5]), 5, 0.1)


def test_logits_matmul_and_its_gradients_equal_tensordot():
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=[2, 3, 8]), tf.float32)
    w = tf.constant(rng.normal(size=[13, 8]), tf.float32)
    upstream = tf.constant(rng.normal(size=[2, 3, 13]), tf.float32)
    results = []
    for fn in (vocab_ops.logits_matmul, lambda a, b: tf.tensordot(a, b, axes=[[2], [1]])):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            out = fn(x, w)
            loss = tf.reduce_sum(out * upstream)
        results.append([out.numpy(), *[g.numpy() for g in tape.gradient(loss, [x, w])]])
    assert results[0][0].shape == (2, 3, 13)
    for mine, theirs in zip(results[0], results[1], strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)


def test_logits_matmul_keeps_static_shapes_in_a_graph():
    @tf.function(input_signature=[tf.TensorSpec([None, 7, 8]), tf.TensorSpec([13, 8])])
    def project(x, w):
        out = vocab_ops.logits_matmul(x, w)
        assert out.shape.as_list() == [None, 7, 13]
        return out

    assert project(tf.ones([2, 7, 8]), tf.ones([13, 8])).shape == (2, 7, 13)
