"""Tests of t2t.layers.attention: bias masks and MultiHeadAttention (full and cached)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t.layers import attention

NEG = -1e9


def random(shape, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def make_attention(hidden=16, heads=4, **kwargs):
    tf.random.set_seed(0)
    return attention.MultiHeadAttention(hidden, heads, **kwargs)


# ------------------------------------------------------------------ biases
def test_padding_bias_values_and_shape():
    bias = attention.padding_bias(tf.constant([[1, 1, 0], [1, 0, 0]]))
    assert bias.shape == (2, 1, 1, 3)
    np.testing.assert_array_equal(bias.numpy()[:, 0, 0, :], [[0, 0, NEG], [0, NEG, NEG]])


def test_padding_bias_accepts_float_nonpadding():
    bias = attention.padding_bias(tf.constant([[1.0, 0.0]]))
    np.testing.assert_array_equal(bias.numpy().reshape(-1), [0, NEG])


def test_causal_bias_values_and_shape():
    bias = attention.causal_bias(4)
    assert bias.shape == (1, 1, 4, 4)
    expected = np.triu(np.full([4, 4], NEG, np.float32), k=1)
    np.testing.assert_array_equal(bias.numpy()[0, 0], expected)
    # Row i allows exactly the positions 0..i.
    np.testing.assert_array_equal((bias.numpy()[0, 0] == 0).sum(axis=1), [1, 2, 3, 4])


def test_causal_bias_of_a_tensor_length():
    bias = tf.function(lambda x: attention.causal_bias(tf.shape(x)[1]))(tf.zeros([1, 3]))
    np.testing.assert_array_equal(bias.numpy()[0, 0], np.triu(np.full([3, 3], NEG), k=1))


def test_segment_bias_values_and_shape():
    query = tf.constant([[1, 1, 2]])
    memory = tf.constant([[1, 2, 2, 0]])
    bias = attention.segment_bias(query, memory)
    assert bias.shape == (1, 1, 3, 4)
    expected = [
        [0, NEG, NEG, NEG],
        [0, NEG, NEG, NEG],
        [NEG, 0, 0, NEG],
    ]
    np.testing.assert_array_equal(bias.numpy()[0, 0], expected)


def test_embedding_to_nonpadding():
    embedded = tf.constant([[[0.0, 0.0], [0.0, 1.0], [2.0, 0.0]]])
    np.testing.assert_array_equal(attention.embedding_to_nonpadding(embedded).numpy(), [[0, 1, 1]])


# ------------------------------------------------------- MultiHeadAttention
def test_output_shape_cross_and_self_attention():
    layer = make_attention(hidden=16, heads=4)
    query, memory = random([2, 5, 16]), random([2, 7, 16], seed=1)
    assert layer(query, memory).shape == (2, 5, 16)
    assert layer(query).shape == (2, 5, 16)


def test_output_shape_with_other_key_and_value_channels():
    layer = make_attention(hidden=16, heads=2, key_channels=8, value_channels=12)
    out = layer(random([3, 4, 16]), random([3, 6, 16], seed=1))
    assert out.shape == (3, 4, 16)
    assert layer.key_depth == 4 and layer.value_depth == 6
    assert tuple(layer.q.kernel.shape) == (16, 8)
    assert tuple(layer.v.kernel.shape) == (16, 12)


def test_projections_have_no_bias():
    layer = make_attention()
    layer(random([1, 2, 16]))
    assert len(layer.trainable_weights) == 4  # q, k, v, output kernels only


@pytest.mark.parametrize(
    "hidden, heads, kwargs",
    [(10, 3, {}), (16, 4, {"key_channels": 10}), (16, 4, {"value_channels": 6})],
)
def test_heads_must_divide_channels(hidden, heads, kwargs):
    with pytest.raises(ValueError, match="divisible by num_heads"):
        attention.MultiHeadAttention(hidden, heads, **kwargs)


def test_padded_memory_position_gets_zero_weight():
    layer = make_attention()
    query, memory = random([2, 3, 16]), random([2, 5, 16], seed=1)
    nonpadding = tf.constant([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
    bias = attention.padding_bias(nonpadding)
    out = layer(query, memory, bias=bias)
    perturbed = memory.numpy()
    perturbed[0, 3:] += 100.0 * np.random.default_rng(2).normal(size=[2, 16])
    perturbed[1, 4] -= 50.0
    np.testing.assert_allclose(layer(query, tf.constant(perturbed), bias=bias).numpy(), out.numpy(),
                               rtol=0, atol=1e-6)
    # Without the bias the same perturbation changes the output (the check can fail).
    unmasked = layer(query, tf.constant(perturbed)).numpy()
    assert np.abs(unmasked - layer(query, memory).numpy()).max() > 1e-3


def test_causal_self_attention_ignores_future_positions():
    layer = make_attention()
    length = 6
    x = random([2, length, 16])
    bias = attention.causal_bias(length)
    out = layer(x, bias=bias).numpy()
    for i in range(length - 1):
        changed = x.numpy()
        changed[:, i + 1:] = np.random.default_rng(i).normal(size=changed[:, i + 1:].shape)
        new = layer(tf.constant(changed), bias=bias).numpy()
        np.testing.assert_allclose(new[:, : i + 1], out[:, : i + 1], rtol=0, atol=1e-6)
        assert np.abs(new[:, i + 1:] - out[:, i + 1:]).max() > 1e-4


def test_attention_dropout_only_in_training():
    layer = make_attention(dropout=0.5)
    x = random([2, 4, 16])
    np.testing.assert_array_equal(layer(x, training=False).numpy(), layer(x).numpy())
    assert np.abs(layer(x, training=True).numpy() - layer(x).numpy()).max() > 1e-4


def test_memory_kv_equals_memory():
    layer = make_attention()
    query, memory = random([2, 3, 16]), random([2, 5, 16], seed=1)
    bias = attention.padding_bias(tf.constant([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]))
    expected = layer(query, memory, bias=bias).numpy()
    kv = layer.project_memory(memory)
    assert kv[0].shape == (2, 4, 5, 4) and kv[1].shape == (2, 4, 5, 4)
    np.testing.assert_allclose(layer(query, bias=bias, memory_kv=kv).numpy(), expected, atol=1e-6)


def _step_by_step(layer, x, heads, depth, decode_index=lambda t: t):
    batch, length, _ = x.shape
    cache = {"k": attention.empty_cache([batch, heads, length, depth], tf.float32),
             "v": attention.empty_cache([batch, heads, length, depth], tf.float32)}
    bias = attention.causal_bias(length)
    outputs = []
    for t in range(length):
        out, cache = layer(x[:, t:t + 1], bias=bias[:, :, t:t + 1, :], cache=cache,
                           decode_index=decode_index(t))
        outputs.append(out)
    return tf.concat(outputs, axis=1).numpy(), cache


def test_cached_decoding_equals_full_causal_attention():
    hidden, heads, length = 16, 4, 6
    layer = make_attention(hidden, heads)
    x = random([2, length, hidden])
    full = layer(x, bias=attention.causal_bias(length)).numpy()
    stepped, cache = _step_by_step(layer, x, heads, hidden // heads)
    np.testing.assert_allclose(stepped, full, rtol=1e-5, atol=1e-5)
    # The cache then holds the keys and values of every position.
    keys, values = layer.project_memory(x)
    np.testing.assert_allclose(cache["k"].numpy(), keys.numpy(), atol=1e-6)
    np.testing.assert_allclose(cache["v"].numpy(), values.numpy(), atol=1e-6)


def test_cached_decoding_with_tensor_index_in_a_tf_function():
    hidden, heads, length = 8, 2, 5
    layer = make_attention(hidden, heads)
    x = random([3, length, hidden], seed=3)
    full = layer(x, bias=attention.causal_bias(length)).numpy()
    bias = attention.causal_bias(length)

    @tf.function
    def decode(x):
        # Buffers from empty_cache: the cache is written in place (see write_position).
        cache = {"k": attention.empty_cache([3, heads, length, hidden // heads], tf.float32),
                 "v": attention.empty_cache([3, heads, length, hidden // heads], tf.float32)}
        outputs = tf.TensorArray(tf.float32, size=length)

        def body(i, cache_k, cache_v, outputs):
            c = {"k": cache_k, "v": cache_v}
            query = tf.gather(x, [i], axis=1)
            row = tf.gather(bias, [i], axis=2)
            out, c = layer(query, bias=row, cache=c, decode_index=i)
            return i + 1, c["k"], c["v"], outputs.write(i, out[:, 0])

        _, _, _, outputs = tf.while_loop(
            lambda i, *_: i < length, body, [tf.constant(0), cache["k"], cache["v"], outputs]
        )
        return tf.transpose(outputs.stack(), [1, 0, 2])

    np.testing.assert_allclose(decode(x).numpy(), full, rtol=1e-5, atol=1e-5)


def test_write_position_writes_one_position_in_place_of_an_owned_buffer():
    @tf.function
    def write_twice():
        buffer = attention.empty_cache([2, 3, 4, 5], tf.float32)
        buffer = attention.write_position(buffer, tf.ones([2, 3, 1, 5]), 1)
        return attention.write_position(buffer, 2 * tf.ones([2, 3, 1, 5]), tf.constant(3))

    expected = np.zeros([2, 3, 4, 5], np.float32)
    expected[:, :, 1], expected[:, :, 3] = 1, 2
    for _ in range(2):  # every call starts from a fresh zero buffer
        np.testing.assert_array_equal(write_twice().numpy(), expected)


def test_attention_over_beam_slots_matches_attention_over_reordered_caches():
    # 2 examples x 3 beams; each hypothesis' 4 past positions come from various slots.
    rng = np.random.default_rng(0)
    batch, beams, heads, length, depth = 2, 3, 2, 4, 5
    q = tf.constant(rng.normal(size=[batch * beams, heads, 1, depth]), tf.float32)
    k = tf.constant(rng.normal(size=[batch * beams, heads, length, depth]), tf.float32)
    v = tf.constant(rng.normal(size=[batch * beams, heads, length, depth]), tf.float32)
    slot_of = rng.integers(0, beams, size=[batch * beams, length])
    ancestry = tf.one_hot(slot_of, beams)
    bias = tf.constant([0.0, 0.0, 0.0, -1e9])[None, None, None, :]  # position 3 not yet written
    got = attention.attend_over_beam_slots(q, k, v, bias, ancestry).numpy()

    example = np.arange(batch * beams) // beams
    rows = example[:, None] * beams + slot_of  # [B*K, L]: cache row of each position
    positions = np.arange(length)
    k_gathered = k.numpy()[rows, :, positions[None, :]].transpose(0, 2, 1, 3)  # [B*K, N, L, D]
    v_gathered = v.numpy()[rows, :, positions[None, :]].transpose(0, 2, 1, 3)
    logits = tf.matmul(q, k_gathered, transpose_b=True) + bias
    want = tf.matmul(tf.nn.softmax(logits), v_gathered).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
