"""Sinusoidal position signals (Tensor2Tensor's add_timing_signal_1d)."""

from __future__ import annotations

import math

import tensorflow as tf


def timing_signal_from_positions(
    positions: tf.Tensor, channels: int, min_timescale: float = 1.0, max_timescale: float = 1.0e4
) -> tf.Tensor:
    """[..., channels] signal for integer `positions` [...]: sines then cosines.

    Channel i of the first half is sin(pos / timescale_i), of the second half the cosine,
    with timescales spaced geometrically from min to max; an odd channel count is padded.
    """
    num_timescales = channels // 2
    log_increment = math.log(float(max_timescale) / float(min_timescale)) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * tf.exp(tf.range(num_timescales, dtype=tf.float32) * -log_increment)
    scaled = tf.cast(positions, tf.float32)[..., None] * inv_timescales
    signal = tf.concat([tf.sin(scaled), tf.cos(scaled)], axis=-1)
    if channels % 2:
        signal = tf.pad(signal, [[0, 0]] * (len(signal.shape) - 1) + [[0, 1]])
    return signal


def timing_signal(length: int | tf.Tensor, channels: int, start_index: int | tf.Tensor = 0) -> tf.Tensor:
    """[1, length, channels] signal for positions start_index .. start_index + length - 1."""
    positions = tf.range(length) + start_index
    return timing_signal_from_positions(positions, channels)[None]


def add_timing_signal(x: tf.Tensor, positions: tf.Tensor | None = None, start_index: int | tf.Tensor = 0) -> tf.Tensor:
    """x [B, T, H] plus the signal of its positions (per-example `positions` [B, T] when packed)."""
    channels = x.shape[-1]
    if positions is not None:
        signal = timing_signal_from_positions(positions, channels)
    else:
        signal = timing_signal(tf.shape(x)[1], channels, start_index)
    return x + tf.cast(signal, x.dtype)
