"""Tests of t2t.layers.positional: Tensor2Tensor's sinusoidal timing signal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t.layers import positional


def t2t_timing_signal(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    """common_attention.get_timing_signal_1d, in numpy: [1, length, channels]."""
    position = np.arange(length, dtype=np.float64) + start_index
    num_timescales = channels // 2
    log_increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * np.exp(np.arange(num_timescales) * -log_increment)
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    signal = np.pad(signal, [[0, 0], [0, channels % 2]])
    return signal[None].astype(np.float32)


@pytest.mark.parametrize("length, channels", [(7, 16), (50, 512), (3, 2)])
def test_timing_signal_matches_t2t_formula(length, channels):
    signal = positional.timing_signal(length, channels)
    assert signal.shape == (1, length, channels)
    np.testing.assert_allclose(signal.numpy(), t2t_timing_signal(length, channels), atol=2e-5)


def test_channel_zero_is_sin_of_position_and_the_second_half_cosines():
    length, channels = 20, 8
    signal = positional.timing_signal(length, channels).numpy()[0]
    positions = np.arange(length)
    np.testing.assert_allclose(signal[:, 0], np.sin(positions), atol=1e-5)
    np.testing.assert_allclose(signal[:, channels // 2], np.cos(positions), atol=1e-5)
    # The last sine uses the max timescale 1e4.
    np.testing.assert_allclose(signal[:, channels // 2 - 1], np.sin(positions / 1e4), atol=1e-6)
    np.testing.assert_allclose(signal[:, -1], np.cos(positions / 1e4), atol=1e-6)


def test_odd_channels_are_zero_padded():
    signal = positional.timing_signal(6, 7).numpy()
    assert signal.shape == (1, 6, 7)
    np.testing.assert_array_equal(signal[0, :, 6], 0.0)
    np.testing.assert_allclose(signal, t2t_timing_signal(6, 7), atol=1e-5)


def test_start_index_shifts_positions():
    np.testing.assert_allclose(
        positional.timing_signal(4, 10, start_index=3).numpy(),
        positional.timing_signal(7, 10).numpy()[:, 3:],
        atol=1e-6,
    )


def test_add_timing_signal_adds_to_every_example():
    x = tf.constant(np.random.default_rng(0).normal(size=[3, 5, 12]).astype(np.float32))
    out = positional.add_timing_signal(x)
    assert out.shape == x.shape
    np.testing.assert_allclose(out.numpy() - x.numpy(),
                               np.broadcast_to(t2t_timing_signal(5, 12), [3, 5, 12]), atol=1e-5)


def test_add_timing_signal_inside_tf_function_with_unknown_length():
    fn = tf.function(positional.add_timing_signal,
                     input_signature=[tf.TensorSpec([None, None, 6], tf.float32)])
    out = fn(tf.zeros([2, 4, 6]))
    np.testing.assert_allclose(out.numpy()[0], t2t_timing_signal(4, 6)[0], atol=1e-5)


def test_packed_positions_equal_the_unpacked_signal():
    channels = 10
    # One row holding an example of length 3, one of length 2, and one padding position.
    positions = tf.constant([[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 4, 5]])
    x = tf.zeros([2, 6, channels])
    packed = positional.add_timing_signal(x, positions=positions).numpy()
    unpacked = t2t_timing_signal(6, channels)[0]
    np.testing.assert_allclose(packed[0, :3], unpacked[:3], atol=1e-5)
    np.testing.assert_allclose(packed[0, 3:5], unpacked[:2], atol=1e-5)
    np.testing.assert_allclose(packed[1], unpacked, atol=1e-5)
    np.testing.assert_allclose(
        positional.timing_signal_from_positions(positions, channels).numpy(), packed, atol=1e-6
    )


def test_add_timing_signal_keeps_dtype():
    out = positional.add_timing_signal(tf.zeros([1, 3, 4], tf.float16))
    assert out.dtype == tf.float16
