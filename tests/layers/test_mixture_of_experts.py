"""Tests of t2t.layers.mixture_of_experts (noisy top-k gated mixture of experts)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t.layers import mixture_of_experts as moe

HIDDEN, EXPERTS, K, FILTER = 6, 4, 2, 5


def make_layer(seed=0, k=K):
    tf.random.set_seed(seed)
    layer = moe.MixtureOfExperts(HIDDEN, [FILTER], EXPERTS, k=k, loss_coef=0.1, seed=seed)
    layer(tf.zeros([1, 2, HIDDEN]))
    rng = np.random.default_rng(seed)  # T2T starts the gate at zero; make routing vary
    layer.w_gate.assign(rng.normal(size=[HIDDEN, EXPERTS]).astype(np.float32))
    layer.w_noise.assign(rng.normal(size=[HIDDEN, EXPERTS]).astype(np.float32) * 0.1)
    return layer


def tokens(n, seed=1):
    return tf.constant(np.random.default_rng(seed).normal(size=[n, HIDDEN]).astype(np.float32))


def expert_numpy(layer, e, x):
    w0, w1 = (kernel.numpy()[e] for kernel in layer.expert_kernels)
    return np.maximum(x @ w0, 0.0) @ w1 * (FILTER / HIDDEN) ** -0.5  # T2T's hidden scaling


@pytest.mark.parametrize("training", [False, True])
def test_each_token_goes_to_exactly_k_experts_with_gates_summing_to_one(training):
    layer = make_layer()
    gates, load = layer.gate(tokens(32), training=training)
    gates = gates.numpy()
    assert gates.shape == (32, EXPERTS) and (gates >= 0).all()
    np.testing.assert_array_equal((gates > 0).sum(axis=1), np.full(32, K))
    np.testing.assert_allclose(gates.sum(axis=1), 1.0, rtol=1e-6)
    assert load.shape == (EXPERTS,)
    if not training:  # the load is the token count per expert
        np.testing.assert_array_equal(load.numpy(), (gates > 0).sum(axis=0))


def test_training_noise_changes_routing_evaluation_does_not():
    layer = make_layer()
    x = tokens(64)
    a, b = layer.gate(x, training=False)[0], layer.gate(x, training=False)[0]
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c, d = layer.gate(x, training=True)[0], layer.gate(x, training=True)[0]
    assert not np.array_equal(c.numpy() > 0, d.numpy() > 0)


def test_output_equals_a_hand_computation_for_fixed_gates():
    layer = make_layer()
    x = tokens(3)
    gates = np.array([[0.7, 0.0, 0.3, 0.0], [0.0, 0.5, 0.0, 0.5], [0.0, 0.0, 0.9, 0.1]], np.float32)
    got = layer.dispatch_and_combine(x, tf.constant(gates)).numpy()
    expected = np.stack([sum(gates[n, e] * expert_numpy(layer, e, x.numpy()[n]) for e in range(EXPERTS))
                         for n in range(3)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_call_at_evaluation_equals_numpy_top_k_softmax_gating():
    layer = make_layer()
    x = tokens(10, seed=3).numpy()
    y, loss = layer(tf.constant(x.reshape(2, 5, HIDDEN)), training=False)
    logits = x @ layer.w_gate.numpy()
    expected = np.zeros_like(x)
    for n in range(10):
        top = np.argsort(-logits[n])[:K]
        weights = np.exp(logits[n, top] - logits[n, top].max())
        weights /= weights.sum()
        expected[n] = sum(w * expert_numpy(layer, e, x[n]) for w, e in zip(weights, top, strict=True))
    np.testing.assert_allclose(y.numpy().reshape(10, HIDDEN), expected, rtol=1e-5, atol=1e-6)
    assert loss.shape == () and float(loss) >= 0.0


def test_balance_loss_is_zero_when_uniform_and_positive_otherwise():
    assert float(moe.cv_squared(tf.constant([2.0, 2.0, 2.0, 2.0]))) == pytest.approx(0.0, abs=1e-9)
    assert float(moe.cv_squared(tf.constant([1.0, 3.0]))) == pytest.approx(0.25, rel=1e-6)
    # Each of 4 experts gets half of 4 tokens' gates: uniform importance and load.
    uniform = tf.constant([[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], [0.5, 0, 0.5, 0], [0, 0.5, 0, 0.5]])
    load = tf.reduce_sum(tf.cast(uniform > 0, tf.float32), 0)
    assert float(moe.load_balancing_loss(uniform, load, 0.01)) == pytest.approx(0.0, abs=1e-9)
    skewed = tf.constant([[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0.5, 0, 0.5, 0], [0, 0.5, 0, 0.5]])
    load = tf.reduce_sum(tf.cast(skewed > 0, tf.float32), 0)
    assert float(moe.load_balancing_loss(skewed, load, 0.01)) > 1e-3


def test_balance_loss_gradient_reaches_the_gate_weights():
    layer = make_layer()
    x = tf.reshape(tokens(16), [2, 8, HIDDEN])
    with tf.GradientTape() as tape:
        _, loss = layer(x, training=True)
    grads = tape.gradient(loss, [layer.w_gate, layer.w_noise])
    assert float(loss) > 0.0
    assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0.0 for g in grads)


def test_experts_are_stacked_and_start_different():
    layer = make_layer()
    assert [tuple(v.shape) for v in layer.expert_kernels] == [(EXPERTS, HIDDEN, FILTER), (EXPERTS, FILTER, HIDDEN)]
    first = layer.expert_kernels[0].numpy()
    assert not np.allclose(first[0], first[1])
    # Glorot scaled by one expert's fans (std 1 / sqrt(fan_avg)), not the stack's (half that).
    assert 0.7 < first.std() * np.sqrt((HIDDEN + FILTER) / 2) < 1.4


def test_k_above_the_number_of_experts_is_refused():
    with pytest.raises(ValueError, match="k=5"):
        moe.MixtureOfExperts(HIDDEN, [FILTER], EXPERTS, k=5)
