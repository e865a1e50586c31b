"""Sinusoidal position signals: Tensor2Tensor's add_timing_signal_1d ("timing") and the
exponents of "Attention Is All You Need" as Marian lays them out ("sinusoid")."""

from __future__ import annotations

import math

import tensorflow as tf

# hparams.pos values that add a signal to the embeddings (t2t.models.transformer).
SIGNAL_KINDS = ("timing", "sinusoid")


def timing_signal_from_positions(
    positions: tf.Tensor, channels: int, min_timescale: float = 1.0, max_timescale: float = 1.0e4,
    kind: str = "timing",
) -> tf.Tensor:
    """[..., channels] signal for integer `positions` [...]: sines then cosines.

    Channel i of the first half is sin(pos / timescale_i), of the second half the cosine;
    an odd channel count is padded. "timing" (Tensor2Tensor): timescales spaced
    geometrically from min to max over the half, 1 / timescale_i = exp(-i ln(max/min) /
    (C/2 - 1)); "sinusoid" (Vaswani et al., Marian / OPUS-MT): exp(-i ln(max/min) / (C/2)),
    i.e. pos / 10000^(2i/C).
    """
    if kind not in SIGNAL_KINDS:
        raise ValueError(f"Unknown position signal {kind!r}: use one of {SIGNAL_KINDS}.")
    num_timescales = channels // 2
    steps = max(num_timescales - 1, 1) if kind == "timing" else max(num_timescales, 1)
    log_increment = math.log(float(max_timescale) / float(min_timescale)) / steps
    inv_timescales = min_timescale * tf.exp(tf.range(num_timescales, dtype=tf.float32) * -log_increment)
    scaled = tf.cast(positions, tf.float32)[..., None] * inv_timescales
    signal = tf.concat([tf.sin(scaled), tf.cos(scaled)], axis=-1)
    if channels % 2:
        signal = tf.pad(signal, [[0, 0]] * (len(signal.shape) - 1) + [[0, 1]])
    return signal


def timing_signal(length: int | tf.Tensor, channels: int, start_index: int | tf.Tensor = 0,
                  kind: str = "timing") -> tf.Tensor:
    """[1, length, channels] signal for positions start_index .. start_index + length - 1."""
    positions = tf.range(length) + start_index
    return timing_signal_from_positions(positions, channels, kind=kind)[None]


def add_timing_signal(x: tf.Tensor, positions: tf.Tensor | None = None, start_index: int | tf.Tensor = 0,
                      kind: str = "timing") -> tf.Tensor:
    """x [B, T, H] plus the signal of its positions (per-example `positions` [B, T] when
    packed); `kind` as in timing_signal_from_positions."""
    channels = x.shape[-1]
    if positions is not None:
        signal = timing_signal_from_positions(positions, channels, kind=kind)
    else:
        signal = timing_signal(tf.shape(x)[1], channels, start_index, kind=kind)
    return x + tf.cast(signal, x.dtype)
