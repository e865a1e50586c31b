"""Tests of t2t.layers.relative_attention (Shaw et al. relative position self-attention)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t.layers import attention, relative_attention

HIDDEN, HEADS, MAX_REL = 8, 2, 2


def make_layer(causal=False, seed=0):
    tf.random.set_seed(seed)
    layer = relative_attention.RelativeMultiHeadAttention(HIDDEN, HEADS, MAX_REL, causal=causal)
    layer(tf.zeros([1, 3, HIDDEN]))
    rng = np.random.default_rng(seed)  # tables far from zero, so positions matter
    layer.relative_keys.assign(rng.normal(size=layer.relative_keys.shape).astype(np.float32))
    layer.relative_values.assign(rng.normal(size=layer.relative_values.shape).astype(np.float32))
    return layer


def inputs(batch, length, seed=1):
    return tf.constant(np.random.default_rng(seed).normal(size=[batch, length, HIDDEN]).astype(np.float32))


def naive(layer, x, bias=None):
    """Per (batch, head, i, j) pair in numpy: q_i.(k_j + aK[j-i]) / sqrt(D), then
    sum_j w_ij (v_j + aV[j-i]), then the output projection."""
    x = x.numpy()
    wq, wk, wv, wo = (d.kernel.numpy() for d in (layer.q, layer.k, layer.v, layer.output_transform))
    a_k, a_v = layer.relative_keys.numpy(), layer.relative_values.numpy()
    batch, length, _ = x.shape
    if bias is not None:
        bias = np.broadcast_to(bias, [batch, 1, length, length])
    depth = HIDDEN // HEADS
    out = np.zeros([batch, length, HEADS, depth], np.float32)
    for b in range(batch):
        q, k, v = x[b] @ wq, x[b] @ wk, x[b] @ wv
        for h in range(HEADS):
            s = slice(h * depth, (h + 1) * depth)
            for i in range(length):
                rel = [int(np.clip(j - i, -MAX_REL, MAX_REL)) + MAX_REL for j in range(length)]
                logits = np.array([q[i, s] @ (k[j, s] + a_k[rel[j]]) for j in range(length)]) / np.sqrt(depth)
                if bias is not None:
                    logits = logits + bias[b, 0, i]
                w = np.exp(logits - logits.max())
                w /= w.sum()
                out[b, i, h] = sum(w[j] * (v[j, s] + a_v[rel[j]]) for j in range(length))
    return out.reshape(batch, length, HIDDEN) @ wo


def test_positions_matrix_is_clipped_distance():
    m = relative_attention.relative_positions_matrix(3, 5, 2).numpy()
    np.testing.assert_array_equal(m[0], [2, 3, 4, 4, 4])
    np.testing.assert_array_equal(m[2], [0, 1, 2, 3, 4])
    one = relative_attention.relative_positions_matrix(1, 5, 2, query_start=3).numpy()
    np.testing.assert_array_equal(one[0], [0, 0, 1, 2, 3])  # distances -3..1 from position 3


def test_equals_a_naive_per_pair_computation():
    layer = make_layer()
    x = inputs(2, 6)  # longer than 2 * MAX_REL + 1: distances are clipped
    nonpadding = np.ones([2, 6], np.float32)
    nonpadding[1, 4:] = 0
    bias = attention.padding_bias(tf.constant(nonpadding))
    got = layer(x, bias=bias).numpy()
    np.testing.assert_allclose(got, naive(layer, x, bias.numpy()), rtol=1e-4, atol=1e-5)


def test_translation_invariant_yet_position_aware():
    layer = make_layer()
    x = inputs(1, 5)
    base = layer(x).numpy()
    # Shift right by 3 behind masked positions: the same outputs, shifted.
    shifted = tf.concat([inputs(1, 3, seed=9), x], axis=1)
    bias = attention.padding_bias(tf.constant([[0, 0, 0, 1, 1, 1, 1, 1]], tf.float32))
    np.testing.assert_allclose(layer(shifted, bias=bias).numpy()[:, 3:], base, rtol=1e-5, atol=1e-5)
    # Plain attention would be permutation-equivariant; relative attention is not.
    perm = [4, 2, 0, 3, 1]
    permuted = layer(tf.gather(x, perm, axis=1)).numpy()
    assert np.abs(permuted - base[:, perm]).max() > 1e-3


def test_causal_mask():
    layer = make_layer(causal=True)
    x = inputs(1, 5).numpy()
    base = layer(tf.constant(x)).numpy()
    for t in range(5):
        changed = x.copy()
        changed[:, t] += 1.0
        new = layer(tf.constant(changed)).numpy()
        np.testing.assert_allclose(new[:, :t], base[:, :t], rtol=1e-5, atol=1e-6)
        assert np.abs(new[:, t:] - base[:, t:]).max() > 1e-4


def test_cached_steps_equal_the_full_causal_pass():
    layer = make_layer(causal=True)
    batch, length = 2, 6
    x = inputs(batch, length)
    full = layer(x).numpy()
    depth = HIDDEN // HEADS
    cache = {"k": tf.zeros([batch, HEADS, length, depth]), "v": tf.zeros([batch, HEADS, length, depth])}
    steps = []
    for t in range(length):
        out, cache = layer(x[:, t:t + 1], cache=cache, decode_index=tf.constant(t))
        steps.append(out.numpy())
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)


def test_needs_a_positive_max_relative_position_and_no_memory():
    with pytest.raises(ValueError, match="max_relative_position"):
        relative_attention.RelativeMultiHeadAttention(HIDDEN, HEADS, 0)
    with pytest.raises(ValueError, match="self-attention only"):
        make_layer()(inputs(1, 2), memory=inputs(1, 3))
